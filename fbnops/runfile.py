"""``fbnops run FILE``: scripted builder calls from a JSON or YAML file (or a GraphDef ``.pbtxt``).

A run file::

    {
      "backend": "cython",                                  # optional
      "inputs": {                                           # named arrays
        "x":     {"random": {"shape": [4, 5, 5, 3], "dtype": "float32", "seed": 0}},
        "dy":    {"npy": "dy.npy"},                          # relative to the run file
        "scale": {"value": [1.0, 0.5, 2.0], "dtype": "float32"}
      },
      "ops": [
        {"name": "bn", "op": "FusedBatchNormV3",
         "inputs": {"x": "x", "scale": "scale", "offset": {"zeros": [3]},
                    "mean": {"zeros": [0]}, "variance": {"zeros": [0]}},
         "attrs": {"epsilon": 0.001}},
        {"name": "grad", "op": "FusedBatchNormGradV3",
         "inputs": {"y_backprop": "dy", "x": "x", "scale": "scale",
                    "reserve_space_1": "bn.reserve_space_1", "reserve_space_2": "bn:4",
                    "reserve_space_3": "bn.reserve_space_3"}}
      ],
      "fetch": ["bn.y", "grad.x_backprop", "grad:1"]
    }

An input value is a reference (``"x"``, ``"bn:3"``, ``"bn.reserve_space_1"``) or a
literal: ``random`` (standard normal, seeded), ``value``, ``zeros``, ``ones``, ``npy``
(a file) or ``npz`` (``{"file": ..., "key": ...}``).  The ops are built with the graph
builders (so errors name the op) and run in a session; the fetched arrays are
saved to an ``.npz`` under the names given in ``fetch``.  A bad file raises
:class:`RunFileError` naming the entry and field, and nothing is written.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .framework import dtypes
from .framework.errors import OpError
from .framework.graph import Graph, Output, get_op_def
from .framework.scope import Scope
from .framework.session import Session

__all__ = ["RunFileError", "load", "run", "run_file"]

_DTYPES = {
    "float32": dtypes.float32,
    "float": dtypes.float32,
    "float16": dtypes.float16,
    "half": dtypes.float16,
    "bfloat16": dtypes.bfloat16,
    "int32": np.dtype(np.int32),
}


class RunFileError(ValueError):
    """A problem in a run file: ``where`` is the entry and field (``ops[1] (grad).inputs.scale``)."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where


def load(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise RunFileError(str(path), f"cannot read: {e.strerror}") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise RunFileError(str(path), "YAML run files need PyYAML: pip install 'fbnops[yaml]'") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise RunFileError(str(path), f"not valid YAML: {e}") from None
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise RunFileError(str(path), f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(doc, dict):
        raise RunFileError(str(path), "the top level must be a mapping with 'ops' and 'fetch'")
    return doc


def _dtype(spec: Any, where: str) -> np.dtype:
    if spec not in _DTYPES:
        raise RunFileError(where, f"dtype must be one of {sorted(_DTYPES)}, got {spec!r}")
    return _DTYPES[spec]


def _shape(spec: Any, where: str) -> tuple[int, ...]:
    if not isinstance(spec, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 1 << 28 for d in spec
    ):
        raise RunFileError(where, f"shape must be a list of non-negative integers, got {spec!r}")
    if int(np.prod(spec, dtype=np.float64)) > 1 << 28:
        raise RunFileError(where, f"shape {spec} has more than 2**28 elements")
    return tuple(spec)


def _literal(spec: dict, where: str, base: Path) -> np.ndarray:
    if len(spec) not in (1, 2) or (len(spec) == 2 and "dtype" not in spec):
        raise RunFileError(where, f"expected one of random/value/zeros/ones/npy/npz (+ dtype), got keys {sorted(spec)}")
    dt = _dtype(spec.get("dtype", "float32"), f"{where}.dtype")
    kind = next(k for k in spec if k != "dtype") if len(spec) > 1 or "dtype" not in spec else None
    if kind == "random":
        r = spec["random"]
        if not isinstance(r, dict) or "shape" not in r:
            raise RunFileError(f"{where}.random", "needs a 'shape' (and optional 'seed', 'dtype', 'scale', 'loc')")
        rdt = _dtype(r.get("dtype", spec.get("dtype", "float32")), f"{where}.random.dtype")
        seed = r.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise RunFileError(f"{where}.random.seed", f"must be an integer, got {seed!r}")
        rng = np.random.default_rng(seed)
        arr = rng.standard_normal(_shape(r["shape"], f"{where}.random.shape")) * float(r.get("scale", 1.0))
        return (arr + float(r.get("loc", 0.0))).astype(rdt)
    if kind == "value":
        try:
            arr = np.array(spec["value"])
        except (TypeError, ValueError):
            arr = np.array(None)
        if arr.dtype.kind not in "iuf":  # null, strings, booleans, ragged lists: never a silent NaN
            raise RunFileError(f"{where}.value", f"must be a number or a nested list of numbers, got {spec['value']!r}")
        return arr.astype(dt)
    if kind in ("zeros", "ones"):
        return (np.zeros if kind == "zeros" else np.ones)(_shape(spec[kind], f"{where}.{kind}"), dt)
    if kind in ("npy", "npz"):
        ref = spec[kind]
        file, key = (
            (ref, None)
            if kind == "npy"
            else (ref.get("file") if isinstance(ref, dict) else None, ref.get("key") if isinstance(ref, dict) else None)
        )
        if not isinstance(file, str) or (kind == "npz" and not isinstance(key, str)):
            raise RunFileError(f"{where}.{kind}", 'npy takes a path; npz takes {"file": path, "key": name}')
        try:
            data = np.load(base / file, allow_pickle=False)
            if kind == "npz" and key not in data.files and f"{key}__bf16" in data.files:
                arr = data[f"{key}__bf16"].view(dtypes.bfloat16)  # fbnops' own .npz convention
            else:
                arr = data if kind == "npy" else data[key]
        except (OSError, ValueError) as e:
            raise RunFileError(f"{where}.{kind}", f"cannot load {file}: {e}") from None
        except KeyError:
            raise RunFileError(f"{where}.{kind}", f"{file} has no array '{key}'") from None
        arr = np.asarray(arr)
        if arr.dtype.kind == "V" and arr.dtype.itemsize == 2 and spec.get("dtype") == "bfloat16":
            return arr.view(dtypes.bfloat16)  # .npy has no bfloat16: the bits come back as void
        if arr.dtype.kind == "V":
            raise RunFileError(
                f"{where}.{kind}",
                f'{file} holds {arr.dtype.itemsize}-byte raw values; for bfloat16 data add "dtype": "bfloat16"',
            )
        if "dtype" in spec and arr.dtype != dt:
            raise RunFileError(f"{where}.dtype", f"{file} holds {arr.dtype}, not {spec['dtype']}")
        return arr
    raise RunFileError(where, f"unknown input kind {kind!r}; use random/value/zeros/ones/npy/npz")


class _Builder:
    def __init__(self, base: Path):
        self.graph = Graph()
        self.scope = Scope(self.graph)
        self.base = base
        self.named: dict[str, Output] = {}

    def resolve(self, ref: Any, where: str) -> Output:
        if isinstance(ref, dict):
            return self.scope.constant(_literal(ref, where, self.base), name="Const")
        if not isinstance(ref, str):
            raise RunFileError(where, f"must be a reference string or a literal mapping, got {ref!r}")
        if ref in self.named:
            return self.named[ref]
        op_name, sep, out = ref.replace(".", ":", 1).partition(":")
        op = self.graph.operation(op_name)
        if op is None:
            known = sorted(self.named) + [
                o.name for o in self.graph.operations() if o.type != "Const" and o.name not in self.named
            ]
            raise RunFileError(where, f"unknown reference '{ref}' (inputs and earlier ops: {known})")
        names = get_op_def(op.type).output_names
        if not sep:
            return op.output(0)
        if out.isdigit() and int(out) < op.num_outputs:
            return op.output(int(out))
        if out in names:
            return op.output(names.index(out))
        raise RunFileError(where, f"'{op_name}' ({op.type}) has no output '{out}'; outputs: {list(names)}")


def run(doc: dict, base: Path = Path("."), backend: str | None = None) -> dict[str, np.ndarray]:
    """Build and run a parsed run file; returns ``{fetch name: array}``."""
    known = {"backend", "inputs", "ops", "fetch"}
    for key in doc:
        if key not in known:
            raise RunFileError(key, f"unknown top-level field; expected {sorted(known)}")
    b = _Builder(base)
    inputs = doc.get("inputs", {})
    if not isinstance(inputs, dict):
        raise RunFileError("inputs", "must be a mapping of name -> literal")
    for name, spec in inputs.items():
        if not isinstance(spec, dict):
            raise RunFileError(f"inputs.{name}", "must be a literal mapping (random/value/zeros/ones/npy/npz)")
        b.named[name] = b.scope.with_op_name(name).constant(_literal(spec, f"inputs.{name}", base))
    ops = doc.get("ops")
    if not isinstance(ops, list) or not ops:
        raise RunFileError("ops", "must be a non-empty list of op entries")
    label = backend or doc.get("backend")
    for i, entry in enumerate(ops):
        where = f"ops[{i}]"
        if not isinstance(entry, dict):
            raise RunFileError(where, "must be a mapping with 'op', 'name', 'inputs', 'attrs'")
        where = f"ops[{i}] ({entry.get('name', '?')})"
        for key in entry:
            if key not in ("op", "name", "inputs", "attrs"):
                raise RunFileError(f"{where}.{key}", "unknown field; expected op, name, inputs, attrs")
        op_type = entry.get("op")
        try:
            op_def = get_op_def(op_type) if isinstance(op_type, str) else None
        except OpError:
            op_def = None
        if op_def is None or op_type in ("Placeholder",):
            raise RunFileError(f"{where}.op", f"unknown op type {op_type!r}")
        name = entry.get("name", op_type)
        if not isinstance(name, str):
            raise RunFileError(f"{where}.name", f"must be a string, got {name!r}")
        given = entry.get("inputs", {})
        if not isinstance(given, dict):
            raise RunFileError(f"{where}.inputs", "must be a mapping of input name -> reference or literal")
        for key in given:
            if key not in op_def.input_names:
                raise RunFileError(
                    f"{where}.inputs.{key}", f"{op_type} has no input '{key}'; inputs: {list(op_def.input_names)}"
                )
        missing = [n for n in op_def.input_names if n not in given]
        if missing:
            raise RunFileError(f"{where}.inputs", f"missing {missing}")
        args = [b.resolve(given[n], f"{where}.inputs.{n}") for n in op_def.input_names]
        attrs = entry.get("attrs", {})
        if not isinstance(attrs, dict):
            raise RunFileError(f"{where}.attrs", "must be a mapping")
        scope = b.scope.with_op_name(name).with_kernel_label(label) if label else b.scope.with_op_name(name)
        try:
            scope.add_op(op_type, args, attrs)
        except OpError as e:
            raise RunFileError(where, str(e)) from None
    fetch = doc.get("fetch")
    if not isinstance(fetch, list) or not fetch or not all(isinstance(f, str) for f in fetch):
        raise RunFileError("fetch", "must be a non-empty list of references ('grad.x_backprop', 'bn:0')")
    outputs = [b.resolve(f, f"fetch[{k}]") for k, f in enumerate(fetch)]
    try:
        values = Session(b.graph).run(outputs)
    except OpError as e:
        raise RunFileError("run", str(e)) from None
    return dict(zip(fetch, values, strict=True))


def run_pbtxt(path: Path, feeds: dict[str, str], fetch: list[str], backend: str | None) -> dict[str, np.ndarray]:
    try:
        graph = Graph.from_pbtxt(path.read_text())
    except OSError as e:
        raise RunFileError(str(path), f"cannot read: {e.strerror}") from None
    except OpError as e:
        raise RunFileError(str(path), str(e)) from None
    if backend:
        for op in graph.operations():
            op.kernel_label = op.kernel_label or backend
    feed_values = {}
    for name, file in feeds.items():
        try:
            feed_values[name if ":" in name else f"{name}:0"] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise RunFileError(f"--feed {name}", f"cannot load {file}: {e}") from None
    if not fetch:
        raise RunFileError("--fetch", "a GraphDef run needs at least one --fetch op:index")
    try:
        values = Session(graph).run(fetch, feed_values)
    except OpError as e:
        raise RunFileError("run", str(e)) from None
    return dict(zip(fetch, values, strict=True))


def save_atomically(results: dict[str, np.ndarray], out: Path) -> None:
    """Write the .npz only when everything succeeded, and never a half-written file.

    bfloat16 arrays are stored as their uint16 bits under ``NAME__bf16`` (NumPy's .npy
    format has no bfloat16); ``ml_dtypes`` views them back.
    """
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=out.parent if str(out.parent) else ".")
    os.close(fd)
    try:
        arrays = {}
        for k, v in results.items():
            v = np.asarray(v)
            if v.dtype == dtypes.bfloat16:
                arrays[f"{k}__bf16"] = v.view(np.uint16)
            else:
                arrays[k] = v
        np.savez(tmp, **arrays)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run_file(path: str | Path, backend: str | None = None) -> dict[str, np.ndarray]:
    path = Path(path)
    return run(load(path), path.parent, backend)
