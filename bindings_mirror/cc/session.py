"""tensorflow::ClientSession: ``Run`` overloads returning a ``Status`` and filling ``outputs``."""

from __future__ import annotations

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework import errors as _errors
from fbnops.framework.session import execution_order, run_op
from fbnops.framework.tensor import shape_str

from .framework import Operation, Scope, as_output
from .status import Status, StatusCode
from .tensor import Initializer, Tensor

__all__ = ["ClientSession", "RunOptions", "RunMetadata", "SessionOptions"]


class RunOptions:
    """tensorflow::RunOptions (accepted; the mirror runs synchronously on the CPU)."""

    def __init__(self, timeout_in_ms: int = 0, trace_level: int = 0):
        self.timeout_in_ms = timeout_in_ms
        self.trace_level = trace_level


class RunMetadata:
    """tensorflow::RunMetadata (left empty: the mirror collects no step stats)."""

    def __init__(self):
        self.step_stats = None


class SessionOptions:
    """tensorflow::SessionOptions (accepted; nothing to configure)."""


def _bad(message: str) -> Status:
    return Status(StatusCode.kInvalidArgument, message)


class ClientSession:
    """``Run([inputs,] fetch_outputs, [run_outputs,] outputs)`` and
    ``Run(run_options, inputs, fetch_outputs, run_outputs, outputs, run_metadata)``."""

    def __init__(self, scope: Scope, target: str | SessionOptions = ""):
        self._scope = scope

    def Run(self, *args) -> Status:
        if len(args) == 6:
            if not isinstance(args[0], RunOptions) or not (args[5] is None or isinstance(args[5], RunMetadata)):
                return _bad("Run(run_options, inputs, fetch_outputs, run_outputs, outputs, run_metadata)")
            args = args[1:5]
        if len(args) == 2:
            inputs, fetch_outputs, run_outputs, outputs = {}, args[0], [], args[1]
        elif len(args) == 3:
            inputs, fetch_outputs, run_outputs, outputs = args[0], args[1], [], args[2]
        elif len(args) == 4:
            inputs, fetch_outputs, run_outputs, outputs = args
        else:
            return _bad(
                "Run takes (fetch_outputs, outputs), (inputs, fetch_outputs, outputs), (inputs, fetch_outputs, "
                "run_outputs, outputs) or (run_options, inputs, fetch_outputs, run_outputs, outputs, run_metadata)"
            )
        if not isinstance(outputs, list):
            return _bad("outputs must be a list to fill (std::vector<Tensor>*)")
        if not isinstance(inputs, dict):
            return _bad("inputs must be a dict {Output: Input::Initializer} (ClientSession::FeedType)")
        if not self._scope.ok():
            return self._scope.status()  # deliberate (C7): TF runs the graph, failed node included
        feeds = {}
        for key, value in inputs.items():
            out = as_output(key)
            if out is None or out._core is None:
                return _bad(f"feed key {key!r} is not an Output")
            init = value if isinstance(value, Initializer) else Initializer(value)
            if not init.status.ok():
                return init.status
            feeds[out._core] = init.tensor
        fetches = []
        for f in fetch_outputs:
            out = as_output(f)
            if out is not None and out._core is None and out.node() is not None:  # Output(op, 7)
                node = out.node()
                return Status(
                    StatusCode.kOutOfRange,
                    f"Node '{node.name}' (type: '{node.type}', num of outputs: {node.num_outputs}) "
                    f"does not have output {out.index()}",
                )
            if out is None or out._core is None:
                return _bad(f"fetch {f!r} is not an Output of a built op")
            if out._core in feeds:
                return _bad(f"{out._core.name} is both fed and fetched.")
            fetches.append(out._core)
        targets = []
        for op in run_outputs:
            if not isinstance(op, Operation) or op._node is None:
                return _bad(f"run_outputs holds Operations, got {op!r}")
            targets.append(op._node)
        status, values = _execute(fetches, feeds, targets)
        if status.ok():
            outputs.clear()
            outputs.extend(Tensor(values[f]) for f in fetches)
        return status


def _execute(fetches, feeds, targets) -> tuple[Status, dict]:
    """Run the graph as DirectSession does: a feed of the wrong dtype is refused by the call frame,
    a placeholder is checked only when it runs, and a kernel error names its node."""
    for i, (out, value) in enumerate(feeds.items()):
        if np.asarray(value).dtype != out.dtype:
            got, want = dtypes.tf_name(np.asarray(value).dtype), dtypes.tf_name(out.dtype)
            return _bad(f"Expects arg[{i}] to be {want} but {got} is provided"), {}
    values = dict(feeds)
    roots = [f.op for f in fetches] + list(targets)
    op = None
    try:
        for op in execution_order(roots, values):
            if op.type == "Placeholder":
                shape = shape_str(op.attrs["shape"])
                raise _errors.InvalidArgumentError(
                    f"You must feed a value for placeholder tensor '{op.name}' with dtype "
                    f"{dtypes.tf_name(op.attrs['dtype'])} and shape {shape}"
                )
            values.update(zip(op.outputs, run_op(op, [values[t] for t in op.inputs]), strict=True))
    except _errors.OpError as e:
        failed = Status.from_error(e)
        where = f"\n\t [[{{{{node {op.name}}}}}]]" if op is not None else ""
        return Status(failed.code(), failed.message() + where), {}
    return Status.OK(), values
