"""Fuzzing every public entry with malformed and unusual calls, crash-safe.

A *case* is plain data (:mod:`.cases`); the worker process builds the call from it,
runs it on its surface (:mod:`.surfaces`) and classifies the outcome:

* ``accepted``  - the call succeeded and matched the float64 reference;
* ``rejected``  - it raised the surface's documented error type, naming the argument;
* ``bad-error`` / ``mismatch`` - anything else.

:class:`Runner` sends cases one at a time to a persistent worker (multiprocessing, spawn);
a worker that dies (segfault, abort) or exceeds the per-case timeout is a *crash* or
*hang*, is replaced, and fuzzing goes on.  :class:`Tally` counts the outcomes.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass, field

import numpy as np

from fbnops.testing import close_to_oracle

from .cases import DTYPES, MUTATIONS, SURFACES, Built, build_inputs
from .surfaces import alias_names, check_rejection, run_cc, run_dml_onednn, run_graph, run_java, run_runfile

__all__ = ["SURFACES", "DTYPES", "MUTATIONS", "run_case", "random_case", "Runner", "Tally"]


def _reference(case: dict, built: Built):
    """float64 outputs for an accepted call (on the values the call actually saw)."""
    with np.errstate(all="ignore"):  # NaN/Inf cases: the reference propagates them too
        return _reference_values(case, built)


def _reference_values(case: dict, built: Built):
    from fbnops.kernels import reference
    from fbnops.ops.canonical import NdView

    i = {k: np.asarray(v) for k, v in built.inputs.items()}
    i = {k: v if v.dtype.kind == "f" else np.real(v).astype(np.float64) for k, v in i.items()}  # cast inputs
    a = built.attrs
    x = i["x"]
    view = NdView.for_data_format(x.shape, a["data_format"]).view
    if x.size == 0:
        return None
    if case["surface"] == "raw_fwd":
        y, m, v = reference.batch_norm(
            x.reshape(view),
            i["scale"],
            i["offset"],
            i["mean"],
            i["variance"],
            epsilon=a["epsilon"],
            is_training=a["is_training"],
            compute=np.float64,
        )
        return {"y": y.reshape(x.shape)}
    dx, ds, do = reference.batch_norm_grad(
        x.reshape(view),
        i["y_backprop"].reshape(view),
        i["scale"],
        i["reserve_space_1"],
        i["reserve_space_2"],
        epsilon=a["epsilon"],
        is_training=a["is_training"],
        compute=np.float64,
    )
    return {"x_backprop": dx.reshape(x.shape), "scale_backprop": ds, "offset_backprop": do}


def run_case(case: dict) -> str:
    """Execute one case in this process and classify it."""
    import fbnops
    from bindings_mirror import java
    from fbnops.errors import OpError

    surface = case["surface"]
    if surface == "__segfault__":  # for testing the harness itself
        import ctypes

        ctypes.string_at(0)
    if surface in ("dml", "onednn"):
        return run_dml_onednn(case)
    built = build_inputs(dict(case, surface="raw_fwd" if surface == "raw_fwd" else "raw_grad"))
    java_defaults = {}
    if surface in ("java", "raw_grad", "raw_fwd") and any(v is None for v in built.attrs.values()):
        built.expect = "accept"  # an option set to null/None is not set: the default applies (TF Java, tf.raw_ops)
        java_defaults = {"epsilon": 1e-4}
    if surface in ("raw_grad", "raw_fwd") and case["mutation"]["kind"] in ("dtype", "not_array"):
        # tf.raw_ops converts inputs: cast to the dtype of the input's attr group (then checked against the
        # reference), or TensorFlow's "Value for attr 'T' of double is not in the list ..." naming the attr
        built.expect, built.arg = "either", None
    op_type = "FusedBatchNormV3" if surface == "raw_fwd" else "FusedBatchNormGradV3"
    try:
        if surface in ("raw_grad", "raw_fwd"):
            out = getattr(fbnops.raw_ops, op_type)(**built.inputs, **built.attrs)._asdict()
        elif surface == "graph":
            out = run_graph(op_type, built)
        elif surface == "java":
            out = run_java(op_type, built)
        elif surface == "cc":
            out = run_cc(op_type, built)
            if isinstance(out, str):  # a non-OK Status: C++ never raises
                if built.expect == "accept":
                    return f"bad-error: Status {out}"
                if built.arg is not None and not any(n in out for n in alias_names(built.arg)):
                    return f"bad-error: status does not name '{built.arg}': {out}"
                return "rejected"
        else:
            out = run_runfile(op_type, built)
    except Exception as e:  # classify: documented type + message naming the argument
        if built.expect == "accept":
            return f"bad-error: accepted call raised {type(e).__name__}: {e}"
        allowed = {
            "raw_grad": (OpError, TypeError),
            "raw_fwd": (OpError, TypeError),
            "graph": (OpError, TypeError),
            "java": (java.TensorFlowException, java.IllegalArgumentException, TypeError),
            "cc": (TypeError,),
            "runfile": (ValueError,),
        }[surface]
        return check_rejection(e, allowed, built)
    if built.expect == "reject":
        return "bad-error: accepted a call that must be rejected"
    built.attrs.update({k: v for k, v in java_defaults.items() if built.attrs.get(k) is None})
    ref = _reference(dict(case, surface="raw_fwd" if surface == "raw_fwd" else "raw_grad"), built)
    if ref is None:
        return "accepted"
    for name, want in ref.items():
        if not close_to_oracle(out[name], want, case["dtype"]):
            return f"mismatch: {name}"
    return "accepted"


def _worker(conn):
    while True:
        case = conn.recv()
        if case is None:
            return
        try:
            conn.send(run_case(case))
        except BaseException as e:  # harness bug: report, do not die
            conn.send(f"harness-error: {type(e).__name__}: {e}\n{traceback.format_exc()}")


@dataclass
class Tally:
    cases: int = 0
    accepted: int = 0
    rejected: int = 0
    crashes: list = field(default_factory=list)
    hangs: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    by_surface: dict = field(default_factory=dict)

    def add(self, case: dict, outcome: str) -> None:
        self.cases += 1
        self.by_surface[case["surface"]] = self.by_surface.get(case["surface"], 0) + 1
        if outcome == "accepted":
            self.accepted += 1
        elif outcome == "rejected":
            self.rejected += 1
        elif outcome == "crash":
            self.crashes.append(case)
        elif outcome == "hang":
            self.hangs.append(case)
        else:
            self.failures.append((case, outcome))


class Runner:
    """A persistent child process; replaced when it dies or hangs."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.ctx = mp.get_context("spawn")
        self._start()

    def _start(self):
        self.parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, case: dict) -> str:
        try:
            self.parent.send(case)
            if self.parent.poll(self.timeout):
                return self.parent.recv()
            outcome = "hang"
        except (EOFError, BrokenPipeError, ConnectionResetError):
            outcome = "crash"
        self.proc.kill()
        self.proc.join()
        self._start()
        return outcome if outcome == "hang" else "crash"

    def close(self):
        try:
            self.parent.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()


def random_case(rng: np.random.Generator) -> dict:
    """One fuzz case drawn with NumPy (the benchmark's generator; the tests draw with Hypothesis)."""
    surface = SURFACES[rng.integers(len(SURFACES))]
    rank = 4 if surface in ("dml", "onednn") or rng.integers(2) else 5
    fmt = "NCHW" if surface in ("dml", "onednn") else ["NHWC", "NCHW"][rng.integers(2)]
    if rank == 5:
        fmt = {"NHWC": "NDHWC", "NCHW": "NCDHW"}[fmt]
    return {
        "surface": surface,
        "shape": [int(d) for d in rng.integers(1, 6, rank)],
        "data_format": fmt,
        "dtype": DTYPES[rng.integers(3)],
        "is_training": bool(rng.integers(2)),
        "seed": int(rng.integers(2**20)),
        "mutation": {"kind": MUTATIONS[rng.integers(len(MUTATIONS))], "pick": int(rng.integers(10_000))},
    }
