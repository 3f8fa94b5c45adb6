"""Fuzz cases for every public entry: plain data (surface, shape, layout, dtype, mode, seed,
mutation) and the call each one builds, with what must happen to it (accepted or rejected,
and the argument a rejection must name)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SURFACES", "DTYPES", "BAD_DTYPES", "MUTATIONS", "LAYOUTS", "Built", "build_inputs", "relayout"]

SURFACES = ("raw_grad", "raw_fwd", "graph", "java", "cc", "dml", "onednn", "runfile")
DTYPES = ("float32", "float16", "bfloat16")
BAD_DTYPES = ("int32", "uint8", "bool", "float64", "complex64", "object", "str")
MUTATIONS = (
    "none",
    "rank",
    "dtype",
    "channels",
    "shape_mismatch",
    "layout",
    "values",
    "zero_dim",
    "absurd",
    "attr",
    "argnames",
    "not_array",
)
LAYOUTS = ("strided", "negative", "broadcast", "unaligned", "readonly", "fortran", "big_endian")


def _dt(name):
    import ml_dtypes

    return {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[name]


def _channels(shape, fmt):
    from fbnops.framework.layouts import channel_axis

    return shape[channel_axis(fmt, len(shape))]


def relayout(a: np.ndarray, how: str) -> np.ndarray:
    if a.ndim == 0:
        return a
    if how == "strided":
        big = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
        big[::2] = a
        return big[::2]
    if how == "negative":
        return np.ascontiguousarray(a[::-1])[::-1]
    if how == "broadcast":  # zero strides along axis 0 (values repeat)
        return np.broadcast_to(a[:1], a.shape)
    if how == "unaligned":  # data starting one byte past an aligned address
        raw = np.zeros(a.nbytes + 1, np.uint8)
        out = np.ndarray(a.shape, a.dtype, buffer=raw, offset=1)
        out[...] = a
        return out
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if how == "fortran":
        return np.asfortranarray(a)
    if how == "big_endian" and a.dtype.kind == "f":
        return a.astype(a.dtype.newbyteorder(">"))
    return a


def _bad_dtype(a: np.ndarray, name: str):
    if name == "object":
        return a.astype(object)
    if name == "str":
        return a.astype(np.float32).astype(str)
    return a.astype(np.float32).astype(name)


@dataclass
class Built:
    inputs: dict
    attrs: dict
    expect: str  # "accept" | "reject" | "either"
    arg: str | None = None  # the argument a rejection must name
    extra: dict = field(default_factory=dict)


def build_inputs(case: dict) -> Built:
    """Inputs and attrs of a batch-norm call (TF names), with the case's mutation applied."""
    op = "fwd" if case["surface"] == "raw_fwd" else "grad"
    rng = np.random.default_rng(case["seed"])
    shape, fmt = list(case["shape"]), case["data_format"]
    c = _channels(shape, fmt)
    dt = _dt(case["dtype"])
    if op == "grad":
        inputs = {
            "y_backprop": rng.standard_normal(shape).astype(dt),
            "x": rng.standard_normal(shape).astype(dt),
            "scale": (rng.random(c) + 0.5).astype(np.float32),
            "reserve_space_1": (rng.standard_normal(c) * 0.1).astype(np.float32),
            "reserve_space_2": (rng.random(c) + 0.5).astype(np.float32),
            "reserve_space_3": np.zeros((), np.float32),
        }
        tensors, vectors = ["y_backprop", "x"], ["scale", "reserve_space_1", "reserve_space_2"]
    else:
        inputs = {
            "x": rng.standard_normal(shape).astype(dt),
            "scale": (rng.random(c) + 0.5).astype(np.float32),
            "offset": rng.standard_normal(c).astype(np.float32),
            "mean": (rng.standard_normal(c) * 0.1).astype(np.float32),
            "variance": (rng.random(c) + 0.5).astype(np.float32),
        }
        tensors, vectors = ["x"], ["scale", "offset"] + ([] if case["is_training"] else ["mean", "variance"])
    attrs = {"epsilon": 1e-3, "data_format": fmt, "is_training": case["is_training"]}
    m = case["mutation"]
    kind, pick = m["kind"], m["pick"]
    names = list(inputs)
    if kind == "none":
        return Built(inputs, attrs, "accept")
    if kind == "rank":
        name = (tensors + vectors)[pick % len(tensors + vectors)]
        a = inputs[name]
        inputs[name] = a.reshape(a.shape + (1, 1)) if a.ndim >= 4 or pick % 2 else a.reshape(a.shape + (1,))
        if a.ndim == 4 and pick % 2 == 0:
            inputs[name] = a.reshape(a.shape + (1,))  # 4-D -> 5-D is legal only with a 5-D twin
        return Built(inputs, attrs, "either" if inputs[name].ndim in (4, 5) else "reject", name)
    if kind == "dtype":
        name = names[pick % len(names)]
        inputs[name] = _bad_dtype(inputs[name], BAD_DTYPES[pick % len(BAD_DTYPES)])
        return Built(inputs, attrs, "reject", name)
    if kind == "channels":
        name = vectors[pick % len(vectors)]
        inputs[name] = np.ones(c + 1 + pick % 3, np.float32)
        return Built(inputs, attrs, "reject", name)
    if kind == "shape_mismatch" and op == "grad":
        s2 = list(shape)
        s2[0] += 1
        inputs["x"] = rng.standard_normal(s2).astype(dt)
        return Built(inputs, attrs, "reject", "x")
    if kind == "layout":
        name = names[pick % len(names)]
        inputs[name] = relayout(inputs[name], LAYOUTS[pick % len(LAYOUTS)])
        return Built(inputs, attrs, "accept")
    if kind == "values":
        name = tensors[pick % len(tensors)]
        a = inputs[name].copy()
        flat = a.reshape(-1)
        if flat.size:
            flat[pick % flat.size] = [np.nan, np.inf, -np.inf][pick % 3]
        inputs[name] = a
        return Built(inputs, attrs, "accept")
    if kind == "zero_dim":
        s2 = list(shape)
        s2[pick % len(s2)] = 0
        c2 = _channels(s2, fmt)
        for t in tensors:
            inputs[t] = np.zeros(s2, dt)
        for v in vectors:
            inputs[v] = np.ones(c2, np.float32)
        return Built(inputs, attrs, "accept")
    if kind == "absurd":
        # broadcast views: small enough to verify against float64, or far beyond this machine's memory
        big = [1 << 12, 1 << 16, 1 << 36, 1 << 40][pick % 4]
        s2 = list(shape)
        s2[0] = big
        for t in tensors:
            inputs[t] = np.broadcast_to(inputs[t][:1], s2)
        if pick % 5 == 0:  # a shape whose element count overflows 64 bits (only an interface can claim it)

            class Absurd:
                __array_interface__ = {
                    "shape": (1 << 40, 1 << 40, 1 << 40, c),
                    "typestr": "<f4",
                    "data": (inputs[tensors[0]].ctypes.data, False),
                    "strides": (0, 0, 0, 0),
                    "version": 3,
                }

            inputs[tensors[-1]] = Absurd()
            return Built(inputs, attrs, "reject", tensors[-1])
        nbytes = int(np.prod(s2, dtype=np.float64)) * np.dtype(dt).itemsize
        return Built(inputs, attrs, "reject" if nbytes > (1 << 34) else "accept", tensors[0])
    if kind == "attr":
        choices = [
            ("data_format", "NHCW"),
            ("data_format", 4),
            ("epsilon", float("nan")),
            ("epsilon", "0.1"),
            ("is_training", "yes"),
            ("epsilon", None),
            ("exponential_avg_factor", float("inf")),
        ]
        name, value = choices[pick % len(choices)]
        if name == "exponential_avg_factor" and op == "grad":
            name, value = "data_format", b"XY"
        attrs[name] = value
        return Built(inputs, attrs, "reject", name)
    if kind == "argnames":
        name = names[pick % len(names)]
        if pick % 2:
            inputs.pop(name)
        else:
            inputs[name + "_typo"] = inputs.pop(name)
        return Built(inputs, attrs, "reject", name)
    if kind == "not_array":
        name = names[pick % len(names)]
        inputs[name] = [[0.0]] if pick % 3 == 0 else (None if pick % 3 == 1 else "x")
        return Built(inputs, attrs, "reject", name)
    return Built(inputs, attrs, "accept")
