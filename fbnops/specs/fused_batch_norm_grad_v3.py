"""FusedBatchNormGradV3: seeds 000 (Java), 001 (C++), 002 (Python); api_def text."""

from ._common import BATCH_NORM_DATA, EPSILON, IS_TRAINING, T_TYPES, data_format_attr
from .op_spec import ArgSpec, OpSpec, Surfaces

_RS1 = (
    "When is_training is True, a 1D Tensor for the computed batch mean to be reused in "
    "gradient computation. When is_training is False, a 1D Tensor for the population mean "
    "to be reused in both 1st and 2nd order gradient computation."
)
_RS2 = (
    "When is_training is True, a 1D Tensor for the computed batch variance (inverted "
    "variance in the cuDNN case) to be reused in gradient computation. When is_training is "
    "False, a 1D Tensor for the population variance to be reused in both 1st and 2nd order "
    "gradient computation."
)
_RS3 = (
    "When is_training is True, a 1D Tensor for some intermediate results to be reused in "
    "gradient computation. When is_training is False, a dummy empty Tensor will be created."
)

SPEC = OpSpec(
    name="FusedBatchNormGradV3",
    summary="Gradient for batch normalization.",
    description=(
        'Note that the size of 4D Tensors are defined by either "NHWC" or "NCHW". '
        "The size of 1D Tensors matches the dimension C of the 4D Tensors."
    ),
    inputs=(
        ArgSpec("y_backprop", "T", "tensor", "A 4D Tensor for the gradient with respect to y."),
        ArgSpec("x", "T", "tensor", "A 4D Tensor for input data."),
        ArgSpec(
            "scale",
            "float",
            "channels",
            "A 1D Tensor for scaling factor, to scale the normalized x.",
        ),
        ArgSpec("reserve_space_1", "U", "channels", _RS1, tf_message_label="saved mean"),
        ArgSpec("reserve_space_2", "U", "channels", _RS2, tf_message_label="saved variance"),
        ArgSpec("reserve_space_3", "U", "any", _RS3),
    ),
    outputs=(
        ArgSpec("x_backprop", "T", "tensor", "A 4D Tensor for the gradient with respect to x."),
        ArgSpec("scale_backprop", "U", "channels", "A 1D Tensor for the gradient with respect to scale."),
        ArgSpec("offset_backprop", "U", "channels", "A 1D Tensor for the gradient with respect to offset."),
        ArgSpec("reserve_space_4", "U", "empty", "Unused placeholder to match the mean input in FusedBatchNorm."),
        ArgSpec(
            "reserve_space_5",
            "U",
            "empty",
            "Unused placeholder to match the variance input in FusedBatchNorm.",
        ),
    ),
    attrs=(
        EPSILON,
        data_format_attr('The data format for y_backprop, x, x_backprop. Either "NHWC" (default) or "NCHW".'),
        IS_TRAINING,
    ),
    type_attrs={"T": T_TYPES, "U": ("float",)},
    kernel_type_attrs={"T": T_TYPES, "U": ("float",)},
    surfaces=Surfaces(
        java_class="FusedBatchNormGrad",
        java_endpoint="fusedBatchNormGrad",
        cc_class="FusedBatchNormGradV3",
        python="FusedBatchNormGradV3",
        directml=(
            ("is_training=True", "DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC"),
            ("is_training=False", "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC"),
        ),
        onednn=(
            ("is_training=True", "BatchNormTrainingBackward with diff_gamma and diff_beta (3 outputs)"),
            ("is_training=False", "no equivalent: the 1-output BatchNormTrainingBackward omits the scale factor"),
        ),
        java_package="nn",
    ),
    data=BATCH_NORM_DATA,
    gradient="FusedBatchNormGradGrad",
    gradient_doc=(
        "fbnops-internal, TensorFlow's `_FusedBatchNormGradGrad` semantics: the gradients with respect "
        "to `y_backprop`, `x` and `scale`."
    ),
    seeds=("000", "001", "002"),
)
