"""A solution of 'java_builder' (kept out of the package)."""

import numpy as np

from bindings_mirror import java

EXERCISE = "java_builder"


def build(tf):
    shape = java.Placeholder.shape(java.Shape.of(8, 4, 4, 3))
    x = tf.withName("x").placeholder(java.TFloat32, shape)
    dy = tf.withName("dy").placeholder(java.TFloat32, shape)
    scale = tf.withName("scale").constant(np.array([1.0, 0.5, 2.0], np.float32))
    offset = tf.withName("offset").constant(np.array([0.0, 0.1, -0.2], np.float32))
    empty = tf.withName("empty").constant(np.zeros(0, np.float32))
    bn = tf.withName("bn").nn.fusedBatchNorm(x, scale, offset, empty, empty, java.FusedBatchNorm.epsilon(0.001))
    tf.withName("bn_grad").nn.fusedBatchNormGrad(
        dy, x, scale, bn.reserveSpace1(), bn.reserveSpace2(), bn.reserveSpace3(), java.FusedBatchNormGrad.epsilon(0.001)
    )
