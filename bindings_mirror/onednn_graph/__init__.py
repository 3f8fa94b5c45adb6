"""oneDNN Graph mirror (seed 004): ``dnnl::graph`` for the batch-norm ops, following oneDNN 3.13.

    src = logical_tensor(0, logical_tensor.data_type.f32, [2, 3, 4, 5], logical_tensor.layout_type.strided)
    bn = op(0, op.kind.BatchNormTrainingBackward, "bn_bwd")
    bn.set_attr(op.attr.epsilon, 1e-5)
    bn.add_inputs([src, diff_dst, mean, variance, gamma])
    bn.add_outputs([diff_src, diff_gamma, diff_beta])
    g = graph(engine.kind.cpu); g.add_op(bn); g.finalize()
    cp = g.get_partitions()[0].compile(inputs, outputs, eng)
    cp.execute(strm, [tensor(src, eng, x), ...], [tensor(diff_src, eng, dx), ...]); strm.wait()

Modules: :mod:`.enums` (the enums with their C values, ``status``, ``error``), :mod:`.logical_tensor`
(the five constructor overloads), :mod:`.schema` (each op as data: ports, attributes, dtype rules,
execute), :mod:`.compile` (compile's shape rules and checks), :mod:`.graph` (op, graph, partition,
compiled partition, engine, stream, tensor).

Semantics (oneDNN 3.13, checked against the real library by ``tests/test_onednn_real.py``):
``data_format`` defaults to ``NXC`` (channel last); ``epsilon`` is required; ``add_op`` returns a
``status`` and refuses foreign attributes, wrong attribute types, other data formats and the T1/T2
dtype rules with ``invalid_graph_op``; compile refuses shape mismatches with ``invalid_arguments``.
``BatchNormTrainingBackward`` with **3 outputs** is the training gradient; with **one output** it is
what the dnnl backend really does, undocumented: ``diff_src = diff_dst / sqrt(variance + epsilon)``,
gamma ignored; with 2 outputs ``add_op`` succeeds and the partition is not supported.  Statistics are
biased; ``BatchNormForwardTraining`` blends ``running = momentum*old + (1-momentum)*batch`` with momentum
defaulting to 0.5.  Every strided buffer is proven in bounds before execute reads or writes it.
"""

from __future__ import annotations

from .enums import DNNL_GRAPH_UNKNOWN_DIM, DNNL_GRAPH_UNKNOWN_NDIMS, NUMPY, error, status
from .graph import compiled_partition, engine, graph, op, partition, stream, tensor
from .logical_tensor import logical_tensor
from .schema import SCHEMAS, OpSchema

_NUMPY = NUMPY  # logical_tensor.data_type -> numpy dtype (used by the fuzz harness)

__all__ = [
    "DNNL_GRAPH_UNKNOWN_DIM",
    "DNNL_GRAPH_UNKNOWN_NDIMS",
    "OpSchema",
    "SCHEMAS",
    "compiled_partition",
    "engine",
    "error",
    "graph",
    "logical_tensor",
    "op",
    "partition",
    "status",
    "stream",
    "tensor",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__  # the public objects report the package they are used from
