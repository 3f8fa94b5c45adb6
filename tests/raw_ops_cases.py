"""How ``tf.raw_ops`` converts arguments: one table, checked against fbnops (test_raw_ops_conversion.py)
and, where TensorFlow is installed, against TensorFlow itself (test_tf_oracle.py).

Each row: an id, the op, input overrides, attrs, fbnops' outcome and TensorFlow's (the same
unless the row is a deliberate difference, documented in ``fbnops.ops.convert``).  An
outcome is ``("ok", dtype of output 0)`` or ``(exception class name, message fragment)``;
the class names are Python's ``TypeError``/``ValueError``/``OverflowError``/
``UnicodeDecodeError`` or TensorFlow's ``InvalidArgumentError`` (fbnops'
``InvalidArgumentError`` is a ``ValueError``, as TensorFlow's is not).
Recorded with tensorflow-cpu 2.21.0, eager, ``TF_ENABLE_ONEDNN_OPTS=0``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

F = np.float32
SHAPE = (2, 2, 2, 3)
_RNG = np.random.default_rng(1234)
X = _RNG.standard_normal(SHAPE).astype(F)
DY = _RNG.standard_normal(SHAPE).astype(F)
C = SHAPE[-1]


def grad_base() -> dict[str, Any]:
    return dict(
        y_backprop=DY.copy(),
        x=X.copy(),
        scale=np.linspace(0.5, 1.5, C).astype(F),
        reserve_space_1=X.mean((0, 1, 2)).astype(F),
        reserve_space_2=X.var((0, 1, 2)).astype(F),
        reserve_space_3=np.zeros(C, F),
    )


def fwd_base() -> dict[str, Any]:
    return dict(
        x=X.copy(),
        scale=np.linspace(0.5, 1.5, C).astype(F),
        offset=np.linspace(-1, 1, C).astype(F),
        mean=np.zeros(C, F),
        variance=np.ones(C, F),
    )


class Row(NamedTuple):
    id: str
    op: str
    inputs: dict
    attrs: dict
    ours: tuple
    tf: tuple | None = None  # None: the same as ours

    @property
    def tf_outcome(self) -> tuple:
        return self.ours if self.tf is None else self.tf


G, FW = "FusedBatchNormGradV3", "FusedBatchNormV3"
IAE = "InvalidArgumentError"
T_ALLOWED = "is not in the list of allowed values: half, bfloat16, float"
ints = np.ones(SHAPE, int).tolist()

ROWS = [
    # --- type groups: the first input of T (y_backprop) or U (reserve_space_1) sets the dtype ---
    Row("x f16 follows dy f32", G, {"x": X.astype(np.float16)}, {}, ("ok", "float32")),
    Row("dy f16 sets T", G, {"y_backprop": DY.astype(np.float16)}, {}, ("ok", "float16")),
    Row("dy bf16 sets T", G, {"y_backprop": DY.astype(ml_dtypes.bfloat16)}, {}, ("ok", "bfloat16")),
    Row("dy and x as lists", G, {"y_backprop": DY.tolist(), "x": X.tolist()}, {}, ("ok", "float32")),
    Row("x int list cast", G, {"x": ints}, {}, ("ok", "float32")),
    Row("x bool array cast", G, {"x": X > 0}, {}, ("ok", "float32")),
    Row("x f64 array cast", G, {"x": X.astype(np.float64)}, {}, ("ok", "float32")),
    Row("dy f16, x int64 array", G, {"y_backprop": DY.astype(np.float16), "x": np.ones(SHAPE, np.int64)}, {},
        ("ok", "float16")),
    Row("scale f64 array cast", G, {"scale": np.ones(C)}, {}, ("ok", "float32")),
    Row("scale int list", G, {"scale": [1, 2, 3]}, {}, ("ok", "float32")),
    Row("scale f16 array", G, {"scale": np.ones(C, np.float16)}, {}, ("ok", "float32")),
    Row("rs1 list sets U, rs2 f64 cast", G, {"reserve_space_1": [0.0] * C, "reserve_space_2": np.ones(C)}, {},
        ("ok", "float32")),
    Row("rs3 python int", G, {"reserve_space_3": 0}, {}, ("ok", "float32")),
    Row("rs3 numpy f64 scalar", G, {"reserve_space_3": np.float64(0)}, {}, ("ok", "float32")),
    Row("dy big-endian f32", G, {"y_backprop": DY.astype(">f4")}, {}, ("ok", "float32")),
    Row("fwd mean/variance lists", FW, {"mean": [0.0] * C, "variance": [1.0] * C}, {"is_training": False},
        ("ok", "float32")),
    Row("fwd scale list", FW, {"scale": [1.0] * C}, {}, ("ok", "float32")),
    Row("fwd empty mean list (training)", FW, {"mean": [], "variance": []}, {}, ("ok", "float32")),
    Row("dy f64 sets T=double", G, {"y_backprop": DY.astype(np.float64)}, {}, (IAE, f"'T' of double {T_ALLOWED}")),
    Row("dy int32 array", G, {"y_backprop": DY.astype(np.int32)}, {}, (IAE, f"'T' of int32 {T_ALLOWED}")),
    Row("dy int list", G, {"y_backprop": ints, "x": ints}, {}, (IAE, f"'T' of int32 {T_ALLOWED}")),
    Row("dy int list beyond int32", G, {"y_backprop": (np.full(SHAPE, 2**40, np.int64)).tolist()}, {},
        (IAE, f"'T' of int64 {T_ALLOWED}")),
    Row("dy complex64", G, {"y_backprop": DY.astype(np.complex64)}, {}, (IAE, f"'T' of complex64 {T_ALLOWED}")),
    Row("rs1 int list", G, {"reserve_space_1": [0] * C}, {},
        (IAE, "Value for attr 'U' of int32 is not in the list of allowed values: float")),
    Row("rs1 f16", G, {"reserve_space_1": np.zeros(C, np.float16)}, {}, (IAE, "'U' of half is not in the list")),
    Row("rs1 bool", G, {"reserve_space_1": np.zeros(C, bool)}, {}, (IAE, "'U' of bool is not in the list")),
    Row("rs2 complex list", G, {"reserve_space_2": [1 + 2j, 0, 0]}, {},
        ("TypeError", "Cannot convert [(1+2j), 0, 0] to EagerTensor of dtype float")),
    Row("dy int list, x float list", G, {"y_backprop": ints, "x": X.tolist()}, {},
        ("TypeError", "to EagerTensor of dtype int32")),
    Row("scale scalar", G, {"scale": 1.0}, {}, (IAE, "scale must be 1-dimensional[]")),
    Row("dy numpy scalar", G, {"y_backprop": np.float32(1)}, {}, (IAE, "input must be 4 or 5-dimensional[]")),
    Row("dy None", G, {"y_backprop": None}, {},
        ("ValueError", "Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor")),
    Row("dy ragged list", G, {"y_backprop": [[1.0], [1.0, 2.0]]}, {},
        ("ValueError", "Can't convert non-rectangular Python sequence to Tensor.")),
    Row("fwd scale f16", FW, {"scale": np.ones(C, np.float16)}, {},
        (IAE, "'U' of half is not in the list of allowed values: bfloat16, float")),
    Row("fwd x f64", FW, {"x": X.astype(np.float64)}, {}, (IAE, f"'T' of double {T_ALLOWED}")),
    Row("fwd x int list", FW, {"x": ints}, {}, (IAE, f"'T' of int32 {T_ALLOWED}")),
    Row("fwd mean scalar", FW, {"mean": 0.0}, {}, (IAE, "estimated_mean must be 1-dimensional[]")),
    # --- attrs: TensorFlow's _MakeFloat / _MakeBool / _MakeStr ---
    Row("epsilon str", G, {}, {"epsilon": "0.1"}, ("TypeError", "Expected float for argument 'epsilon' not '0.1'.")),
    Row("epsilon np.True_", G, {}, {"epsilon": np.True_},
        ("TypeError", "Expected float for argument 'epsilon' not np.True_.")),
    Row("epsilon list", G, {}, {"epsilon": [0.1]}, ("TypeError", "Expected float for argument 'epsilon' not [0.1].")),
    Row("epsilon complex", G, {}, {"epsilon": 1j}, ("TypeError", "Expected float for argument 'epsilon' not 1j.")),
    Row("epsilon 0-d array", G, {}, {"epsilon": np.array(0.1)},
        ("TypeError", "Expected float for argument 'epsilon' not array(0.1).")),
    Row("is_training int", G, {}, {"is_training": 1}, ("TypeError", "Expected bool for argument 'is_training' not 1.")),
    Row("is_training str", G, {}, {"is_training": "True"},
        ("TypeError", "Expected bool for argument 'is_training' not 'True'.")),
    Row("is_training float", G, {}, {"is_training": 0.0},
        ("TypeError", "Expected bool for argument 'is_training' not 0.0.")),
    Row("data_format int", G, {}, {"data_format": 1},
        ("TypeError", "Expected string for argument 'data_format' not 1.")),
    Row("data_format bytearray", G, {}, {"data_format": bytearray(b"NHWC")},
        ("TypeError", "Expected string for argument 'data_format' not bytearray(b'NHWC').")),
    Row("factor str", FW, {}, {"exponential_avg_factor": "1"},
        ("TypeError", "Expected float for argument 'exponential_avg_factor' not '1'.")),
    Row("data_format not allowed", G, {}, {"data_format": "NWHC"},
        (IAE, 'Value for attr \'data_format\' of "NWHC" is not in the list of allowed values: "NHWC", "NCHW"')),
    Row("epsilon True", G, {}, {"epsilon": True}, ("ok", "float32")),
    Row("epsilon int", G, {}, {"epsilon": 1}, ("ok", "float32")),
    Row("epsilon np.float64", G, {}, {"epsilon": np.float64(0.01)}, ("ok", "float32")),
    Row("epsilon np.int32", G, {}, {"epsilon": np.int32(1)}, ("ok", "float32")),
    Row("epsilon Fraction", G, {}, {"epsilon": Fraction(1, 10)}, ("ok", "float32")),
    Row("epsilon None is the default", G, {}, {"epsilon": None}, ("ok", "float32")),
    Row("is_training None is the default", G, {}, {"is_training": None}, ("ok", "float32")),
    Row("data_format bytes", G, {}, {"data_format": b"NHWC"}, ("ok", "float32")),
    Row("data_format np.str_", G, {}, {"data_format": np.str_("NHWC")}, ("ok", "float32")),
    Row("data_format None is the default", G, {}, {"data_format": None}, ("ok", "float32")),
    Row("is_training np.True_", G, {}, {"is_training": np.True_},
        ("TypeError", "Expected bool for argument 'is_training' not np.True_.")),
    Row("is_training np.False_", FW, {}, {"is_training": np.False_},
        ("TypeError", "Expected bool for argument 'is_training' not np.False_.")),
    Row("epsilon np.float16", G, {}, {"epsilon": np.float16(0.01)}, ("ok", "float32")),
    Row("epsilon bfloat16 scalar", G, {}, {"epsilon": ml_dtypes.bfloat16(0.5)},
        ("TypeError", "Expected float for argument 'epsilon' not 0.5.")),
    # --- deliberate differences (fbnops.ops.convert) ---
    Row("epsilon beyond float (TF: inf)", G, {}, {"epsilon": 1e40}, (IAE, "of 1e+40 is out of the range of float"),
        tf=("ok", "float32")),
    Row("epsilon beyond double (TF: OverflowError)", G, {}, {"epsilon": 10**400},
        (IAE, "is out of the range of float"), tf=("OverflowError", "int too large to convert to float")),
    Row("epsilon NaN (TF computes NaN)", G, {}, {"epsilon": float("nan")}, (IAE, "must be a finite float"),
        tf=("ok", "float32")),
    Row("scale literal beyond float (TF: inf)", G, {"scale": [1e40, 1.0, 1.0]}, {},
        (IAE, "Value 1e+40 of input 'scale' is out of the range of float"), tf=("ok", "float32")),
    Row("x f64 array beyond float (TF: inf)", G, {"x": np.full(SHAPE, 1e40)}, {},
        (IAE, "of input 'x' is out of the range of float"), tf=("ok", "float32")),
    Row("x f32 beyond half (TF: inf)", G, {"y_backprop": DY.astype(np.float16), "x": np.full(SHAPE, 7e4, F)}, {},
        (IAE, "Value 70000.0 of input 'x' is out of the range of half"), tf=("ok", "float16")),
    Row("dy literal beyond float", G, {"y_backprop": np.full(SHAPE, 1e40).tolist()}, {},
        (IAE, "of input 'y_backprop' is out of the range of float"),
        tf=("ValueError", "Can't convert Python sequence with a value out of range for a double-precision float.")),
    Row("data_format bytes not UTF-8", G, {}, {"data_format": b"\xff"}, (IAE, "is not valid UTF-8"),
        tf=("UnicodeDecodeError", "can't decode byte 0xff")),
]  # fmt: skip


def call_inputs(row: Row) -> dict:
    return {**(grad_base() if row.op == G else fwd_base()), **row.inputs}
