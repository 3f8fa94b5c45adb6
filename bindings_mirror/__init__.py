"""Mirrors of the real APIs, all running on the fbnops specs and kernels.

* :mod:`bindings_mirror.java` - TensorFlow Java (seed 000): ``FusedBatchNormGradV3.create(scope, ...)``
* :mod:`bindings_mirror.cc` - TensorFlow C++ (seed 001): ``ops.FusedBatchNormGradV3(scope, ...)``
* :mod:`bindings_mirror.directml` - DirectML (seed 003): ``DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC``
* :mod:`bindings_mirror.onednn_graph` - oneDNN Graph (seed 004): ``op.kind.BatchNormTrainingBackward``

The op classes of both are generated from the op specs by ``python -m bindings_mirror.generate``
(the output is checked in; a test regenerates it and fails if it is stale).
"""
