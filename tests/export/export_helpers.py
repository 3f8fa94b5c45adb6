"""What every export test shares: the prototypes, running an exported directory, comparing.

- :func:`prototypes` - named graph builders: the docs' example, V1/V2/V3 forward and gradient in
  every layout and dtype each version has, training and frozen, and the second-order gradient.
  Each builds into a scope and returns ``(feeds, fetches)``; :func:`batch` puts many into one
  graph (each under its own name scope) so one exported program runs them all.
- :func:`run_export` - ``bash DIR/run.sh``, then ``{fetch: array}`` from ``DIR/outputs``.
- :func:`assert_close` - an exported program's outputs against fbnops' own (``plan.expected``).

Tests import it as ``from export_helpers import ...`` (pytest puts this directory on ``sys.path``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fbnops
from fbnops.framework.graph import Graph, Output
from fbnops.framework.scope import Scope
from fbnops.testing import extras
from fbnops.tools.export import output_file

EXIT_MISSING = 3  # run.sh: the real library is not installed
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SHAPES = {"NHWC": (4, 3, 3, 3), "NCHW": (4, 3, 3, 3), "NDHWC": (2, 2, 3, 3, 3), "NCDHW": (2, 3, 2, 3, 3)}
FORWARD = {"V1": "FusedBatchNorm", "V2": "FusedBatchNormV2", "V3": "FusedBatchNormV3"}
# What each version accepts (TensorFlow's op registrations: V1 is float only; V1/V2 are 4-D only).
VERSION_DTYPES = {"V1": ("float32",), "V2": tuple(DTYPES), "V3": tuple(DTYPES)}
VERSION_LAYOUTS = {"V1": ("NHWC", "NCHW"), "V2": ("NHWC", "NCHW"), "V3": tuple(SHAPES)}
EPSILON = 0.001

Build = Callable[[Scope], tuple[dict[Output, np.ndarray], list[Output]]]


@dataclass(frozen=True)
class Prototype:
    """A named builder: ``build(scope) -> (feeds, fetches)``; the attributes say what it covers."""

    name: str
    build: Build
    version: str = "V3"
    kind: str = "gradient"  # "forward", "gradient" (fbnops.gradients), "grad_op" (explicit), "second_order"
    data_format: str = "NHWC"
    dtype: str = "float32"
    is_training: bool = True

    def graph(self) -> tuple[Graph, dict[Output, np.ndarray], list[Output]]:
        """This prototype alone in a fresh graph."""
        scope = Scope(Graph())
        feeds, fetches = self.build(scope)
        return scope.graph, feeds, fetches


def batch(protos: Iterable[Prototype]) -> tuple[Graph, dict[Output, np.ndarray], list[Output]]:
    """Many prototypes in one graph, each under a name scope named after it (one program runs all)."""
    root = Scope(Graph())
    feeds: dict[Output, np.ndarray] = {}
    fetches: list[Output] = []
    for p in protos:
        f, t = p.build(root.sub_scope(p.name))
        feeds.update(f)
        fetches += t
    return root.graph, feeds, fetches


def inputs(data_format: str = "NHWC", dtype: str = "float32", seed: int = 0) -> dict[str, np.ndarray]:
    """x (per-channel mean about 5, spread 2), dy, and the per-channel vectors (float32)."""
    rng = np.random.default_rng(seed)
    shape = SHAPES[data_format]
    c = shape[1] if data_format.startswith("NC") else shape[-1]
    dt = DTYPES[dtype]
    return dict(
        x=rng.normal(5.0, 2.0, shape).astype(dt),
        dy=rng.standard_normal(shape).astype(dt),
        scale=rng.uniform(0.5, 1.5, c).astype(np.float32),
        offset=rng.standard_normal(c).astype(np.float32),
        mean=rng.normal(5.0, 0.5, c).astype(np.float32),
        variance=rng.uniform(2.0, 6.0, c).astype(np.float32),
    )


def _forward(scope: Scope, version: str, v: dict, data_format: str, is_training: bool):
    """Placeholder x, constant scale/offset/mean/variance, the forward op named ``bn``."""
    x = scope.placeholder(v["x"].dtype, v["x"].shape, name="x")
    scale_dtype = v["x"].dtype if version == "V1" else np.float32  # V1: every tensor is T
    consts = [scope.constant(v[k].astype(scale_dtype), name=k) for k in ("scale", "offset")]
    stats = [v[k] if not is_training else np.zeros(0, np.float32) for k in ("mean", "variance")]
    consts += [scope.constant(s.astype(scale_dtype), name=k) for s, k in zip(stats, ("mean", "variance"), strict=True)]
    attrs = {"epsilon": EPSILON, "data_format": data_format, "is_training": is_training}
    bn = scope.with_op_name("bn").add_op(FORWARD[version], [x, *consts], attrs)
    return x, consts, bn


def _gradient(version: str, data_format: str, dtype: str, is_training: bool) -> Build:
    """Forward, then ``fbnops.gradients`` of ``y`` with upstream ``dy`` for x, scale, offset."""

    def build(scope: Scope):
        v = inputs(data_format, dtype)
        x, consts, bn = _forward(scope, version, v, data_format, is_training)
        dy = scope.placeholder(v["dy"].dtype, v["dy"].shape, name="dy")
        grads = fbnops.gradients(bn.outputs[0], [x, consts[0], consts[1]], grad_ys=[dy], scope=_grad_scope(scope))
        return {x: v["x"], dy: v["dy"]}, [*bn.outputs[:3], *grads]

    return build


def _grad_scope(scope: Scope) -> Scope:
    """``gradients``, ``gradients_1``... inside the prototype's scope (fbnops.gradients' default is the root)."""
    return scope.sub_scope("gradients")


def _forward_only(version: str, data_format: str, dtype: str, is_training: bool) -> Build:
    def build(scope: Scope):
        v = inputs(data_format, dtype)
        x, _, bn = _forward(scope, version, v, data_format, is_training)
        return {x: v["x"]}, list(bn.outputs[:3])

    return build


def _grad_op(version: str, data_format: str, dtype: str) -> Build:
    """The README's program: the forward's reserve spaces fed to an explicit grad op (training)."""

    def build(scope: Scope):
        v = inputs(data_format, dtype)
        x, consts, bn = _forward(scope, version, v, data_format, True)
        dy = scope.placeholder(v["dy"].dtype, v["dy"].shape, name="dy")
        reserve = bn.outputs[3:]  # V3: reserve_space_1..3; V1/V2: reserve_space_1..2
        attrs = {"epsilon": EPSILON, "data_format": data_format, "is_training": True}
        grad = scope.with_op_name("grad").add_op(FORWARD[version].replace("Norm", "NormGrad"),
                                                 [dy, x, consts[0], *reserve], attrs)  # fmt: skip
        return {x: v["x"], dy: v["dy"]}, list(grad.outputs[:3])

    return build


def _second_order(data_format: str, is_training: bool) -> Build:
    """fbnops.gradients twice: d/d(x, scale) of sum(x_backprop * w) (TF Python: ``_FusedBatchNormGradGrad``)."""

    def build(scope: Scope):
        v = inputs(data_format)
        x, consts, bn = _forward(scope, "V3", v, data_format, is_training)
        dy = scope.placeholder(np.float32, v["dy"].shape, name="dy")
        w = scope.constant(np.random.default_rng(1).standard_normal(v["x"].shape).astype(np.float32), name="w")
        dx, dscale = fbnops.gradients(bn.outputs[0], [x, consts[0]], grad_ys=[dy], scope=_grad_scope(scope))
        second = fbnops.gradients([dx, dscale], [x, consts[0], dy], grad_ys=[w, None], scope=_grad_scope(scope))
        return {x: v["x"], dy: v["dy"]}, [dx, dscale, *second]

    return build


def docs_example() -> Prototype:
    """The export page's prototype: V3 forward + its gradient op, NHWC float32, training."""
    return Prototype("docs_example", _grad_op("V3", "NHWC", "float32"), kind="grad_op")


def prototypes(
    versions: Iterable[str] = ("V1", "V2", "V3"),
    dtypes: Iterable[str] = tuple(DTYPES),
    layouts: Iterable[str] = tuple(SHAPES),
    second_order: bool = True,
) -> list[Prototype]:
    """Every prototype within the filters (combinations a version does not have are left out)."""
    out = [docs_example()]
    for version in versions:
        for fmt in (f for f in layouts if f in VERSION_LAYOUTS[version]):
            for dt in (d for d in dtypes if d in VERSION_DTYPES[version]):
                tag = f"{version}_{fmt}_{dt}".lower()
                for training in (True, False):
                    mode = "train" if training else "frozen"
                    common = dict(version=version, data_format=fmt, dtype=dt, is_training=training)
                    out.append(Prototype(f"fwd_{tag}_{mode}", _forward_only(version, fmt, dt, training),
                                         kind="forward", **common))  # fmt: skip
                    out.append(Prototype(f"grad_{tag}_{mode}", _gradient(version, fmt, dt, training), **common))
                out.append(Prototype(f"gradop_{tag}", _grad_op(version, fmt, dt), kind="grad_op",
                                     version=version, data_format=fmt, dtype=dt))  # fmt: skip
    if second_order and "V3" in versions and "float32" in dtypes:
        for fmt in (f for f in ("NHWC", "NCHW") if f in layouts):
            for training in (True, False):
                mode = "train" if training else "frozen"
                out.append(Prototype(f"second_{fmt.lower()}_{mode}", _second_order(fmt, training),
                                     kind="second_order", data_format=fmt, is_training=training))  # fmt: skip
    return out


# A small forward graph the core tests build through every surface: x (4, 3, 3, 2) fed, C = 2.
X = np.random.default_rng(3).normal(5, 2, (4, 3, 3, 2)).astype(np.float32)
SCALE, OFFSET = np.array([0.7, 1.3], np.float32), np.array([0.1, -0.2], np.float32)
EMPTY = np.zeros(0, np.float32)


def core_graph() -> tuple[Scope, Output, object]:
    """``(scope, x placeholder, the FusedBatchNormV3 op "bn")`` on constants scale/offset/mean/variance."""
    scope = Scope(Graph())
    x = scope.placeholder(np.float32, X.shape, name="x")
    consts = [scope.constant(v, name=n) for v, n in ((SCALE, "scale"), (OFFSET, "offset"), (EMPTY, "mean"),
                                                      (EMPTY, "variance"))]  # fmt: skip
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, *consts], {"epsilon": 1e-3})
    return scope, x, bn


def skip_if_missing(done: subprocess.CompletedProcess) -> None:
    """A ``run.sh`` that exited 3 said in one line what is missing: a library the ``export`` extra
    installs skips with that extra's one wording; anything else (a JDK, g++, tf-java's jars in
    Maven's cache) with ``run.sh``'s own line, the same for every test that meets it."""
    if done.returncode == EXIT_MISSING:
        line = (done.stdout.strip() or done.stderr.strip()).splitlines()[-1]
        pytest.skip(extras.reason("export") if "fbnops[export]" in line else line)


def run_export(
    directory: str | Path, fetches: Iterable[str] | None = None, timeout: float = 1200, extra_env: dict | None = None
) -> dict:
    """Run ``DIR/run.sh`` (with ``extra_env`` added to the environment); ``{fetch: array}`` read from
    ``DIR/outputs`` (keys: file stems if no fetches).

    A ``run.sh`` that exits 3 (the real library is missing) skips the test with the ``export``
    extra's reason; any other failure fails it, showing the program's output.
    """
    directory = Path(directory)
    env = dict(os.environ) | (extra_env or {})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # this env's python3
    done = subprocess.run(["bash", str(directory / "run.sh")], capture_output=True, text=True, timeout=timeout, env=env)
    skip_if_missing(done)
    if done.returncode != 0:
        raise AssertionError(f"run.sh exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    if fetches is None:
        return {p.stem: np.load(p) for p in sorted((directory / "outputs").glob("*.npy"))}
    return {f: np.load(directory / output_file(f)) for f in fetches}


def assert_close(actual: dict, expected: dict, tolerance: Callable[[np.dtype], tuple[float, float]]) -> float:
    """Every expected fetch present, same shape, close within ``tolerance(dtype) -> (rtol, atol)``.

    bfloat16 results arrive widened to float32: they are rounded back to bfloat16 first. Returns
    the largest absolute difference (for the verification table).
    """
    worst = 0.0
    for name, want in expected.items():
        assert name in actual, f"{name}: not written by the exported program"
        got = np.asarray(actual[name])
        if want.dtype == DTYPES["bfloat16"]:
            got = got.astype(want.dtype)
        assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol, atol = tolerance(want.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
        if g.size:
            worst = max(worst, float(np.nanmax(np.abs(g - w))))
    return worst


def float_tolerance(dtype: np.dtype) -> tuple[float, float]:
    """TF sums in float32 where fbnops sums in float64; results are rounded once to the output dtype.

    float32: a few ulps of the float32 sums over <=108 elements, relative to values of order 1-10;
    16-bit types: one or two rounding steps of the type (float16 2**-10, bfloat16 2**-7).
    """
    dt = np.dtype(dtype)
    if dt == np.float16:
        return 2e-3, 4e-3
    if dt == DTYPES["bfloat16"]:
        return 1.6e-2, 3.2e-2
    return 2e-5, 2e-5
