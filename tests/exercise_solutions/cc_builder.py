"""A solution of 'cc_builder' (kept out of the package)."""

import numpy as np

from bindings_mirror import cc

EXERCISE = "cc_builder"


def build(root):
    shape = cc.ops.Placeholder.Shape([8, 4, 4, 3])
    x = cc.ops.Placeholder(root.WithOpName("x"), cc.DT_FLOAT, shape)
    dy = cc.ops.Placeholder(root.WithOpName("dy"), cc.DT_FLOAT, shape)
    scale = cc.ops.Const(root.WithOpName("scale"), np.array([1.0, 0.5, 2.0], np.float32))
    offset = cc.ops.Const(root.WithOpName("offset"), np.array([0.0, 0.1, -0.2], np.float32))
    empty = cc.ops.Const(root.WithOpName("empty"), np.zeros(0, np.float32))
    bn = cc.ops.FusedBatchNormV3(
        root.WithOpName("bn"), x, scale, offset, empty, empty, cc.ops.FusedBatchNormV3.Epsilon(0.001)
    )
    cc.ops.FusedBatchNormGradV3(
        root.WithOpName("bn_grad"),
        dy,
        x,
        scale,
        bn.reserve_space_1,
        bn.reserve_space_2,
        bn.reserve_space_3,
        cc.ops.FusedBatchNormGradV3.Epsilon(0.001),
    )
