"""Class 8, nothing lost: a refused call leaves its inputs, the graph, the previous output file and
the output buffers as they were; a run killed while writing leaves the old file or a complete new one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np

from bindings_mirror import directml as dml
from fbnops.cli import main
from fbnops.errors import InvalidArgumentError, OpError
from fbnops.framework.graph import Graph
from fbnops.framework.graphdef import graph_from_pbtxt

from .helpers import GOOD_DOC, F, dml_grad, doc_with, grad_inputs, raw_grad, tmp, unwritten
from .runner import attack


# ``scales``: 5 scales for 3 channels is the hostile call; the runner's own test passes 3 (a valid
# call) and must see this attack fail, so the unchanged-inputs check cannot pass without a refusal.
@attack(8, "raw_ops error leaves the inputs unchanged", expect="ok")
def test_raw_ops_error_leaves_the_inputs_unchanged(scales: int = 5):
    kw = grad_inputs()
    before = {k: v.copy() for k, v in kw.items() if isinstance(v, np.ndarray)}
    try:
        raw_grad(**dict(kw, scale=np.ones(scales, F)))
    except InvalidArgumentError:
        pass
    else:
        raise AssertionError("accepted a scale of 5 values for 3 channels")
    assert all(np.array_equal(before[k], kw[k]) for k in before)
    return "refused, inputs unchanged"


@attack(8, "failed GraphDef import leaves the graph untouched", expect="ok")
def test_failed_graphdef_import_leaves_the_graph_untouched():
    g = Graph.from_pbtxt('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }')
    before = g.to_pbtxt()
    try:  # a valid first node, then a Transpose of a float by a float permutation
        graph_from_pbtxt(
            'node { name: "y" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
            'node { name: "z" op: "Transpose" input: "y" input: "y" }',
            g,
        )
    except OpError:
        pass
    else:
        raise AssertionError("imported a Transpose whose permutation is a float")
    assert g.to_pbtxt() == before
    return "refused, graph unchanged"


@attack(8, "failed run leaves the previous output file intact", expect="ok")
def test_failed_run_leaves_the_previous_output_intact():
    out = tmp() / "out.npz"
    (tmp() / "good.json").write_text(json.dumps(GOOD_DOC))
    assert main(["run", str(tmp() / "good.json"), "--out", str(out)]) == 0
    before = out.read_bytes()
    (tmp() / "bad.json").write_text(json.dumps(doc_with(["ops", 0, "inputs", "scale"], {"value": [1, 1]})))
    assert main(["run", str(tmp() / "bad.json"), "--out", str(out)]) != 0
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp().iterdir()) == ["bad.json", "good.json", "out.npz"]
    return "intact"


@attack(8, "interrupted run (SIGKILL while writing) leaves the previous output intact", expect="ok", timeout=120)
def test_interrupted_run_leaves_the_previous_output_intact():
    out = tmp() / "out.npz"
    (tmp() / "good.json").write_text(json.dumps(GOOD_DOC))
    big = doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": [64, 64, 64, 3], "seed": 0}})
    (tmp() / "big.json").write_text(json.dumps(big))
    cli = [sys.executable, "-m", "fbnops.cli", "run"]
    assert subprocess.run([*cli, str(tmp() / "good.json"), "--out", str(out)]).returncode == 0
    before = out.read_bytes()
    for delay in (0.3, 0.6, 0.9, 1.2):
        p = subprocess.Popen([*cli, str(tmp() / "big.json"), "--out", str(out)])
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        now = out.read_bytes()
        if now != before:  # a new, complete file
            assert [a.shape for a in np.load(out).values()] == [(64, 64, 64, 3)]
        before = now
    return "intact"


# ``write_first``: the runner's own test writes into the outputs before the refused dispatch and must see
# this attack fail, so the guard bytes are really read.
@attack(8, "DirectML refused dispatch writes no output", expect="ok")
def test_directml_refused_dispatch_writes_no_output(write_first: bool = False):
    written: list = []
    dml_grad(bound=written)  # the same call with a valid binding: the guard check sees its writes
    assert not any(unwritten(b) for b in written), "an accepted dispatch left an output unwritten"
    outs: list = []
    try:
        if write_first:
            dml_grad(bound=outs)
        dml_grad(offset=-16, bound=None if write_first else outs)
    except dml.HRESULTError:
        pass
    else:
        raise AssertionError("accepted a negative offset")
    assert len(outs) == 3 and all(unwritten(b) for b in outs), "a refused dispatch wrote into an output"
    return "refused, outputs untouched"
