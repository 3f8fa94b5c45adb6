"""org.tensorflow.Session: ``session.runner().feed(...).fetch(...).run()`` returns a ``Result``.

Name resolution follows tf-java: ``fetch("bn")`` is ``fetch(graph.outputOrThrow("bn"))``
(output 0), ``fetch("bn", 1)`` is ``graph.operationOrThrow("bn").output(1)``, and the
``Result`` is keyed by the names as given (``"bn"``) or by ``output.name()``
(``"bn:1"``) for fetches made from an ``Output``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fbnops.framework import errors as _errors
from fbnops.framework.dtypes import tf_name
from fbnops.framework.session import Session as _CoreSession
from fbnops.framework.session import execution_order, run_op
from fbnops.framework.tensor import shape_str

from .exceptions import (
    IllegalArgumentException,
    IllegalStateException,
    IndexOutOfBoundsException,
    TFInvalidArgumentException,
    java_exception,
)
from .framework import Op, Operand, Operation, Output
from .graph import Graph
from .types import Optional, Tensor, as_tensor

__all__ = ["Session", "Result"]


class Result:
    """org.tensorflow.Result: the fetched tensors, by index and by name; ``close()`` frees them."""

    def __init__(self, names: list[str], values: list[Tensor]):
        if len(names) != len(values):
            raise IllegalArgumentException(
                "Expected same number of names and values, found names.length = "
                f"{len(names)}, values.length = {len(values)}"
            )
        self._map: dict[str, Tensor] = {}
        for name, value in zip(names, values, strict=True):
            if name in self._map:
                raise IllegalArgumentException(f"Name collision in the result set, two outputs are named '{name}'")
            self._map[name] = value
        self._list = list(values)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateException("Result is closed")

    def get(self, key: int | str):
        """``get(int)`` -> Tensor (IndexOutOfBounds as a Java list); ``get(String)`` -> Optional<Tensor>."""
        self._check_open()
        if isinstance(key, str):
            return Optional.ofNullable(self._map.get(key))
        if isinstance(key, bool) or not isinstance(key, int):
            raise IllegalArgumentException(f"get takes an int or a String, got {type(key).__name__}")
        if not 0 <= key < len(self._list):
            raise IndexOutOfBoundsException(f"Index {key} out of bounds for length {len(self._list)}")
        return self._list[key]

    def size(self) -> int:
        return len(self._map)

    def keySet(self) -> frozenset[str]:
        return frozenset(self._map)

    def containsKey(self, key: str) -> bool:
        return key in self._map

    def getMetadata(self) -> Optional:
        return Optional.empty()

    def close(self) -> None:
        if not self._closed:
            for t in self._list:
                t.close()
            self._closed = True

    def __iter__(self) -> Iterator[tuple[str, Tensor]]:
        """Iterable<Map.Entry<String, Tensor>>: ``(name, tensor)`` pairs in fetch order."""
        self._check_open()
        return iter(list(self._map.items()))

    def __len__(self) -> int:
        return self.size()

    def __enter__(self) -> Result:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Session:
    """org.tensorflow.Session over a Graph."""

    def __init__(self, graph: Graph):
        if not isinstance(graph, Graph):
            raise IllegalArgumentException("Session needs a Graph")
        graph._check_open()
        self._graph = graph
        self._core = _CoreSession(graph._core_env)

    def graph(self) -> Graph:
        return self._graph

    def runner(self) -> Session.Runner:
        return Session.Runner(self)

    def run(self, op: str | Op) -> None:
        """``run(String opName)`` / ``run(Op op)``: run one target, fetch nothing."""
        runner = self.runner()
        runner.addTarget(op.op() if isinstance(op, Op) else op)
        runner.run()

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    class Runner:
        """Session.Runner: feeds, fetches and targets, then ``run()``."""

        def __init__(self, session: Session):
            self._session = session
            self._graph = session._graph
            self._feeds: list[tuple[Output, Tensor]] = []
            self._fetches: list[Output] = []
            self._names: list[str] = []
            self._targets: list[Operation] = []

        def _own(self, item, what: str):
            if item.env() is not self._graph:
                where = "an eager session" if item.env().isEager() else "a different graph"
                raise IllegalStateException(f"Can't {what} {item!r}, it is from {where}.")
            return item

        def feed(self, operand, *args) -> Session.Runner:
            """``feed(String, Tensor)``, ``feed(String, int, Tensor)`` or ``feed(Operand, Tensor)``."""
            if isinstance(operand, str) and len(args) == 2:
                output = self._graph.operationOrThrow(operand).output(args[0])
            elif isinstance(operand, str) and len(args) == 1:
                output = self._graph.outputOrThrow(operand)
            elif isinstance(operand, Operand) and len(args) == 1:
                output = self._own(operand, "feed value for operand").asOutput()
            else:
                raise IllegalArgumentException(
                    "feed takes (String, Tensor), (String, int, Tensor) or (Operand, Tensor)"
                )
            self._feeds.append((output, as_tensor(args[-1])))
            return self

        def fetch(self, operand, index: int | None = None) -> Session.Runner:
            """``fetch(String)``, ``fetch(String, int)``, ``fetch(Output)`` or ``fetch(Operand)``."""
            if isinstance(operand, str):
                if index is None:
                    output, name = self._graph.outputOrThrow(operand), operand
                else:
                    output = self._graph.operationOrThrow(operand).output(index)
                    name = output.name()
            elif isinstance(operand, Operand) and index is None:
                output = self._own(operand.asOutput(), "fetch output")
                name = output.name()
            else:
                output = None
            if output is None:
                raise IllegalArgumentException(
                    f"fetch takes a String (and an index) or an Operand, got {type(operand).__name__}"
                )
            output.dataType()  # as tf-java's fetch(Output) reads it: "op:9" fails here, with 6 outputs
            self._fetches.append(output)
            self._names.append(name)
            return self

        def addTarget(self, target) -> Session.Runner:
            """``addTarget(String)`` (the op of ``graph.outputOrThrow(name)``), ``addTarget(Operation | Op)``."""
            if isinstance(target, str):
                target = self._graph.outputOrThrow(target)
            if isinstance(target, Op):
                target = target.op()
            if not isinstance(target, Operation):
                raise IllegalArgumentException(
                    f"addTarget takes a String, Operation or Op, got {type(target).__name__}"
                )
            self._targets.append(self._own(target, "target operation"))
            return self

        def isEmpty(self) -> bool:
            return not self._targets and not self._fetches

        def run(self) -> Result:
            if self._session._core.closed:
                raise IllegalStateException("run() cannot be called on the Session after close()")
            values = _session_run(self._feeds, self._fetches, self._targets)
            tensors = [out.type()(v) for out, v in zip(self._fetches, values, strict=True)]
            return Result(self._names, tensors)


def _session_run(feeds: list[tuple[Output, Tensor]], fetches: list[Output], targets: list[Operation]) -> list:
    """``TF_SessionRun`` as tf-java reaches it (checked against real tf-java 1.1.0).

    A feed's dtype is checked (``arg[i]``: DirectSession numbers the feeds in the order of their
    sorted tensor names), its shape is not checked against the placeholder's (a kernel fails
    instead), and a failing kernel's message ends with its node: ``\n\t [[{{node bn}}]]``.
    """
    values = {}
    arg = {name: i for i, name in enumerate(sorted({out.name() for out, _ in feeds}))}
    for out, tensor in feeds:
        array = np.asarray(tensor)
        if array.dtype != out._core.dtype:
            expected, given = tf_name(out._core.dtype), tf_name(array.dtype)
            raise TFInvalidArgumentException(f"Expects arg[{arg[out.name()]}] to be {expected} but {given} is provided")
        values[out._core] = array
    roots = [out._core.op for out in fetches] + [op._core for op in targets]
    try:
        order = execution_order(roots, values)
    except _errors.OpError as e:
        raise java_exception(e) from None
    for op in order:
        try:
            if op.type == "Placeholder":
                shape = op.attrs.get("shape")
                raise _errors.InvalidArgumentError(
                    f"You must feed a value for placeholder tensor '{op.name}' with dtype {tf_name(op.attrs['dtype'])}"
                    + ("" if shape is None else f" and shape {shape_str(shape)}")
                )
            outputs = run_op(op, [values[t] for t in op.inputs])
        except _errors.OpError as e:
            raise type(java_exception(e))(f"{e.message}\n\t [[{{{{node {op.name}}}}}]]") from None
        values.update(zip(op.outputs, outputs, strict=True))
    return [values[out._core] for out in fetches]
