"""Class 1, memory safety of the mirrors: hostile strides, offsets and sizes handed to the DirectML
and oneDNN Graph mirrors are refused with the API's own error, never read or written out of bounds."""

from __future__ import annotations

from .helpers import dml_grad, dnnl_grad
from .runner import DNNL_ERROR, HRESULT_ERROR, attack


@attack(1, "DirectML dense control", expect="ok")
def test_directml_dense_control():
    dml_grad()
    return "ok"


@attack(1, "DirectML negative input strides", raises=HRESULT_ERROR)
def test_directml_negative_input_strides():
    dml_grad(in_strides=[-12, -4, -2, -1])


@attack(1, "DirectML oversized input strides", raises=HRESULT_ERROR)
def test_directml_oversized_input_strides():
    dml_grad(in_strides=[2**40, 4, 2, 1])


@attack(1, "DirectML strides past the buffer", raises=HRESULT_ERROR)
def test_directml_strides_past_the_buffer():
    dml_grad(in_strides=[24, 4, 2, 1])


@attack(1, "DirectML overlapping output strides", raises=HRESULT_ERROR)
def test_directml_overlapping_output_strides():
    dml_grad(out_strides=[0, 0, 0, 0])


@attack(1, "DirectML negative binding offset", raises=HRESULT_ERROR)
def test_directml_negative_binding_offset():
    dml_grad(offset=-16)


@attack(1, "DirectML oversized SizeInBytes", raises=HRESULT_ERROR)
def test_directml_oversized_size_in_bytes():
    dml_grad(size=2**40)


@attack(1, "DirectML offset past the resource", raises=HRESULT_ERROR)
def test_directml_offset_past_the_resource():
    dml_grad(offset=96, size=96, resource=128)


@attack(1, "DirectML TotalTensorSizeInBytes smaller than the strides", raises=HRESULT_ERROR)
def test_directml_total_size_smaller_than_the_strides():
    dml_grad(total=16)


@attack(1, "oneDNN dense control", expect="ok")
def test_onednn_dense_control():
    dnnl_grad()
    return "ok"


@attack(1, "oneDNN negative strides", raises=DNNL_ERROR)
def test_onednn_negative_strides():
    dnnl_grad(in_strides=[-12, -4, -2, -1])


@attack(1, "oneDNN oversized strides", raises=DNNL_ERROR)
def test_onednn_oversized_strides():
    dnnl_grad(in_strides=[2**62, 4, 2, 1])


@attack(1, "oneDNN handle too small for the strides", raises=DNNL_ERROR)
def test_onednn_handle_too_small_for_the_strides():
    dnnl_grad(in_strides=[12, 4, 2, 1], in_elems=23)


@attack(1, "oneDNN overlapping output strides", raises=DNNL_ERROR)
def test_onednn_overlapping_output_strides():
    dnnl_grad(out_strides=[0, 1, 0, 0])


@attack(1, "oneDNN output handle too small", raises=DNNL_ERROR)
def test_onednn_output_handle_too_small():
    dnnl_grad(out_elems=4)
