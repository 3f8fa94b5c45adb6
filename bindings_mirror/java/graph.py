"""tensorflow/java execution environments: ``Graph`` (tf-java's tensor-name parsing) and ``EagerSession``."""

from __future__ import annotations

from typing import Any

from fbnops.framework import errors as _errors
from fbnops.framework.graph import Graph as _CoreGraph
from fbnops.framework.graph import parse_tensor_name
from fbnops.framework.scope import EagerContext

from .exceptions import IllegalArgumentException, IllegalStateException, java_exception
from .framework import Operation, Output, Scope

__all__ = ["ExecutionEnvironment", "Graph", "EagerSession"]


class ExecutionEnvironment:
    _core_env: Any

    def baseScope(self) -> Scope:
        return self._base

    def isEager(self) -> bool:
        return isinstance(self, EagerSession)

    def isGraph(self) -> bool:
        return isinstance(self, Graph)

    def _check_open(self) -> None:
        """What tf-java checks before using the native environment (``Graph.ref()``, ``checkSession()``)."""
        raise NotImplementedError


class Graph(ExecutionEnvironment):
    """org.tensorflow.Graph: operations by name; ``output("op:1")`` parses tensor names as tf-java does."""

    def __init__(self):
        self._core_env = _CoreGraph()
        self._base = Scope(self)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateException("close() has been called on the Graph")

    def operation(self, name: str) -> Operation | None:
        self._check_open()
        op = self._core_env.operation(name)
        return None if op is None else Operation(self, op)

    def operationOrThrow(self, name: str) -> Operation:
        op = self.operation(name)
        if op is None:
            raise IllegalArgumentException(f"No Operation named [{name}] in the Graph")
        return op

    def output(self, output: str) -> Output | None:
        """``"op"`` is output 0 and ``"op:i"`` output i (not range-checked, as in tf-java); None if no such op.

        Parsed by the framework's one tensor-name parser; tf-java's quirks kept: a trailing ``:``
        or a ``^`` is part of the looked-up name, and an index beyond 32 bits is badly formatted.
        """
        self._check_open()
        if output.endswith(":") or output.startswith("^"):
            op = self.operation(output)  # never found: names cannot contain these
            return None if op is None else Output(op, 0)
        try:
            name = parse_tensor_name(output, default_index=0)
        except _errors.InvalidArgumentError:
            name = None
        if name is None or name.index >= 2**31:
            raise IllegalArgumentException(f'Could not get output for badly formatted output name: "{output}"')
        op = self.operation(name.op)
        return None if op is None else Output(op, name.index)

    def outputOrThrow(self, output: str) -> Output:
        out = self.output(output)
        if out is None:
            raise IllegalArgumentException(f"No Operation named [{output}] in the Graph")
        return out

    def operations(self):
        self._check_open()
        return iter([Operation(self, op) for op in self._core_env.operations()])

    def toGraphDef(self) -> str:
        """The GraphDef, in protobuf text format."""
        self._check_open()
        return self._core_env.to_pbtxt()

    def importGraphDef(self, graphDef: str) -> None:
        from fbnops.framework.graphdef import graph_from_pbtxt

        self._check_open()
        try:
            graph_from_pbtxt(graphDef, self._core_env)
        except _errors.OpError as e:
            raise java_exception(e) from None

    def close(self) -> None:
        """Later use raises ``IllegalStateException("close() has been called on the Graph")``."""
        self._closed = True

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EagerSession(ExecutionEnvironment):
    """org.tensorflow.EagerSession: ops run as they are built; ``output.asTensor()`` reads them."""

    def __init__(self):
        self._core_env = EagerContext()
        self._base = Scope(self)

    @staticmethod
    def create() -> EagerSession:
        return EagerSession()

    def _check_open(self) -> None:
        if self._core_env.closed:
            raise IllegalStateException("Eager session has been closed")

    def close(self) -> None:
        self._core_env.closed = True

    def __enter__(self) -> EagerSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
