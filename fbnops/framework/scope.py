"""Scopes: where an op goes, what it is called, what it waits for, which kernel runs it.

This is the common core of TensorFlow's C++ ``Scope`` and Java ``Scope``/``NameScope``:

* a scope has a *prefix* (``outer/inner``) and a *name map* shared by the scopes
  derived from it with ``with_*``; a sub-scope gets a fresh map;
* ``unique_name(default)`` returns ``default`` the first time and ``default_1``,
  ``default_2``, ... after that (skipping names already taken), fully qualified;
* ``with_op_name`` overrides the default name of the next op (still uniquified);
* control dependencies accumulate; ``with_kernel_label`` picks the fbnops backend
  (TensorFlow's kernel label, the ``_kernel`` node attr); ``with_device`` sets the
  device string.

The *environment* is a :class:`~fbnops.framework.graph.Graph` (ops are added) or an
:class:`EagerContext` (ops run as they are built).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, conversion_errors_as
from .graph import Graph, Operation, Output, build_operation
from .session import run_op

__all__ = ["Scope", "EagerContext", "NameMap"]


def _check_name_type(name: object, method: str) -> None:
    """Names are text; the name rules themselves are checked when the op is added to the graph."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{method}: a name must be a string, got {type(name).__name__} {name!r:.40}")


class NameMap:
    """Names used within one scope level (shared by its ``with_*`` copies)."""

    def __init__(self):
        self._counts: dict[str, int] = {}

    def unique(self, name: str) -> str:
        if name not in self._counts:
            self._counts[name] = 0
            return name
        while True:
            self._counts[name] += 1
            candidate = f"{name}_{self._counts[name]}"
            if candidate not in self._counts:
                self._counts[candidate] = 0
                return candidate


class EagerContext:
    """An environment in which every op runs as soon as it is built (TF eager / Java EagerSession)."""

    def __init__(self):
        self.closed = False

    def add_operation(
        self,
        name: str,
        op_type: str,
        inputs: Sequence[Output],
        attrs: dict[str, Any],
        control_inputs: Iterable[Operation] = (),
        device: str = "",
        kernel_label: str | None = None,
    ) -> Operation:
        """Build the op and run it at once; its outputs hold their values."""
        if self.closed:
            raise InvalidArgumentError("the eager session is closed")
        op = build_operation(self, name, op_type, inputs, attrs, control_inputs, device, kernel_label)
        op._values = run_op(op, [t.value() for t in inputs])
        return op


class Scope:
    """Immutable: every ``with_*`` returns a new scope."""

    def __init__(
        self,
        env: Graph | EagerContext | None = None,
        *,
        _prefix: str = "",
        _names: NameMap | None = None,
        _op_name: str | None = None,
        _control: tuple[Operation, ...] = (),
        _kernel_label: str | None = None,
        _device: str = "",
    ):
        self.env = env if env is not None else Graph()
        self.prefix = _prefix
        self.names = _names if _names is not None else NameMap()
        self.op_name = _op_name
        self.control_dependencies = _control
        self.kernel_label = _kernel_label
        self.device = _device

    def _copy(self, **changes) -> Scope:
        fields = dict(
            _prefix=self.prefix,
            _names=self.names,
            _op_name=self.op_name,
            _control=self.control_dependencies,
            _kernel_label=self.kernel_label,
            _device=self.device,
        )
        fields.update(changes)
        return Scope(self.env, **fields)

    @property
    def graph(self) -> Graph | None:
        """The graph this scope builds into (None for an eager scope)."""
        return self.env if isinstance(self.env, Graph) else None

    @property
    def is_eager(self) -> bool:
        """True if ops built in this scope run at once."""
        return isinstance(self.env, EagerContext)

    def qualify(self, name: str) -> str:
        """``name`` under this scope's prefix (``outer/inner/name``)."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def sub_scope(self, name: str) -> Scope:
        """A child scope whose op names are prefixed with a unique ``name/``."""
        _check_name_type(name, "sub_scope")
        if not name:
            return self._copy(_op_name=None)
        return self._copy(_prefix=self.qualify(self.names.unique(name)), _names=NameMap(), _op_name=None)

    def with_op_name(self, name: str) -> Scope:
        """A scope whose next op is named ``name`` (made unique in this scope)."""
        _check_name_type(name, "with_op_name")
        return self._copy(_op_name=name)

    def with_control_dependencies(self, ops: Iterable[Operation | Output]) -> Scope:
        """A scope whose ops also wait for ``ops`` (added to the current dependencies)."""
        deps = [o.op if isinstance(o, Output) else o for o in ops]
        return self._copy(_control=self.control_dependencies + tuple(deps))

    def with_no_control_dependencies(self) -> Scope:
        """A scope whose ops have no control dependencies."""
        return self._copy(_control=())

    def with_kernel_label(self, label: str | None) -> Scope:
        """A scope whose ops run on the backend ``label`` (``"cython"``, ``"numba"``, ``"reference"``)."""
        return self._copy(_kernel_label=label)

    def with_device(self, device: str) -> Scope:
        """A scope whose ops carry the device string ``device`` (exported to GraphDef)."""
        return self._copy(_device=device)

    def unique_name(self, default_name: str) -> str:
        """The fully qualified, unique name for the next op (the override, else the default)."""
        return self.qualify(self.names.unique(self.op_name or default_name))

    def add_op(
        self, op_type: str, inputs: Sequence[Output], attrs: dict[str, Any], name: str | None = None
    ) -> Operation:
        """Create ``op_type`` in this scope's environment under a unique name."""
        return self.env.add_operation(
            name or self.unique_name(op_type),
            op_type,
            inputs,
            attrs,
            self.control_dependencies,
            self.device,
            self.kernel_label,
        )

    def constant(self, value: np.ndarray, name: str = "Const") -> Output:
        """A ``Const`` op holding ``value`` (its dtype and shape); returns its output."""
        with conversion_errors_as(lambda m: InvalidArgumentError(f"Const: the value is not a tensor ({m})", "Const")):
            value = np.asarray(value)  # a ragged or overflowing list is the caller's InvalidArgumentError
        return (
            self._copy(_op_name=self.op_name or name)
            .add_op("Const", [], {"value": value, "dtype": value.dtype})
            .output(0)
        )

    def placeholder(self, dtype, shape=None, name: str = "Placeholder") -> Output:
        """A ``Placeholder`` of ``dtype`` (and ``shape``, None: any) to feed at run time; returns its output."""
        return (
            self._copy(_op_name=self.op_name or name)
            .add_op("Placeholder", [], {"dtype": dtype, "shape": shape})  # both checked by the op's build
            .output(0)
        )
