"""``call_signature`` in C (see :func:`fbnops.ops.execute.call_signature`, whose Python twin
serves where this is not built, and which a test holds this to): the same key, built without
Python's per-attribute overhead, since every repeated op call computes it."""

cimport numpy as cnp
from libc.math cimport copysign

cnp.import_array()

cdef frozenset _SCALAR_ATTR_TYPES = frozenset((bool, int, float, str, type(None)))


def call_signature(surface, op_type, inputs, attrs):
    cdef list key = [surface, op_type]
    cdef bint trial_hash = False
    cdef cnp.ndarray a
    for name, value in inputs.items():
        if type(value) is not cnp.ndarray:
            return None
        a = <cnp.ndarray> value
        if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):  # the full path copies it
            return None
        key.append(name)
        key.append(value.shape)
        key.append(<object> cnp.PyArray_DESCR(a))
    for name, value in attrs.items():
        kind = type(value)
        key.append(name)
        key.append(kind)
        key.append(value)
        if kind is float:  # -0.0 == 0.0 but can give other results (NaN never matches itself)
            key.append(copysign(1.0, <double> value))
        elif kind not in _SCALAR_ATTR_TYPES:
            trial_hash = True
    signature = tuple(key)
    if trial_hash:
        try:
            hash(signature)
        except TypeError:  # an unhashable attr value: the full path judges it
            return None
    return signature
