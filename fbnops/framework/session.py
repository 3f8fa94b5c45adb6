"""Running graphs: ``Session.run(fetches, feed_dict)``.

Only the operations the fetches (and targets) need are run, in dependency order,
control inputs first; each on its kernel label's backend (else the current one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from . import dtypes
from .errors import InvalidArgumentError
from .graph import Graph, Operation, Output, get_op_def, shape_to_str

__all__ = ["Session", "run_op"]


def run_op(op: Operation, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    return tuple(get_op_def(op.type).compute(arrays, op.attrs, op.kernel_label))


def _check_feed(t: Output, value: Any) -> np.ndarray:
    from ..ops.validation import as_array

    arr = as_array(value, t.name, t.op.type)
    if arr.dtype != t.dtype:
        raise InvalidArgumentError(
            f"Feed for {t.name} has dtype {dtypes.tf_name(arr.dtype)}, expected {dtypes.tf_name(t.dtype)}"
        )
    shape = t.shape
    if shape is not None and (
        len(shape) != arr.ndim or any(d is not None and d != s for d, s in zip(shape, arr.shape, strict=False))
    ):
        raise InvalidArgumentError(
            f"Cannot feed value of shape {shape_to_str(arr.shape)} for {t.name}, which has shape {shape_to_str(shape)}"
        )
    return arr


class Session:
    """Runs (parts of) a graph."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.closed = False

    def _resolve(self, f) -> Output | Operation:
        if isinstance(f, (Output, Operation)):
            if f.graph is not self.graph:
                raise InvalidArgumentError(f"{f.name} is not an element of this session's graph")
            return f
        if isinstance(f, str):
            return self.graph.get_output(f) if ":" in f else self.graph.get_operation(f)
        raise InvalidArgumentError(f"cannot fetch or feed {type(f).__name__}; expected an Output, Operation or name")

    def run(
        self, fetches: Sequence | Output | Operation | str, feed_dict: Mapping | None = None, targets: Iterable = ()
    ) -> Any:
        """Values of ``fetches`` (a list for a list; ``None`` for an Operation)."""
        if self.closed:
            raise InvalidArgumentError("Attempted to use a closed Session.")
        single = not isinstance(fetches, (list, tuple))
        fetch_list = [fetches] if single else list(fetches)
        resolved = [self._resolve(f) for f in fetch_list]
        values: dict[Output, np.ndarray] = {}
        for key, value in (feed_dict or {}).items():
            t = self._resolve(key)
            if isinstance(t, Operation):
                t = t.output(0)
            values[t] = _check_feed(t, value)
        done: set[str] = set()

        def visit(op: Operation, stack: tuple[str, ...] = ()):
            if op.name in done or all(o in values for o in op.outputs) and op.outputs:
                return
            if op.name in stack:
                raise InvalidArgumentError(f"Graph has a cycle through '{op.name}'")
            for c in op.control_inputs:
                visit(c, stack + (op.name,))
            for t in op.inputs:
                if t not in values:
                    visit(t.op, stack + (op.name,))
            if op.type == "Placeholder":
                raise InvalidArgumentError(
                    f"You must feed a value for placeholder tensor '{op.name}' with dtype "
                    f"{dtypes.tf_name(op.attrs['dtype'])} and shape {shape_to_str(op.attrs['shape'])}"
                )
            outs = run_op(op, [values[t] for t in op.inputs])
            for o, v in zip(op.outputs, outs, strict=True):
                values[o] = v
            done.add(op.name)

        for target in [*resolved, *(self._resolve(t) for t in targets)]:
            visit(target.op if isinstance(target, Output) else target)
        results = [values[r] if isinstance(r, Output) else None for r in resolved]
        return results[0] if single else results

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
