"""Attr and type definitions shared by the batch-norm op specs (TF's nn_ops.cc helpers)."""

from .op_spec import AttrSpec, DataSpec

# GetConvnetDataFormat2D3DAttrString()
DATA_FORMATS = ("NHWC", "NCHW", "NDHWC", "NCDHW")

T_TYPES = ("half", "bfloat16", "float")

# x: 4-D or 5-D for any data_format in eager execution; graphs take the format's rank
BATCH_NORM_DATA = DataSpec("x", ranks=(4, 5), layout_attr="data_format")

EPSILON = AttrSpec(
    name="epsilon",
    type="float",
    default=0.0001,
    doc="A small float number added to the variance of x.",
)

IS_TRAINING = AttrSpec(
    name="is_training",
    type="bool",
    default=True,
    doc="A bool value to indicate the operation is for training (default) or inference.",
)


def data_format_attr(doc: str) -> AttrSpec:
    return AttrSpec(
        name="data_format",
        type="string",
        default="NHWC",
        allowed=DATA_FORMATS,
        doc=doc,
    )
