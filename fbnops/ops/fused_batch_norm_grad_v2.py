"""FusedBatchNormGradV2 (TensorFlow's V2 op).

Its own spec, with V3's eager body, kernels, shape rule and second-order gradient..
"""

from ..specs import get_spec
from .fused_batch_norm_grad_v3 import register_backward

__all__ = ["SPEC", "OP_DEF"]

SPEC = get_spec("FusedBatchNormGradV2")
OP_DEF = register_backward(SPEC)
