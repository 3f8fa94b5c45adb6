"""FusedBatchNorm (TensorFlow's V1 op).

Its own spec, with V3's eager body (first five outputs), kernels, shape rule and gradient..
"""

from ..specs import get_spec
from .fused_batch_norm_v3 import register_forward

__all__ = ["SPEC", "OP_DEF"]

SPEC = get_spec("FusedBatchNorm")
OP_DEF = register_forward(SPEC)
