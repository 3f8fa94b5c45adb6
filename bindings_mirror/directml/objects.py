"""DirectML objects that a device creates: IDMLObject, operators, compiled operators, initializers."""

from __future__ import annotations

from typing import Any

from .descs import DML_BINDING_PROPERTIES
from .enums import S_OK, invalid
from .schemas import _OpSchema


class IDMLObject:
    """IDMLObject: every DirectML object can carry a debug name."""

    def __init__(self):
        self._name = ""

    def SetName(self, name: str) -> int:
        if not isinstance(name, str):
            raise invalid("SetName expects a string (PCWSTR)")
        self._name = name
        return S_OK


class IDMLOperator(IDMLObject):
    def __init__(self, schema: _OpSchema, desc: Any):
        super().__init__()
        self._schema = schema
        self._desc = desc


class IDMLCompiledOperator(IDMLObject):
    def __init__(self, op: IDMLOperator, flags: int):
        super().__init__()
        self._op = op
        self._flags = flags
        self._initialized = False
        self._resident = True

    def GetBindingProperties(self) -> DML_BINDING_PROPERTIES:
        s = self._op._schema
        return DML_BINDING_PROPERTIES(len(s.inputs) + len(s.outputs), 0, 0)


class IDMLOperatorInitializer(IDMLObject):
    def __init__(self, ops):
        super().__init__()
        self._resident = True
        self.Reset(ops)

    def Reset(self, ops) -> None:
        ops = list(ops)
        if not all(isinstance(o, IDMLCompiledOperator) for o in ops):
            raise invalid("IDMLOperatorInitializer: every operator must be an IDMLCompiledOperator")
        self._ops = ops

    def GetBindingProperties(self) -> DML_BINDING_PROPERTIES:
        return DML_BINDING_PROPERTIES(0, 0, 0)
