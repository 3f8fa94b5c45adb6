"""BatchNormWithGlobalNormalizationGrad: the gradients of the deprecated batch norm (api_def text)."""

from .batch_norm_with_global_normalization import (
    CPU_TYPES,
    DATA,
    MEAN_DOC,
    NUMBER_TYPES,
    REMOVED,
    SCALE_AFTER_NORMALIZATION,
    VARIANCE_DOC,
    VARIANCE_EPSILON,
)
from .op_spec import ArgSpec, OpSpec, Surfaces

SPEC = OpSpec(
    name="BatchNormWithGlobalNormalizationGrad",
    summary="Gradients for batch normalization.",
    description="This op is deprecated. See `tf.nn.batch_normalization`.",
    inputs=(
        ArgSpec("t", "T", "tensor", "A 4D input Tensor."),
        ArgSpec("m", "T", "channels", MEAN_DOC, tf_message_label="mean"),
        ArgSpec("v", "T", "channels", VARIANCE_DOC, tf_message_label="var"),
        ArgSpec(
            "gamma",
            "T",
            "channels",
            'A 1D gamma Tensor with size matching the last dimension of t. If "scale_after_normalization" '
            "is true, this Tensor will be multiplied with the normalized Tensor.",
        ),
        ArgSpec("backprop", "T", "tensor", "4D backprop Tensor.", tf_message_label="out_backprop"),
    ),
    outputs=(
        ArgSpec("dx", "T", "tensor", "4D backprop tensor for input."),
        ArgSpec("dm", "T", "channels", "1D backprop tensor for mean."),
        ArgSpec("dv", "T", "channels", "1D backprop tensor for variance."),
        ArgSpec("db", "T", "channels", "1D backprop tensor for beta."),
        ArgSpec("dg", "T", "channels", "1D backprop tensor for gamma."),
    ),
    attrs=(VARIANCE_EPSILON, SCALE_AFTER_NORMALIZATION),
    type_attrs={"T": NUMBER_TYPES},
    kernel_type_attrs={"T": CPU_TYPES},
    surfaces=Surfaces.named("BatchNormWithGlobalNormalizationGrad", java_package="nn"),
    data=DATA,
    deprecation=REMOVED,
)
