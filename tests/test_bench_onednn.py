"""The oneDNN benchmark peer times the case's own inputs, and the performance page's refresh command
is the one that wrote ``docs/assets/bench.json`` (issue 24).

The peer's results, read back from the real primitives after a timed run, must equal fbnops' on the
same ``case.data`` (a peer on data of its own would give other numbers): in every layout, plain and
blocked, gradient and forward. The page's command, parsed by ``fbnops bench``'s own argument parser,
must ask for the rounds, peers, dtypes, layouts, ops and shapes that ``bench.json`` holds.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import fbnops
from fbnops.testing import extras
from fbnops.tools.bench.__main__ import add_arguments
from fbnops.tools.bench.cases import EPS, Case
from fbnops.tools.bench.peers import PEERS

ROOT = Path(__file__).resolve().parents[1]


def _fbnops(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = case.data
    empty = np.zeros(0, np.float32)
    if case.op == "grad":
        out = fbnops.raw_ops.FusedBatchNormGradV3(
            y_backprop=d["dy"], x=d["x"], scale=d["scale"], reserve_space_1=d["mean"], reserve_space_2=d["var"],
            reserve_space_3=empty, epsilon=EPS, data_format=case.layout,
        )  # fmt: skip
        return out[0], out[1], out[2]
    out = fbnops.raw_ops.FusedBatchNormV3(
        x=d["x"], scale=d["scale"], offset=d["offset"], mean=empty, variance=empty, epsilon=EPS,
        data_format=case.layout,
    )  # fmt: skip
    return out[0], out[3], out[4]  # y, reserve_space_1 (batch mean), reserve_space_2 (biased, as oneDNN's)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW", "NDHWC", "NCDHW"])
@pytest.mark.parametrize("op", ["grad", "forward"])
def test_the_onednn_peer_computes_on_the_cases_inputs(layout, op):
    reason = PEERS["onednn"].missing()
    if reason:
        pytest.skip(f"{extras.reason('bench-onednn')}: {reason}")
    from fbnops.tools.bench import onednn

    case = Case((2, 4, 6, 16), layout, "float32", op)
    case.make(seed=3)
    want = _fbnops(case)
    for blocked in (False, True) if layout in ("NHWC", "NCHW") else (False,):
        call = onednn.onednn_call(case, blocked, threads=1)
        call()
        for name, got, expected in zip(("y/dx", "mean/dscale", "var/doffset"), call.results(), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5, err_msg=f"{name}, blocked={blocked}")


def _page_command() -> list[str]:
    text = (ROOT / "docs" / "performance.md.in").read_text()
    block = re.search(r"To refresh them:\n\n```bash\n(.*?)\n```", text, re.S).group(1)
    return shlex.split(block.replace("\\\n", " "))


def test_the_refresh_command_reproduces_bench_json():
    words = _page_command()
    assert words[:2] == ["fbnops", "bench"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(words[2:])
    doc = json.loads((ROOT / "docs" / "assets" / "bench.json").read_text())
    rows = doc["rows"]
    assert args.json == "docs/assets/bench.json" and args.plot == "docs/assets/perf.png"
    assert args.rounds == doc["rounds"]
    assert args.peers.split(",") == doc["peers"]
    assert sorted(args.dtypes) == sorted({r["dtype"] for r in rows})
    assert sorted(args.ops) == sorted({r["op"] for r in rows})
    assert sorted(args.layouts) == sorted({r["layout"] for r in rows})
    assert sorted(map(tuple, args.shapes)) == sorted({tuple(r["shape"]) for r in rows})
    assert len(rows) == len(args.dtypes) * len(args.ops) * len(args.layouts) * len(args.shapes)
    if "command" in doc:  # files written since fbnops bench records its command
        recorded = parser.parse_args(shlex.split(doc["command"])[2:])
        for name in ("rounds", "peers", "dtypes", "ops", "layouts", "shapes"):
            assert getattr(recorded, name) == getattr(args, name), name
