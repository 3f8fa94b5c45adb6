"""FusedBatchNormGrad: TensorFlow V1: every tensor is float (one type attr T), NHWC or NCHW.

V3's spec without reserve_space_3 (see :mod:`._v1_v2`).
"""

from ._v1_v2 import legacy_spec
from .fused_batch_norm_grad_v3 import SPEC as _V3

SPEC = legacy_spec(_V3, "FusedBatchNormGrad", single_type=True, gradient="FusedBatchNormGradGrad")
