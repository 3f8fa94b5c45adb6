"""BatchNormWithGlobalNormalization: TensorFlow's deprecated inference batch norm (api_def text).

What it shares with its gradient op (``batch_norm_with_global_normalization_grad``), as
TensorFlow's ``nn_ops.cc`` registers both: one type attr ``T: numbertype`` for every
tensor, two required attrs (no default), 4-D data with the channels on the last axis.
TensorFlow removed both at GraphDef version 9 (``Use tf.nn.batch_normalization()``).
"""

from .op_spec import REQUIRED, ArgSpec, AttrSpec, DataSpec, Deprecation, OpSpec, Surfaces

# TensorFlow's numbertype, in its order, without the quantized types (qint8, quint8, qint32,
# qint16, quint16: NumPy has no dtype for them, so no fbnops input can carry one).
NUMBER_TYPES = (
    "float",
    "double",
    "int32",
    "uint8",
    "int16",
    "int8",
    "complex64",
    "int64",
    "bfloat16",
    "uint16",
    "complex128",
    "half",
    "uint32",
    "uint64",
)
# REGISTER_KERNEL(half), (float), (double) in batch_norm_op.cc
CPU_TYPES = ("half", "float", "double")

# .Deprecated(9, "Use tf.nn.batch_normalization()")
REMOVED = Deprecation(9, "Use tf.nn.batch_normalization()")

# t: 4-D only, channels last (the shape function's WithRank(t, 4) and Dim(input, 3))
DATA = DataSpec("t", ranks=(4,), channel_axis=-1, merge_shapes=True)

VARIANCE_EPSILON = AttrSpec(
    name="variance_epsilon", type="float", default=REQUIRED, doc="A small float number to avoid dividing by 0."
)
SCALE_AFTER_NORMALIZATION = AttrSpec(
    name="scale_after_normalization",
    type="bool",
    default=REQUIRED,
    doc="A bool indicating whether the resulted tensor needs to be multiplied with gamma.",
)

MEAN_DOC = (
    "A 1D mean Tensor with size matching the last dimension of t. This is the first output from "
    "tf.nn.moments, or a saved moving average thereof."
)
VARIANCE_DOC = (
    "A 1D variance Tensor with size matching the last dimension of t. This is the second output from "
    "tf.nn.moments, or a saved moving average thereof."
)

SPEC = OpSpec(
    name="BatchNormWithGlobalNormalization",
    summary="Batch normalization.",
    description="This op is deprecated. Prefer `tf.nn.batch_normalization`.",
    inputs=(
        ArgSpec("t", "T", "tensor", "A 4D input Tensor."),
        ArgSpec("m", "T", "channels", MEAN_DOC, tf_message_label="mean"),
        ArgSpec("v", "T", "channels", VARIANCE_DOC, tf_message_label="var"),
        ArgSpec(
            "beta",
            "T",
            "channels",
            "A 1D beta Tensor with size matching the last dimension of t. "
            "An offset to be added to the normalized tensor.",
        ),
        ArgSpec(
            "gamma",
            "T",
            "channels",
            'A 1D gamma Tensor with size matching the last dimension of t. If "scale_after_normalization" '
            "is true, this tensor will be multiplied with the normalized tensor.",
        ),
    ),
    outputs=(
        ArgSpec("result", "T", "tensor", "The normalized t: (t - m) * rsqrt(v + variance_epsilon) [* gamma] + beta."),
    ),
    attrs=(VARIANCE_EPSILON, SCALE_AFTER_NORMALIZATION),
    type_attrs={"T": NUMBER_TYPES},
    kernel_type_attrs={"T": CPU_TYPES},
    surfaces=Surfaces.named("BatchNormWithGlobalNormalization", java_package="nn"),
    data=DATA,
    deprecation=REMOVED,
    gradient="BatchNormWithGlobalNormalizationGrad",
    gradient_doc=(
        "Fed t, m, v, gamma and the gradient of result (TensorFlow's `_BatchNormWithGlobalNormalizationGrad`)."
    ),
)
