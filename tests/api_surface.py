"""Dump the public API of every fbnops surface as text (TF's api golden files, simplified).

One line per public object: its dotted name, its kind and, for callables, the
signature (parameter names, order, kinds and defaults).  ``tests/golden/api.txt``
holds the approved dump; ``pytest --update-goldens`` rewrites it.
"""

from __future__ import annotations

import importlib
import inspect
import re

# module -> whether to descend into its public classes
SURFACES = [
    "fbnops",
    "fbnops.raw_ops",
    "fbnops.errors",
    "fbnops.testing",
    "fbnops.distributed",
    "fbnops.kernels.stages",
    "bindings_mirror.java",
    "bindings_mirror.cc",
    "bindings_mirror.cc.ops",
    "bindings_mirror.directml",
    "bindings_mirror.onednn_graph",
]


def _sig(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _public(obj):
    names = getattr(obj, "__all__", None)
    if names is None:
        names = [n for n in vars(obj) if not n.startswith("_")]
    return sorted(names)


def _class_lines(path: str, cls: type, depth: int) -> list[str]:
    bases = ", ".join(b.__name__ for b in cls.__bases__)
    lines = [f"{path}: class({bases}){_sig(cls) if not issubclass(cls, BaseException) else ''}"]
    if depth >= 3:
        return lines
    for attr in sorted(vars(cls)):
        if attr.startswith("_"):
            continue
        value = inspect.getattr_static(cls, attr)
        if inspect.isclass(value):
            lines += _class_lines(f"{path}.{attr}", value, depth + 1)
        elif isinstance(value, (staticmethod, classmethod)):
            lines.append(f"{path}.{attr}: {type(value).__name__}{_sig(getattr(cls, attr))}")
        elif callable(value):
            lines.append(f"{path}.{attr}: method{_sig(value)}")
        elif isinstance(value, property):
            lines.append(f"{path}.{attr}: property")
        else:
            lines.append(f"{path}.{attr}: attribute")
    return lines


# public names that need an optional extra: dotted name -> (module it needs, extra)
NEEDS_EXTRA = {"fbnops.distributed.SyncBatchNorm": ("torch", "oracle")}


def dump_object(prefix: str, obj, skip: frozenset[str] = frozenset()) -> list[str]:
    lines = []
    for name in _public(obj):
        if f"{prefix}.{name}" in skip:
            continue
        member = getattr(obj, name)
        path = f"{prefix}.{name}"
        if inspect.ismodule(member):
            lines.append(f"{path}: module")
        elif inspect.isclass(member):
            lines += _class_lines(path, member, 0)
        elif callable(member):
            lines.append(f"{path}: function{_sig(member)}")
        else:
            shown = repr(member)
            shown = " ".join(shown.split()) if "\n" in shown else shown  # one line per object
            shown = re.sub(r" at 0x[0-9a-fA-F]+>", ">", shown)  # no memory addresses: the same every run
            lines.append(f"{path}: {type(member).__name__} = {shown}"[:200])
    return lines


def dump(skip: frozenset[str] = frozenset()) -> str:
    """The listing of every surface, leaving out the public names in ``skip`` (and their members)."""
    lines = []
    for mod in SURFACES:
        lines += dump_object(mod, importlib.import_module(mod), skip)
    return "\n".join(lines) + "\n"


def without(text: str, skip: frozenset[str]) -> str:
    """``text`` (a dump) without the lines of the names in ``skip`` and their members."""
    return "".join(
        line
        for line in text.splitlines(True)
        if line.split(":", 1)[0].split("(")[0] not in skip and not any(line.startswith(name + ".") for name in skip)
    )
