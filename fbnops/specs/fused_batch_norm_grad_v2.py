"""FusedBatchNormGradV2: TensorFlow V2: T in {half, bfloat16, float}, U = float, NHWC or NCHW.

V3's spec without reserve_space_3 (see :mod:`._v1_v2`).
"""

from ._v1_v2 import legacy_spec
from .fused_batch_norm_grad_v3 import SPEC as _V3

SPEC = legacy_spec(_V3, "FusedBatchNormGradV2", single_type=False, gradient="FusedBatchNormGradGrad")
