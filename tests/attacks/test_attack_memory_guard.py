"""Class 3, memory guard: a call, a graph, a feed or a file that would allocate more than fits is
refused before anything is allocated (``ResourceExhaustedError`` and its run-file subclass)."""

from __future__ import annotations

import numpy as np

from fbnops.framework.graph import Graph
from fbnops.framework.session import Session

from .helpers import F, const_node, dml_grad, dnnl_grad, doc_with, pbtxt, raw_grad, run_doc, tmp
from .runner import DNNL_ERROR, HRESULT_ERROR, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, RUN_FILE_TOO_BIG, Variant, attack


@attack(
    3,
    "broadcast 2^40-row {label} x into the gradient",
    raises=RESOURCE_EXHAUSTED,
    variants=[Variant("F", (F,)), Variant("np.float16", (np.float16,)), Variant("'>f4'", (">f4",))],
)
def test_broadcast_huge_x_into_the_gradient(dtype):
    huge = np.broadcast_to(np.ones((1, 3, 2, 2), dtype), (1 << 40, 3, 2, 2))
    raw_grad(x=huge, y_backprop=huge)


class _Absurd:
    """An array interface whose shape has more elements than 64 bits count."""

    __array_interface__ = {
        "shape": (1 << 40, 1 << 40, 1 << 40, 3),
        "typestr": "<f4",
        "data": (np.zeros(3, F).ctypes.data, False),
        "strides": (0, 0, 0, 0),
        "version": 3,
    }


# a shape whose size does not fit in 64 bits is no shape at all
@attack(3, "broadcast x of a 64-bit-overflowing shape", raises=INVALID_ARGUMENT)
def test_broadcast_x_of_a_64_bit_overflowing_shape():
    raw_grad(x=_Absurd(), y_backprop=_Absurd(), data_format="NHWC")


@attack(3, "GraphDef Const with a huge shape and a short float_val", raises=RESOURCE_EXHAUSTED)
def test_graphdef_const_with_a_huge_shape():
    pbtxt(const_node("dtype: DT_FLOAT tensor_shape { dim { size: 1000000000 } dim { size: 1000000 } } float_val: 1"))


def _placeholder(g: Graph):
    return g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)


@attack(3, "Session feed: byte-swapped broadcast view", raises=RESOURCE_EXHAUSTED)
def test_session_feed_byte_swapped_broadcast_view():
    g = Graph()
    x = _placeholder(g)
    y = g.add_operation("y", "Identity", [x], {}).output(0)
    Session(g).run(y, {x: np.broadcast_to(np.array(1, ">f4"), (1 << 20, 1 << 20))})


@attack(3, "Session: AddN of a fed broadcast view", raises=RESOURCE_EXHAUSTED)
def test_session_add_n_of_a_fed_broadcast_view():
    g = Graph()
    x = _placeholder(g)
    y = g.add_operation("y", "AddN", [x, x], {}).output(0)
    Session(g).run(y, {x: np.broadcast_to(F(1), (1 << 20, 1 << 20))})


@attack(3, "run file: random literal of 2^62 elements", raises=RUN_FILE_TOO_BIG)
def test_run_file_random_literal_of_2_62_elements():
    run_doc(doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": [1 << 31, 1 << 31, 1, 3], "seed": 0}}))


@attack(3, "YAML alias bomb (billion laughs)", raises=RUN_FILE_TOO_BIG)
def test_yaml_alias_bomb():
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 12):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("ops: *a11")
    run_doc("\n".join(lines), ".yaml")


@attack(3, ".npy header claiming 40 GiB", raises=RUN_FILE_TOO_BIG)
def test_npy_header_claiming_40_gib():
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (10737418240,), }"
    header = header + " " * (118 - len(header)) + "\n"
    (tmp() / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    run_doc(doc_with(["ops", 0, "inputs", "x"], {"npy": "x.npy"}))


@attack(3, "DirectML tensor of 2^62 bytes", raises=HRESULT_ERROR)
def test_directml_tensor_of_2_62_bytes():
    dml_grad(sizes=[1 << 30, 3, 1 << 15, 1 << 15], total=2**63 - 1)


@attack(3, "oneDNN logical tensor of 2^62 elements", raises=DNNL_ERROR)
def test_onednn_logical_tensor_of_2_62_elements():
    dnnl_grad(dims=(1 << 31, 3, 1 << 15, 1 << 15))
