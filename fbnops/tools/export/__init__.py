"""``fbnops export``: a graph built in fbnops, as a small source project on the real library.

::

    path = fbnops.export(graph, "tf-python", "out/bn", feeds={"x": x}, fetches=["bn:0", "grad:0"])
    # out/bn/run.sh runs it on real TensorFlow; it writes out/bn/outputs/bn_0.npy, grad_0.npy

A generator in the manner of ``protoc`` or TensorFlow's ``tf_gen_op_wrapper``: the input is
checked completely before anything is generated, and the output directory appears whole or not
at all. Steps:

1. **Graph.** Any surface (:mod:`._source`): an ``fbnops.Graph`` or ``Scope``, the Java or C++
   mirror's builders, GraphDef text or a ``.pbtxt`` path.
2. **Validate by running.** The fetches are run by fbnops' own ``Session`` with the feeds, so a
   graph that would not run fails here with the very error running it gives (a missing feed, a
   shape mismatch...), and the values become ``plan.expected``, what the exported program's
   outputs are compared with.
3. **Plan** (:class:`~._plan.ExportPlan`): the ops the fetches need, in order; a file
   ``inputs/<identifier>.npy`` for each fed placeholder and each constant; an identifier valid
   in C++, Java and Python for each node name.
4. **Render and write.** ``TARGETS[target].render(plan)`` gives the source files (``run.sh``
   included); the writer adds ``inputs/`` and writes it all atomically (:mod:`._write`).

Targets are imported when used, so one target's missing module never breaks another.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from fbnops.framework.errors import InvalidArgumentError
from fbnops.framework.session import Session

from ._plan import ExportPlan, identifier, needed_ops, output_file
from ._source import core_graph, core_output, describe
from ._write import ExportError, check_target, write

__all__ = [
    "TARGETS",
    "ExportError",
    "ExportPlan",
    "export",
    "build_plan",
    "check_request",
    "write_plan",
    "target_module",
    "output_file",
]

# target name -> module (in this package) with render(plan) -> {relative path: text}
TARGETS: dict[str, str] = {
    "tf-python": "tf_python",
    "tf-cc": "tf_cc",
    "tf-java": "tf_java",
    "onednn-graph": "onednn_graph",
    "directml": "directml",
}


def target_module(target: str) -> ModuleType:
    """The module that renders ``target``; an unknown name is an :class:`ExportError`."""
    if target not in TARGETS:
        raise ExportError("target", f"unknown target {target!r}; targets: {', '.join(TARGETS)}")
    try:
        return importlib.import_module(f"{__name__}.{TARGETS[target]}")
    except ImportError as e:
        raise ExportError("target", f"the {target} exporter is not available: {e}") from None


def export(
    graph: Any,
    target: str,
    out_dir: str | Path,
    *,
    feeds: Mapping[Any, Any] | None = None,
    fetches: Iterable[Any] | None = None,
    force: bool = False,
    source: str = "",
) -> Path:
    """Write ``graph`` as a ``target`` project in ``out_dir``; return its path.

    ``feeds`` maps placeholders (names or outputs) to arrays; ``fetches`` lists outputs
    (``"bn"`` = ``"bn:0"``, ``"bn:1"``, ``"bn.reserve_space_1"``, or output objects of any surface).
    ``source`` is the line the generated files name as the graph's origin. Errors: an
    :class:`ExportError` naming the argument, or the typed error running the graph raises;
    either way nothing is written. An existing ``out_dir`` is replaced only with ``force``.
    """
    check_request(target, out_dir, force)  # before any work
    plan = build_plan(graph, feeds=feeds, fetches=fetches, source=source)
    return write_plan(plan, target, out_dir, force)


def check_request(target: str, out_dir: str | Path, force: bool) -> None:
    """The target exists and ``out_dir`` may be written (checked before any work)."""
    target_module(target)
    check_target(Path(out_dir).absolute(), force)


def write_plan(plan: ExportPlan, target: str, out_dir: str | Path, force: bool = False) -> Path:
    """Render ``plan`` for ``target`` and write the directory atomically; return its path."""
    files = target_module(target).render(plan)
    if "run.sh" not in files:
        raise ExportError("target", f"the {target} exporter rendered no run.sh")  # a target's bug
    return write(Path(out_dir), files, plan.arrays, force)


def build_plan(
    graph: Any, *, feeds: Mapping[Any, Any] | None = None, fetches: Iterable[Any] | None = None, source: str = ""
) -> ExportPlan:
    """Validate (by running it in fbnops) and plan the export of ``graph``; see :func:`export`."""
    core, kind = core_graph(graph)
    if fetches is None or isinstance(fetches, (str, bytes)) or not isinstance(fetches, Iterable):
        fetches = [] if fetches is None else [fetches]  # one fetch given alone
    outputs = list(dict.fromkeys(core_output(core, f, "fetches") for f in fetches))  # in order, once each
    if not outputs:
        raise ExportError("fetches", "nothing to fetch; name at least one output (op or op:index)")
    feed_values = {core_output(core, k, "feeds"): v for k, v in (feeds or {}).items()}
    for t in feed_values:
        if t.op.type != "Placeholder":
            raise ExportError("feeds", f"{t.name} is a {t.op.type} output; an exported program feeds placeholders")
    values = Session(core).run(outputs, feed_values)  # the error running it gives; the expected values
    fetch_names = tuple(t.name for t in outputs)
    ops = needed_ops(core, list(fetch_names))
    taken: set[str] = set()
    idents = {op.name: identifier(op.name, taken) for op in ops}
    needed = {op.name for op in ops}
    arrays: dict[str, np.ndarray] = {}
    feed_files: dict[str, str] = {}
    const_files: dict[str, str] = {}
    # each feed as the session checked and converted it (a placeholder fed with a value runs to that value)
    fed = {t.op.name: Session(core).run(t, {t: v}) for t, v in feed_values.items() if t.op.name in needed}
    for op in ops:
        file = f"inputs/{idents[op.name]}.npy"
        if op.type == "Placeholder":
            if op.name not in fed:  # Session.run above would have refused: a guard for future surfaces
                raise InvalidArgumentError(f"You must feed a value for placeholder tensor '{op.name}'")
            feed_files[op.name], arrays[file] = file, fed[op.name]
        elif op.type == "Const":
            const_files[op.name], arrays[file] = file, np.asarray(op.attrs["value"])
    return ExportPlan(
        graph=core,
        ops=ops,
        fetches=fetch_names,
        feeds=feed_files,
        arrays=arrays,
        idents=idents,
        source=describe(source, kind),
        consts=const_files,
        expected=dict(zip(fetch_names, values, strict=True)),
    )
