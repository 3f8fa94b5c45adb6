"""Helpers the attacks call in their own processes.

Each builds one call on one surface (raw_ops, GraphDef, run files, the DirectML and oneDNN
Graph mirrors) with the hostile part given as an argument.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from fbnops.framework.layouts import channel_axis

F = np.float32


@functools.cache
def tmp() -> Path:
    """A scratch directory of this process (made on first use: importing the attacks makes none)."""
    return Path(tempfile.mkdtemp())


def grad_inputs(shape=(2, 3, 2, 2), fmt="NCHW", dt=F):
    c = shape[channel_axis(fmt, len(shape))]
    rng = np.random.default_rng(0)
    return dict(
        y_backprop=rng.standard_normal(shape).astype(dt),
        x=rng.standard_normal(shape).astype(dt),
        scale=np.ones(c, F),
        reserve_space_1=np.zeros(c, F),
        reserve_space_2=np.ones(c, F),
        reserve_space_3=np.zeros(0, F),
        data_format=fmt,
    )


def raw_grad(**kw):
    from fbnops import raw_ops

    return raw_ops.FusedBatchNormGradV3(**{**grad_inputs(), **kw})


def bits(out):
    return b"".join(np.asarray(o).tobytes() for o in out)


GUARD = -7.0  # what every output buffer holds before a call: any byte that differs was written


def dml_grad(
    in_strides=None, out_strides=None, offset=0, size=96, resource=96, total=None, sizes=None, guard=0, bound=None
):
    """One DirectML BATCH_NORMALIZATION_GRAD with the given InputTensor strides, output strides and
    binding; returns the three output bindings (filled with :data:`GUARD` before the call).  ``guard`` > 0:
    OutputGradient's buffer has that many bytes beyond the tensor (its binding does not), so a
    write past the tensor can be seen.  ``bound``: a list that receives the output bindings before the
    dispatch runs, so a caller can read them after a refused one (:func:`unwritten`)."""
    from bindings_mirror import directml as dml

    f32, shape, stat = dml.DML_TENSOR_DATA_TYPE_FLOAT32, sizes or [2, 3, 2, 2], [1, 3, 1, 1]
    T = dml.make_tensor_desc
    x_desc = T(f32, shape, in_strides)
    if total is not None:
        x_desc.Desc.TotalTensorSizeInBytes = total
    dx_desc = T(f32, shape, out_strides)
    desc = dml.DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC(
        x_desc, T(f32, shape), T(f32, stat), T(f32, stat), T(f32, stat), dx_desc, T(f32, stat), T(f32, stat)
    )
    dev = dml.DMLCreateDevice()
    compiled = dev.CompileOperator(dev.CreateOperator(dml.DML_OPERATOR_DESC(146, desc)))
    compiled._initialized = True
    table = dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled))

    def buf(n, fill=1.0):
        res = dml.ID3D12Resource(n)
        res.Upload(np.full(n // 4, fill, np.float32))
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(res, 0, n))

    x_res = dml.ID3D12Resource(resource)
    table.BindInputs(
        [
            dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(x_res, offset, size)),
            buf(96),
            buf(12),
            buf(12),
            buf(12),
        ]
    )
    if guard:
        dx_bytes = dx_desc.Desc.TotalTensorSizeInBytes
        outs = [buf(max(dx_bytes, 16) + guard, GUARD), buf(16, GUARD), buf(16, GUARD)]
        outs[0].Desc.SizeInBytes = dx_bytes
    else:
        outs = [buf(96, GUARD), buf(12, GUARD), buf(12, GUARD)]
    table.BindOutputs(outs)
    if bound is not None:
        bound.extend(outs)
    cmd = dml.D3D12CreateDevice().CreateCommandList()
    dev.CreateCommandRecorder().RecordDispatch(cmd, compiled, table)
    cmd.Close()
    dml.ID3D12CommandQueue().ExecuteCommandLists([cmd])
    return outs


def unwritten(binding) -> bool:
    """True if every byte of a DirectML output binding's whole buffer still holds :data:`GUARD`."""
    res = binding.Desc.Buffer
    raw = res.Readback(np.uint8, (res.GetDesc()["Width"],)).tobytes()
    return raw == np.full(len(raw) // 4, GUARD, F).tobytes()


def dnnl_grad(
    in_strides=None,
    out_strides=None,
    in_elems=24,
    out_elems=24,
    dims=(2, 3, 2, 2),
    out_buf=None,
    src_buf=None,
    stats_out=None,
):
    from bindings_mirror import onednn_graph as dg

    LT, S = dg.logical_tensor, dg.logical_tensor.layout_type.strided
    f32, shape, c = LT.data_type.f32, list(dims), dims[1]
    src = LT(0, f32, shape, in_strides if in_strides is not None else S)
    ins = [src, LT(1, f32, shape, S), LT(2, f32, [c], S), LT(3, f32, [c], S), LT(4, f32, [c], S)]
    dst = LT(5, f32, shape, out_strides if out_strides is not None else S)
    outs = [dst, LT(6, f32, [c], S), LT(7, f32, [c], S)]
    bn = dg.op(0, dg.op.kind.BatchNormTrainingBackward, ins, outs, "bn")
    bn.set_attr(dg.op.attr.epsilon, 1e-3).set_attr(dg.op.attr.data_format, "NCX")
    g = dg.graph(dg.engine.kind.cpu)
    g.add_op(bn)
    g.finalize()
    eng = dg.engine(dg.engine.kind.cpu, 0)
    cp = g.get_partitions()[0].compile(ins, outs, eng)
    x = src_buf if src_buf is not None else np.ones(in_elems, F)
    n = min(math.prod(dims), 1 << 16)  # a hostile size must be refused by the mirror, not by NumPy here
    c = min(c, 1 << 16)
    arrays = [x, np.ones(n, F), np.ones(c, F), np.zeros(c, F), np.ones(c, F)]
    out = out_buf if out_buf is not None else np.full(out_elems, -7.0, F)
    stats = stats_out if stats_out is not None else (np.empty(c, F), np.empty(c, F))
    t_out = [dg.tensor(dst, eng, out), dg.tensor(outs[1], eng, stats[0]), dg.tensor(outs[2], eng, stats[1])]
    cp.execute(dg.stream(eng), [dg.tensor(lt, eng, a) for lt, a in zip(ins, arrays, strict=False)], t_out)
    return out


def pbtxt(text):
    from fbnops.framework.graph import Graph

    return Graph.from_pbtxt(text)


def const_node(tensor, dtype="DT_FLOAT"):
    return (
        f'node {{ name: "c" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }} '
        f'attr {{ key: "value" value {{ tensor {{ {tensor} }} }} }} }}'
    )


def run_doc(doc, suffix=".json"):
    from fbnops.tools import runfile

    path = tmp() / ("run" + suffix)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return runfile.run_file(path)


GOOD_DOC = {
    "ops": [
        {
            "name": "bn",
            "op": "FusedBatchNormV3",
            "inputs": {
                "x": {"random": {"shape": [2, 2, 2, 3], "seed": 0}},
                "scale": {"value": [1, 1, 1]},
                "offset": {"value": [0, 0, 0]},
                "mean": {"value": [0, 0, 0]},
                "variance": {"value": [1, 1, 1]},
            },
        }
    ],
    "fetch": ["bn.y"],
}


def edited(doc, path, value):
    """A deep copy of the JSON-like ``doc`` with the item at ``path`` (a sequence of keys and
    indices) set to ``value``, or deleted when ``value`` is ``KeyError``."""
    doc = copy.deepcopy(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def doc_with(path, value):
    """The good run file with one item replaced (or deleted: ``KeyError``)."""
    return edited(GOOD_DOC, path, value)


def fork_child_bits(backend, threads=2):
    """Run a parallel kernel, fork, run it again in the child: the child's bits must equal the parent's."""
    import fbnops

    fbnops.set_num_threads(threads)
    with fbnops.backend(backend):
        want = bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC")))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with fbnops.backend(backend):
                got = bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC")))
            os.write(w, b"same" if got == want else b"diff")
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    answer = os.read(r, 8)
    assert status == 0 and answer == b"same", (status, answer)
    return "same bits"
