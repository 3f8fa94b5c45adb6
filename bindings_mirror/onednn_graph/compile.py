"""What partition.compile checks and infers, as oneDNN 3.13 does (``invalid_arguments`` on a mismatch).

Where the real library crashes, aborts or touches memory outside a buffer, the input is refused here
with ``invalid_arguments`` instead (each such rule says so); the fidelity page lists them.
"""

from __future__ import annotations

from fbnops.framework import strided

from .enums import ITEMSIZE, attr, error, kind, layout_type
from .logical_tensor import logical_tensor
from .schema import OpSchema, channel_axis


def _invalid(message: str) -> error:
    return error("invalid_arguments", message)


def _check_layout(lt: logical_tensor, is_output: bool, where: str) -> None:
    """Strides that oneDNN can address: no negative stride; no 0 stride on an input (3.13 crashes in execute,
    a refusal); an output that never writes one element twice (the shared bounds proof)."""
    dims, strides = lt.get_dims(), lt.get_strides()
    if any(s < 0 for s in strides):
        raise _invalid(f"{where}: negative strides {strides}")
    if not is_output and any(s == 0 and d > 1 for d, s in zip(dims, strides, strict=True)):
        raise _invalid(f"{where}: zero strides {strides} (broadcast inputs crash the real library)")
    if is_output:
        strided.check_no_overlap(dims, strides, ITEMSIZE[lt._dtype], what=where, error=_invalid)
    lt.get_mem_size()  # its span, overflow-checked


def infer(schema: OpSchema, o, ins: list[logical_tensor], outs: list[logical_tensor]) -> list[logical_tensor]:
    """The compiled output logical tensors, after every compile-time check."""
    for i, lt in enumerate(ins):
        where = f"compile: input {i} ({schema.inputs[i]}, id {lt._id})"
        if not lt._known() or lt._ltype != layout_type.strided:
            raise _invalid(f"{where} needs known dims and a strided layout")
        _check_layout(lt, False, where)
    src = ins[0]
    nd, fmt = src.ndims(), schema.data_format(o)
    if not schema.min_rank <= nd <= schema.max_rank:
        raise _invalid(f"compile: src has {nd} dimensions; {schema.min_rank} to {schema.max_rank} are supported")
    c = src._dims[channel_axis(nd, fmt)]
    backward = schema.kind == kind.BatchNormTrainingBackward
    if backward and len(ins) == 4 and len(outs) == 3:  # 3.13 throws std::out_of_range from compile
        raise _invalid("compile: diff_gamma and diff_beta need gamma (5 inputs)")
    if backward and nd < 4 and (fmt != "NCX" or not all(lt._known() for lt in outs)):  # 3.13 aborts
        raise _invalid("compile: a rank-2/3 src needs data_format NCX and outputs with known dims")
    # With every output's dims given, 3.13's shape inference returns at once (infer_bn_bwd_output_shape):
    # a longer gamma is then read up to C, and a longer diff_gamma/diff_beta keeps its declared dims
    outputs_known = all(lt._known() and lt._ltype != layout_type.any for lt in outs)
    for i, lt in enumerate(ins[1:], 1):
        where = f"compile: input {i} ({schema.inputs[i]}, id {lt._id})"
        if i in schema.data_in and lt._dims != src._dims:
            raise _invalid(f"{where} has dims {lt._dims}; src has {src._dims}")
        gamma = schema.inputs[i] == "gamma"
        longer_gamma = backward and outputs_known and gamma and lt.ndims() == 1 and lt._dims[0] > c
        # every other [C] input exactly [C] (a shorter gamma would be read past its buffer: refused)
        if i not in schema.data_in and lt._dims != [c] and not longer_gamma:
            raise _invalid(f"{where} has dims {lt._dims}; [C] = [{c}] is expected")
    resolved = []
    for i, lt in enumerate(outs):
        where = f"compile: output {i} ({schema.outputs[i]}, id {lt._id})"
        data = i in schema.data_out
        want = list(src._dims) if data else [c]
        if lt._known() and lt._ltype != layout_type.any:
            if data and lt._dims != want:
                raise _invalid(f"{where} has dims {lt._dims}; {want} is expected")
            if not data and (len(lt._dims) != 1 or lt._dims[0] < c):
                raise _invalid(f"{where} has dims {lt._dims}; [C] = [{c}] is expected")
            if not data and lt._dims[0] != c and not outputs_known:  # declared longer beside an inferred output
                out = logical_tensor(lt._id, lt._dtype, [c], layout_type.strided)  # (resolved to [C]: not observed)
            elif lt._strides is not None:
                out = lt
            else:
                out = logical_tensor(lt._id, lt._dtype, lt._dims, layout_type.strided)
        else:  # 'any' or unknown dims: dense, in the inferred shape
            out = logical_tensor(lt._id, lt._dtype, want, layout_type.strided)
        _check_layout(out, True, where)
        resolved.append(out)
    if attr.epsilon not in o._attrs:  # checked at add_op; kept for single-op partitions made directly
        raise _invalid("compile: epsilon is not set")
    return resolved
