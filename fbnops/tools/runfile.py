"""``fbnops run FILE``: scripted builder calls from a JSON or YAML file (or a GraphDef ``.pbtxt``).

The format is defined by a JSON Schema shipped with the package,
``fbnops/tools/runfile.schema.json`` (:func:`schema`); the docs' run-file page is generated
from it.  An example::

    {
      "backend": "reference",
      "inputs": {
        "x":     {"random": {"shape": [4, 5, 5, 3], "seed": 0}},
        "dy":    {"npy": "dy.npy"},
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
      "fetch": ["bn", "grad.x_backprop", "grad:1"]
    }

A reference is a named input (``"x"``), an op output by index (``"bn:3"``) or by name
(``"bn.reserve_space_1"``); a bare op name (``"bn"``) is its output 0, everywhere.  Every
problem raises one :class:`RunFileError` that names the file, the line:column and the key
(a JSON pointer), before anything runs and before anything is written; inputs that cannot
fit in memory raise :class:`RunFileResourceError` (a ``ResourceExhaustedError``) before
they are allocated.  Outputs are saved with :func:`save_npz` (bfloat16 widened to float32,
exact; :func:`load_npz` restores it), atomically.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..framework import dtypes
from ..framework.errors import InvalidArgumentError, OpError, ResourceExhaustedError, conversion_errors_as
from ..framework.graph import Graph, Output, parse_tensor_name
from ..framework.graphdef import graph_from_pbtxt
from ..framework.memory import check_fits
from ..framework.registry import get_op_def, registered_op_types
from ..framework.scope import Scope
from ..framework.session import Session
from ._arrays import ArrayFileError, check_writable, load_array, load_npz, save_npz
from ._document import MAX_BYTES, DocumentError, DocumentTooLargeError, Positions, read_document
from ._schema import runfile_schema, validate

__all__ = [
    "RunFileError",
    "RunFileResourceError",
    "schema",
    "load",
    "validate_document",
    "run",
    "run_file",
    "run_pbtxt",
    "build",
    "build_file",
    "load_pbtxt",
    "located_step",
    "save_npz",
    "load_npz",
    "check_writable",
]


def schema() -> dict:
    """The run-file JSON Schema (a fresh copy)."""
    import copy

    return copy.deepcopy(runfile_schema())


class RunFileError(ValueError):
    """A problem in a run file: ``file``, ``line``/``column`` (1-based, when known) and ``key``
    (the path of the offending key, e.g. ``("ops", 1, "inputs", "scale")``; ``pointer`` is it
    as a JSON pointer, ``/ops/1/inputs/scale``)."""

    def __init__(self, key: tuple, reason: str, *, file: str | None = None, line: int | None = None, column=None):
        self.key, self.reason, self.file, self.line, self.column = tuple(key), reason, file, line, column
        super().__init__(str(self))

    @property
    def pointer(self) -> str:
        return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in self.key)

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        key = " ".join(map(str, self.key)) if self.key and str(self.key[0]).startswith("--") else self.pointer
        return ": ".join(p for p in (where, key, self.reason) if p)  # a command-line option, or a JSON pointer

    def located(self, file: str, positions: Positions) -> RunFileError:
        """This error with the file and the line:column of its key (or of its nearest parent)."""
        self.file = file
        for n in range(len(self.key), 0, -1):
            if self.key[:n] in positions:
                self.line, self.column = positions[self.key[:n]]
                break
        else:
            self.line, self.column = (1, 1) if self.line is None else (self.line, self.column)
        self.args = (str(self),)
        return self


class RunFileResourceError(RunFileError, ResourceExhaustedError):
    """A run-file input too large for this machine, refused before it is allocated."""


def load(path: str | Path) -> tuple[Any, Positions]:
    """Parse a run file: ``(document, positions)``; syntax errors as :class:`RunFileError`."""
    path = Path(path)
    try:
        return read_document(path)
    except DocumentError as e:
        error = RunFileResourceError if isinstance(e, DocumentTooLargeError) else RunFileError
        raise error(e.path, e.message, file=str(path), line=e.line, column=e.column) from None


def validate_document(doc: Any) -> None:
    """Check ``doc`` against the schema; the first error as :class:`RunFileError`."""
    errors = validate(doc)
    if errors:
        raise RunFileError(errors[0].path, errors[0].message)


def _dtype(name: str) -> np.dtype:
    return dtypes.from_user_name(name)


def _allocation(shape: list[int], itemsize: int, key: tuple) -> tuple[int, ...]:
    nbytes = int(np.prod(shape, dtype=object)) * itemsize
    try:
        check_fits(nbytes, f"an input of shape {shape}")
    except ResourceExhaustedError as e:
        raise RunFileResourceError(key, e.message) from None
    return tuple(shape)


def _literal(spec: dict, key: tuple, base: Path) -> np.ndarray:
    """One literal (already schema-checked): exactly one kind, optional dtype."""
    kind = next(k for k in spec if k != "dtype")
    dt = _dtype(spec.get("dtype", "float32"))
    here = (*key, kind)
    if kind == "random":
        r = spec["random"]
        rdt = _dtype(r.get("dtype", spec.get("dtype", "float32")))
        shape = _allocation(r["shape"], 8 + rdt.itemsize, (*here, "shape"))  # float64 draws, then the cast
        with np.errstate(over="ignore", invalid="ignore"):
            arr = np.random.default_rng(r.get("seed", 0)).standard_normal(shape) * float(r.get("scale", 1.0))
            arr += float(r.get("loc", 0.0))
        if not np.isfinite(arr).all():
            raise RunFileError(here, "scale and loc give values beyond the range of float64")
        return _exact_cast(arr, rdt, here)
    if kind == "value":
        try:
            arr = np.array(spec["value"], dtype=np.float64)
        except (TypeError, ValueError, OverflowError):  # ragged lists; an int beyond a double (10**400)
            raise RunFileError(here, "must be a number or a rectangular nested list of numbers") from None
        return _exact_cast(arr, dt, here)
    if kind in ("zeros", "ones"):
        return (np.zeros if kind == "zeros" else np.ones)(_allocation(spec[kind], dt.itemsize, here), dt)
    file, member = (spec["npy"], None) if kind == "npy" else (spec["npz"]["file"], spec["npz"]["key"])
    try:
        arr = load_array(base / file, member)
    except ArrayFileError as e:
        raise RunFileError(here, str(e)) from None
    except ResourceExhaustedError as e:
        raise RunFileResourceError(here, e.message) from None
    if arr.dtype.kind == "V" and arr.dtype != dtypes.bfloat16:  # np.save of bfloat16: its raw 2-byte values
        if spec.get("dtype") != "bfloat16":
            raise RunFileError(here, f'{file} holds raw 2-byte values; for bfloat16 data add "dtype": "bfloat16"')
        return arr.view(dtypes.bfloat16)
    return _exact_cast(arr, dt, (*key, "dtype")) if "dtype" in spec else arr


def _exact_cast(arr: np.ndarray, dt: np.dtype, key: tuple) -> np.ndarray:
    """``arr`` as ``dt``, refused if any value changes (1e40 is not a float32; 0.1 is one, rounded)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(dt)
    finite_in, finite_out = np.isfinite(arr.astype(np.float64)), np.isfinite(out.astype(np.float64))
    if np.any(finite_in & ~finite_out):
        raise RunFileError(key, f"a value does not fit in {dtypes.tf_name(dt)} (it would become inf)")
    if arr.dtype.kind == "f" and arr.dtype.itemsize <= dt.itemsize or arr.dtype == np.float64:
        return out  # widening, or decimal literals (rounded to nearest, as TensorFlow parses them)
    if not np.array_equal(out.astype(np.float64), arr.astype(np.float64), equal_nan=True):
        raise RunFileError(key, f"the stored {arr.dtype} values do not convert exactly to {dtypes.tf_name(dt)}")
    return out


class _Builder:
    def __init__(self, base: Path):
        self.graph = Graph()
        self.scope = Scope(self.graph)
        self.base = base
        self.named: dict[str, Output] = {}

    def resolve(self, ref: Any, key: tuple) -> Output:
        if isinstance(ref, dict):
            with _as_runfile_error(key):  # e.g. an .npy of a type no graph holds: named by the input's key
                return self.scope.constant(_literal(ref, key, self.base), name="Const")
        try:
            return resolve_output(self.graph, ref, self.named)
        except LookupError as e:
            raise RunFileError(key, str(e.args[0])) from None


def resolve_output(graph: Graph, ref: str, named: dict[str, Output] | None = None) -> Output:
    """``"x"`` (a named input), ``"op"`` (its output 0), ``"op:1"`` or ``"op.output_name"``; else LookupError."""
    named = named or {}
    if ref in named:
        return named[ref]
    out_name = None
    if graph.operation(ref) is None and "." in ref and ":" not in ref:  # an output by its name
        op_name, _, out_name = ref.rpartition(".")
        index = None
    else:
        try:
            op_name, index, control = parse_tensor_name(ref, default_index=0)  # a bare name is output 0
        except InvalidArgumentError as e:
            raise LookupError(e.message) from None
        if control:
            raise LookupError(f"{ref!r} names a control dependency; fetch an output ('op' or 'op:index')")
    op = graph.operation(op_name)
    if op is None:
        known = sorted(named) + [o.name for o in graph.operations() if o.type != "Const" and o.name not in named]
        raise LookupError(f"unknown reference {ref!r}; known names: {known}")
    names = get_op_def(op.type).output_names
    if out_name in names:
        index = names.index(out_name)
    if index is None or index >= op.num_outputs:
        shown = out_name if index is None else str(index)
        raise LookupError(
            f"{op_name!r} ({op.type}) has no output {shown!r}; outputs: 0..{op.num_outputs - 1} {list(names)}"
        )
    return op.output(index)


def run(doc: Any, base: Path = Path("."), backend: str | None = None) -> dict[str, np.ndarray]:
    """Validate a parsed run file against the schema, build it, run it: ``{fetch: array}``."""
    graph, outputs = build(doc, base, backend)
    try:
        values = Session(graph).run(outputs)
    except OpError as e:
        raise RunFileError(("fetch",), f"running the graph: {e}") from None
    return dict(zip(doc["fetch"], values, strict=True))


def build(doc: Any, base: Path = Path("."), backend: str | None = None) -> tuple[Graph, list[Output]]:
    """Validate a parsed run file and build its graph: ``(graph, the fetched outputs)``; nothing runs."""
    validate_document(doc)
    b = _Builder(base)
    for name, spec in doc.get("inputs", {}).items():
        with _as_runfile_error(("inputs", name)):
            b.named[name] = b.scope.with_op_name(name).constant(_literal(spec, ("inputs", name), base))
    label = backend or doc.get("backend")
    for i, entry in enumerate(doc["ops"]):
        with _as_runfile_error(("ops", i)):
            _build_op(b, i, entry, label)
    return b.graph, [b.resolve(f, ("fetch", k)) for k, f in enumerate(doc["fetch"])]


@contextmanager
def _as_runfile_error(key: tuple) -> Iterator[None]:
    """The one place a run file's value that does not fit (10**400, a shape of huge dims...) or an op's
    typed error becomes a :class:`RunFileError` naming the key, never a traceback."""
    try:
        with conversion_errors_as(lambda m: RunFileError(key, m), keep=(RunFileError,)):
            yield
    except RunFileError:
        raise
    except OpError as e:
        raise RunFileError(key, str(e)) from None


def _build_op(b: _Builder, i: int, entry: dict, label: str | None) -> None:
    key = ("ops", i)
    op_type = entry["op"]
    try:
        op_def = get_op_def(op_type)
    except OpError:
        op_def = None
    if op_def is None or op_type == "Placeholder":
        raise RunFileError((*key, "op"), f"unknown op type {op_type!r}{_nearest(op_type)}")
    name = entry.get("name", op_type)
    if name in b.named or b.graph.operation(name) is not None:
        raise RunFileError((*key, "name"), f"the name {name!r} is already used by an input or an earlier op")
    given = entry["inputs"]
    for k in given:
        if k not in op_def.input_names:
            raise RunFileError((*key, "inputs", k), f"{op_type} has no input {k!r}; inputs: {list(op_def.input_names)}")
    missing = [n for n in op_def.input_names if n not in given]
    if missing:
        raise RunFileError((*key, "inputs"), f"{op_type} ({name}) is missing input(s) {missing}")
    args = [b.resolve(given[n], (*key, "inputs", n)) for n in op_def.input_names]
    scope = b.scope.with_op_name(name)
    scope = scope.with_kernel_label(label) if label else scope
    attrs = entry.get("attrs", {})
    try:
        scope.add_op(op_type, args, attrs)
    except (OpError, TypeError, ValueError, OverflowError) as e:
        named = re.search(r"\battr(?:\(s\))? \[?'?(\w+)", str(e), re.IGNORECASE)  # point at the attr the message names
        at = (*key, "attrs", named.group(1)) if named and named.group(1) in attrs else key
        raise RunFileError(at, f"{op_type} ({name}): {e}") from None


def run_file(path: str | Path, backend: str | None = None) -> dict[str, np.ndarray]:
    """Read, validate, build and run a run file; errors name the file and line:column."""
    return located_step(run, path, backend)


def build_file(path: str | Path, backend: str | None = None) -> tuple[Graph, list[Output]]:
    """Read, validate and build a run file (nothing runs); errors as :func:`run_file`'s."""
    return located_step(build, path, backend)


def located_step(step, path: str | Path, backend: str | None):
    """``step(doc, base, backend)`` on the parsed run file at ``path``; its RunFileError located (line:column)."""
    path = Path(path)
    doc, positions = load(path)
    try:
        return step(doc, path.parent, backend)
    except RunFileError as e:
        raise e.located(str(path), positions) from None


def run_pbtxt(path: Path, feeds: dict[str, str], fetch: list[str], backend: str | None) -> dict[str, np.ndarray]:
    """Run a GraphDef text file: ``feeds`` maps placeholder names to ``.npy`` files."""
    graph, outputs, feed_values = load_pbtxt(path, feeds, fetch, backend)
    try:
        values = Session(graph).run(outputs, feed_values)
    except OpError as e:
        raise RunFileError((), str(e), file=str(path)) from None
    return dict(zip(fetch, values, strict=True))


def load_pbtxt(
    path: Path, feeds: dict[str, str], fetch: list[str], backend: str | None
) -> tuple[Graph, list[Output], dict[Output, np.ndarray]]:
    """Read a GraphDef text file, its ``--fetch`` outputs and ``--feed`` arrays (nothing runs)."""
    path = Path(path)
    if not fetch:
        raise RunFileError(("--fetch",), "a GraphDef run needs at least one --fetch NAME (NAME = op or op:index)")
    try:
        if path.stat().st_size > MAX_BYTES:
            raise RunFileResourceError((), f"larger than {MAX_BYTES} bytes", file=str(path))
        graph = graph_from_pbtxt(path.read_text(encoding="utf-8"), Graph(), source=str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise RunFileError((), f"cannot read: {getattr(e, 'strerror', None) or e}", file=str(path)) from None
    except OpError as e:  # it names path:line:column itself
        raise RunFileError((), str(e)) from None
    if backend:
        for op in graph.operations():
            op.kernel_label = op.kernel_label or backend

    def lookup(option: str, name: str) -> Output:
        try:
            return resolve_output(graph, name)
        except LookupError as e:
            raise RunFileError((option, name), f"{path.name}: {e.args[0]}") from None

    outputs = [lookup("--fetch", f) for f in fetch]
    placeholders = {name: lookup("--feed", name) for name in feeds}
    feed_values = {}
    for name, file in feeds.items():
        try:
            feed_values[placeholders[name]] = load_array(Path(file))
        except ArrayFileError as e:
            raise RunFileError(("--feed", name), str(e)) from None
        except ResourceExhaustedError as e:
            raise RunFileResourceError(("--feed", name), e.message) from None
    return graph, outputs, feed_values


def _nearest(op_type) -> str:
    """``; did you mean 'FusedBatchNormV3'?`` and the list of op types a run file can use."""
    known = sorted(t for t in registered_op_types() if t != "Placeholder")
    close = difflib.get_close_matches(str(op_type), known, n=1, cutoff=0.6)
    return (f"; did you mean {close[0]!r}?" if close else "") + f" (op types: {', '.join(known)})"
