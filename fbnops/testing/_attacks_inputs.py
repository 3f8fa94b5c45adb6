"""The attacks of classes 1-4 of issue 15: the mirrors' memory, fork, the memory guard, thread counts."""

# ruff: noqa: E501  (a table of attack source code)
from __future__ import annotations

from ._attack_base import DNNL_ERROR as DNNL
from ._attack_base import HRESULT_ERROR as HRESULT
from ._attack_base import INVALID_ARGUMENT as INVALID
from ._attack_base import RESOURCE_EXHAUSTED as EXHAUSTED
from ._attack_base import RUN_FILE_TOO_BIG as RUN_FILE_TOO_BIG
from ._attack_base import Attack
from ._attack_base import attack as _a

_HUGE_BCAST = "np.broadcast_to(np.ones((1, 3, 2, 2), {dt}), (1 << 40, 3, 2, 2))"

INPUT_ATTACKS: list[Attack] = [
    # 1 -------------------------------------------------------------- memory safety of the mirrors
    _a(1, "DirectML dense control", "dml_grad(); result = 'ok'", "ok"),
    _a(1, "DirectML negative input strides", "dml_grad(in_strides=[-12, -4, -2, -1])", raises=HRESULT),
    _a(1, "DirectML oversized input strides", "dml_grad(in_strides=[2**40, 4, 2, 1])", raises=HRESULT),
    _a(1, "DirectML strides past the buffer", "dml_grad(in_strides=[24, 4, 2, 1])", raises=HRESULT),
    _a(1, "DirectML overlapping output strides", "dml_grad(out_strides=[0, 0, 0, 0])", raises=HRESULT),
    _a(1, "DirectML negative binding offset", "dml_grad(offset=-16)", raises=HRESULT),
    _a(1, "DirectML oversized SizeInBytes", "dml_grad(size=2**40)", raises=HRESULT),
    _a(1, "DirectML offset past the resource", "dml_grad(offset=96, size=96, resource=128)", raises=HRESULT),
    _a(1, "DirectML TotalTensorSizeInBytes smaller than the strides", "dml_grad(total=16)", raises=HRESULT),
    _a(1, "oneDNN dense control", "dnnl_grad(); result = 'ok'", "ok"),
    _a(1, "oneDNN negative strides", "dnnl_grad(in_strides=[-12, -4, -2, -1])", raises=DNNL),
    _a(1, "oneDNN oversized strides", "dnnl_grad(in_strides=[2**62, 4, 2, 1])", raises=DNNL),
    _a(1, "oneDNN handle too small for the strides", "dnnl_grad(in_strides=[12, 4, 2, 1], in_elems=23)", raises=DNNL),
    _a(1, "oneDNN overlapping output strides", "dnnl_grad(out_strides=[0, 1, 0, 0])", raises=DNNL),
    _a(1, "oneDNN output handle too small", "dnnl_grad(out_elems=4)", raises=DNNL),
    # 2 -------------------------------------------------------------- fork
    *[
        _a(2, f"kernel in a forked child after a parallel {b} kernel", f"result = fork_child_bits({b!r})", "ok", 60)
        for b in ("cython", "numba", "reference")
    ],
    _a(
        2,
        "multiprocessing fork workers after a parallel kernel",
        """
import multiprocessing as mp, fbnops
fbnops.set_num_threads(2)
want = bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC")))
ctx = mp.get_context("fork")
q = ctx.Queue()
procs = [ctx.Process(target=lambda: q.put(bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC"))) == want))
         for _ in range(3)]
for p in procs: p.start()
got = [q.get(timeout=60) for _ in procs]
for p in procs: p.join(60)
assert all(got) and all(p.exitcode == 0 for p in procs), (got, [p.exitcode for p in procs])
result = "same bits"
""",
        "ok",
        90,
    ),
    # 3 -------------------------------------------------------------- memory guard
    *[
        _a(
            3,
            f"broadcast 2^40-row {dt} x into the gradient",
            f"raw_grad(x={_HUGE_BCAST.format(dt=dt)}, y_backprop={_HUGE_BCAST.format(dt=dt)})",
            raises=EXHAUSTED,
        )
        for dt in ("F", "np.float16", "'>f4'")
    ],
    _a(
        3,
        "broadcast x of a 64-bit-overflowing shape",
        """
class Absurd:
    __array_interface__ = {"shape": (1 << 40, 1 << 40, 1 << 40, 3), "typestr": "<f4",
                           "data": (np.zeros(3, F).ctypes.data, False), "strides": (0, 0, 0, 0), "version": 3}
raw_grad(x=Absurd(), y_backprop=Absurd(), data_format="NHWC")
""",
        raises=INVALID,  # a shape whose size does not fit in 64 bits is no shape at all
    ),
    _a(
        3,
        "GraphDef Const with a huge shape and a short float_val",
        "pbtxt(const_node('dtype: DT_FLOAT tensor_shape { dim { size: 1000000000 } dim { size: 1000000 } } float_val: 1'))",
        raises=EXHAUSTED,
    ),
    _a(
        3,
        "Session feed: byte-swapped broadcast view",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
y = g.add_operation("y", "Identity", [x], {}).output(0)
Session(g).run(y, {x: np.broadcast_to(np.array(1, ">f4"), (1 << 20, 1 << 20))})
""",
        raises=EXHAUSTED,
    ),
    _a(
        3,
        "Session: AddN of a fed broadcast view",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
y = g.add_operation("y", "AddN", [x, x], {}).output(0)
Session(g).run(y, {x: np.broadcast_to(F(1), (1 << 20, 1 << 20))})
""",
        raises=EXHAUSTED,
    ),
    _a(
        3,
        "run file: random literal of 2^62 elements",
        "run_doc(doc_with(['ops', 0, 'inputs', 'x'], {'random': {'shape': [1 << 31, 1 << 31, 1, 3], 'seed': 0}}))",
        raises=RUN_FILE_TOO_BIG,
    ),
    _a(
        3,
        "YAML alias bomb (billion laughs)",
        """
lines = ['a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]']
for i in range(1, 12):
    lines.append(f'a{i}: &a{i} [' + ', '.join([f'*a{i-1}'] * 10) + ']')
lines.append('ops: *a11')
run_doc(chr(10).join(lines), '.yaml')
""",
        raises=RUN_FILE_TOO_BIG,
    ),
    _a(
        3,
        ".npy header claiming 40 GiB",
        """
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (10737418240,), }"
header = header + ' ' * (118 - len(header)) + chr(10)
(TMP / 'x.npy').write_bytes(b'\\x93NUMPY\\x01\\x00' + len(header).to_bytes(2, 'little') + header.encode())
run_doc(doc_with(['ops', 0, 'inputs', 'x'], {'npy': 'x.npy'}))
""",
        raises=RUN_FILE_TOO_BIG,
    ),
    _a(3, "DirectML tensor of 2^62 bytes", "dml_grad(sizes=[1 << 30, 3, 1 << 15, 1 << 15], total=2**63 - 1)", raises=HRESULT),
    _a(3, "oneDNN logical tensor of 2^62 elements", "dnnl_grad(dims=(1 << 31, 3, 1 << 15, 1 << 15))", raises=DNNL),
    # 4 -------------------------------------------------------------- thread counts
    *[
        _a(
            4,
            f"set_num_threads({v})",
            f"""
import fbnops, threading
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fbnops.set_num_threads({v})
n = fbnops.get_num_threads()
assert isinstance(n, int) and 1 <= n <= 1024 and caught, (n, caught)
raw_grad(); assert threading.active_count() < 64
result = n
""",
            "either",
            raises=INVALID,
        )
        for v in ("0", "-1", "10**4", "2**31", "2**64", "1.5", "'2'", "True", "None", "float('nan')")
    ],
    *[
        _a(
            4,
            f"{var}={v!r}",
            f"""
import fbnops, threading
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    raw_grad()
    n = fbnops.get_num_threads()
assert isinstance(n, int) and 1 <= n <= 1024 and (caught or {v!r} == ""), (n, caught)
assert threading.active_count() < 64
result = n
""",
            "either",
            raises=INVALID,
            env=((var, v), ("OMP_NUM_THREADS" if var != "OMP_NUM_THREADS" else "FBNOPS_NUM_THREADS", None)),
        )
        for var in ("FBNOPS_NUM_THREADS", "OMP_NUM_THREADS")
        for v in ("0", "-3", "10000", "2147483648", "two", "1.5", "")
    ],
]
