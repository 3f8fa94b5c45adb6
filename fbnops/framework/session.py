"""Running graphs: ``Session.run(fetches, feed_dict)``.

Only the operations the fetches (and targets) need are run, in dependency order,
control inputs first; each on its kernel label's backend (else the current one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from . import dtypes, memory
from .errors import InvalidArgumentError
from .graph import Graph, Operation, Output, parse_tensor_name
from .registry import get_op_def
from .tensor import as_array, shape_str

__all__ = ["Session", "run_op"]


def run_op(op: Operation, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    return tuple(get_op_def(op.type).compute(arrays, op.attrs, op.kernel_label))


def _check_feed(t: Output, value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray) and not value.dtype.isnative:  # a byte-swapped copy would be made
        memory.check_fits(value.size * value.dtype.itemsize, f"the feed for {t.name}", t.op.type)
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
            f"Cannot feed value of shape {shape_str(arr.shape)} for {t.name}, which has shape {shape_str(shape)}"
        )
    return arr


def _dependencies(op: Operation, values: Mapping[Output, np.ndarray]) -> list[Operation]:
    return [*op.control_inputs, *(t.op for t in op.inputs if t not in values)]


def _is_fed(op: Operation, values: Mapping[Output, np.ndarray]) -> bool:
    return bool(op.outputs) and all(o in values for o in op.outputs)


def execution_order(roots: Iterable[Operation], values: Mapping[Output, np.ndarray]) -> list[Operation]:
    """The ops ``roots`` need, each after its inputs and control inputs (iterative depth-first search)."""
    visiting, done = object(), object()
    state: dict[Operation, object] = {}
    order: list[Operation] = []
    for root in roots:
        if root in state or _is_fed(root, values):
            continue
        state[root] = visiting
        stack = [(root, iter(_dependencies(root, values)))]
        while stack:
            op, pending = stack[-1]
            for dep in pending:
                seen = state.get(dep)
                if seen is visiting:
                    raise InvalidArgumentError(f"Graph has a cycle through '{dep.name}'")
                if seen is None and not _is_fed(dep, values):
                    state[dep] = visiting
                    stack.append((dep, iter(_dependencies(dep, values))))
                    break
            else:
                stack.pop()
                state[op] = done
                order.append(op)
    return order


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
            name = parse_tensor_name(f, default_index=None)  # TF1: a bare name is the operation (a target)
            if name.control:
                raise InvalidArgumentError(f"'{f}' names a control input; fetch the operation '{name.op}' instead")
            op = self.graph.get_operation(name.op)
            if name.index is None:
                return op
            if name.index >= op.num_outputs:  # TensorFlow's own wording (Graph.as_graph_element)
                raise InvalidArgumentError(
                    f"Argument `fetch` = {f} cannot be interpreted as a Tensor. (\"The name '{f}' refers to a "
                    f"Tensor which does not exist. The operation, '{op.name}', exists but only has "
                    f'{op.num_outputs} outputs.")'
                )
            return op.output(name.index)
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
        roots = [r.op if isinstance(r, Output) else r for r in [*resolved, *(self._resolve(t) for t in targets)]]
        values: dict[Output, np.ndarray] = {}
        for key, value in (feed_dict or {}).items():
            t = self._resolve(key)
            if isinstance(t, Operation):
                t = t.output(0)
            values[t] = _check_feed(t, value)
        for op in execution_order(roots, values):
            if op.type == "Placeholder":
                raise InvalidArgumentError(
                    f"You must feed a value for placeholder tensor '{op.name}' with dtype "
                    f"{dtypes.tf_name(op.attrs['dtype'])} and shape {shape_str(op.attrs['shape'])}"
                )
            outs = run_op(op, [values[t] for t in op.inputs])
            for o, v in zip(op.outputs, outs, strict=True):
                values[o] = v
        results = [values[r] if isinstance(r, Output) else None for r in resolved]
        return results[0] if single else results

    def close(self) -> None:
        """Release the session; running it afterwards is an error."""
        self.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
