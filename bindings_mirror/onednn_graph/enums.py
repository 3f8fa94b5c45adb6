"""oneDNN Graph enumerations with their C values (``dnnl_graph_types.h``, ``dnnl_common_types.h``, 3.13)."""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

DNNL_GRAPH_UNKNOWN_NDIMS = -1
DNNL_GRAPH_UNKNOWN_DIM = -(2**63)


class status(enum.IntEnum):  # noqa: N801 - dnnl::graph::status
    success = 0
    out_of_memory = 1
    invalid_arguments = 2
    unimplemented = 3
    last_impl_reached = 4
    runtime_error = 5
    not_required = 6
    invalid_graph = 7
    invalid_graph_op = 8
    invalid_shape = 9
    invalid_data_type = 10


class error(RuntimeError):  # noqa: N801 - dnnl::error
    """dnnl::error: ``.status`` is the numeric dnnl_status_t (a :class:`status`), ``.message`` the text."""

    def __init__(self, st: status | str, message: str):
        st = status[st] if isinstance(st, str) else status(st)
        super().__init__(f"{message} (status: {st.name})")
        self.status = st
        self.message = message


class data_type(enum.Enum):  # noqa: N801 - logical_tensor::data_type
    undef = 0
    f16 = 1
    bf16 = 2
    f32 = 3
    s32 = 4
    s8 = 5
    u8 = 6
    boolean = 8
    f8_e5m2 = 9
    f8_e4m3 = 10
    s4 = 11
    u4 = 12
    s64 = 16


class layout_type(enum.Enum):  # noqa: N801 - logical_tensor::layout_type
    undef = 0
    any = 1
    strided = 2
    opaque = 3


class property_type(enum.Enum):  # noqa: N801 - logical_tensor::property_type
    undef = 0
    variable = 1
    constant = 2
    host_scalar = 3


class kind(enum.Enum):  # noqa: N801 - op::kind (the batch-normalization ops of dnnl_graph_op_kind_t)
    BatchNormTrainingBackward = 5
    BatchNormForwardTraining = 6
    BatchNormInference = 7


class attr(enum.Enum):  # noqa: N801 - op::attr (every dnnl_graph_op_attr_t)
    undef = 0x0
    alpha = 0x1
    beta = 0x2
    epsilon = 0x3
    max = 0x4
    min = 0x5
    momentum = 0x6
    scales = 0x20
    axis = 0x30
    begin_norm_axis = 0x31
    groups = 0x32
    axes = 0x40
    dilations = 0x41
    dst_shape = 0x42
    kernel = 0x43
    order = 0x44
    output_padding = 0x45
    pads_begin = 0x46
    pads_end = 0x47
    shape = 0x48
    sizes = 0x49
    src_shape = 0x4A
    strides = 0x4B
    weights_shape = 0x4C
    zps = 0x4D
    group_shape = 0x4E
    exclude_pad = 0x60
    keep_dims = 0x61
    keep_stats = 0x62
    per_channel_broadcast = 0x63
    special_zero = 0x64
    transpose_a = 0x65
    transpose_b = 0x66
    use_affine = 0x67
    use_dst = 0x68
    auto_broadcast = 0x80
    auto_pad = 0x81
    coordinate_transformation_mode = 0x82
    data_format = 0x83
    mode = 0x84
    qtype = 0x85
    rounding_type = 0x86
    weights_format = 0x87
    accumulation_mode = 0x88


class policy(enum.Enum):  # noqa: N801 - partition::policy
    fusion = 1
    debug = 2


class engine_kind(enum.Enum):  # noqa: N801 - dnnl::engine::kind
    any = 0
    cpu = 1
    gpu = 2


# The element types a buffer can be read as (the batch-norm ops compute in these).
NUMPY = {
    data_type.f32: np.dtype(np.float32),
    data_type.f16: np.dtype(np.float16),
    data_type.bf16: np.dtype(ml_dtypes.bfloat16),
}
ITEMSIZE = {
    data_type.f16: 2,
    data_type.bf16: 2,
    data_type.f32: 4,
    data_type.s32: 4,
    data_type.s8: 1,
    data_type.u8: 1,
    data_type.boolean: 1,
    data_type.f8_e5m2: 1,
    data_type.f8_e4m3: 1,
    data_type.s64: 8,
}
