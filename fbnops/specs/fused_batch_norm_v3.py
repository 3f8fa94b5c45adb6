"""FusedBatchNormV3, the forward op whose reserve spaces feed FusedBatchNormGradV3."""

from ._common import BATCH_NORM_DATA, EPSILON, IS_TRAINING, T_TYPES, data_format_attr
from .op_spec import ArgSpec, AttrSpec, OpSpec, Surfaces

SPEC = OpSpec(
    name="FusedBatchNormV3",
    summary="Batch normalization.",
    description=(
        'Note that the size of 4D Tensors are defined by either "NHWC" or "NCHW". '
        "The size of 1D Tensors matches the dimension C of the 4D Tensors."
    ),
    inputs=(
        ArgSpec("x", "T", "tensor", "A 4D Tensor for input data."),
        ArgSpec("scale", "U", "channels", "A 1D Tensor for scaling factor, to scale the normalized x."),
        ArgSpec("offset", "U", "channels", "A 1D Tensor for offset, to shift to the normalized x."),
        ArgSpec(
            "mean",
            "U",
            "channels",
            "A 1D Tensor for population mean. Used for inference only; must be empty for training.",
            tf_message_label="estimated_mean",
            required_when="stats_used",
        ),
        ArgSpec(
            "variance",
            "U",
            "channels",
            "A 1D Tensor for population variance. Used for inference only; must be empty for training.",
            tf_message_label="estimated_variance",
            required_when="stats_used",
        ),
    ),
    outputs=(
        ArgSpec("y", "T", "tensor", "A 4D Tensor for output data."),
        ArgSpec(
            "batch_mean",
            "U",
            "channels",
            "A 1D Tensor for the computed batch mean, to be used by TensorFlow to compute the running mean.",
        ),
        ArgSpec(
            "batch_variance",
            "U",
            "channels",
            "A 1D Tensor for the computed batch variance, to be used by TensorFlow to compute the running variance.",
        ),
        ArgSpec(
            "reserve_space_1",
            "U",
            "channels",
            "A 1D Tensor for the computed batch mean, to be reused in the gradient computation.",
        ),
        ArgSpec(
            "reserve_space_2",
            "U",
            "channels",
            "A 1D Tensor for the computed batch variance (inverted variance in the cuDNN case), "
            "to be reused in the gradient computation.",
        ),
        ArgSpec(
            "reserve_space_3",
            "U",
            "scalar0",
            "A 1D Tensor for some intermediate results, to be reused in the gradient computation "
            "for better efficiency.",
        ),
    ),
    attrs=(
        EPSILON,
        AttrSpec(
            name="exponential_avg_factor",
            type="float",
            default=1.0,
            doc="Factor used to blend the batch statistics into the running mean and variance (1.0 replaces them).",
        ),
        data_format_attr('The data format for x and y. Either "NHWC" (default) or "NCHW".'),
        IS_TRAINING,
    ),
    type_attrs={"T": T_TYPES, "U": ("bfloat16", "float")},
    kernel_type_attrs={"T": T_TYPES, "U": ("float",)},
    surfaces=Surfaces(
        java_class="FusedBatchNorm",
        java_endpoint="fusedBatchNorm",
        cc_class="FusedBatchNormV3",
        python="FusedBatchNormV3",
        directml=(
            ("is_training=True", "DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC"),
            ("is_training=False", "DML_BATCH_NORMALIZATION_OPERATOR_DESC"),
        ),
        onednn=(
            ("is_training=True", "BatchNormForwardTraining (momentum blending, no Bessel correction)"),
            ("is_training=False", "BatchNormInference"),
        ),
        java_package="nn",
    ),
    data=BATCH_NORM_DATA,
    gradient="FusedBatchNormGradV3",
    gradient_doc="Fed the forward's reserve spaces in training and its `mean`/`variance` inputs otherwise.",
    seeds=(),
)
