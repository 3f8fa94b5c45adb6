"""tensorflow::ClientSession: ``Run`` overloads returning a ``Status`` and filling ``outputs``."""

from __future__ import annotations

from fbnops.framework import errors as _errors
from fbnops.framework.session import Session as _CoreSession

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
        self._session = _CoreSession(scope.graph())

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
            return self._scope.status()
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
            if out is None or out._core is None:
                return _bad(f"fetch {f!r} is not an Output of a built op")
            fetches.append(out._core)
        targets = []
        for op in run_outputs:
            if not isinstance(op, Operation) or op._node is None:
                return _bad(f"run_outputs holds Operations, got {op!r}")
            targets.append(op._node)
        try:
            values = self._session.run(fetches, feeds, targets)
        except _errors.OpError as e:
            return Status.from_error(e)
        outputs.clear()
        outputs.extend(Tensor(v) for v in values)
        return Status.OK()
