"""The canonical view ``(outer, C, inner)`` that every kernel takes, and N-D batch norm on it.

TensorFlow's layouts are :meth:`NdView.for_data_format`: channels-last
``(N*H*W, C, 1)``, channels-first ``(N, C, H*W)``, free reshapes of contiguous data.

DirectML reduces over every axis where the statistics tensors have size 1 (1 to 8
dimensions); oneDNN over all axes but the channel.  Both reach the same kernels as
TensorFlow's layouts through one view, ``(outer, C, inner)``:

* kept axes that are adjacent (``[N, C, H, W]`` with stats ``[1, C, 1, 1]``, or
  ``[N, H, W, C]`` with ``[1, 1, 1, C]``) are a free reshape;
* kept axes that are not (stats ``[1, C, 1, W]``) are gathered channels-last by one
  transpose copy, and the result is transposed back.

The kernels see float32 per-channel vectors; here the statistics are flattened to
``C = prod(kept sizes)`` (:func:`channel_vector`).  This module knows no op: each op module runs
its own kernel on a view (``fused_batch_norm_v3.forward_on_view``,
``fused_batch_norm_grad_v3.grad_on_view``), with its own rules around the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..framework.layouts import channel_axis

__all__ = ["NdView", "nd_view", "channel_vector"]


class NdView:
    """How an N-D tensor with ``kept`` statistic axes maps onto ``(outer, C, inner)``."""

    def __init__(self, shape: Sequence[int], kept: Sequence[int]):
        self.shape = tuple(int(d) for d in shape)
        # size-1 axes can be called reduced or kept: drop them so adjacency is easiest
        kept = sorted(a for a in kept if self.shape[a] != 1)
        self.channels = math.prod(self.shape[a] for a in kept)
        if not kept:
            self.perm = None
            self.view = (math.prod(self.shape), 1, 1)
        elif kept == list(range(kept[0], kept[-1] + 1)):
            self.perm = None
            self.view = (math.prod(self.shape[: kept[0]]), self.channels, math.prod(self.shape[kept[-1] + 1 :]))
        else:
            reduced = [a for a in range(len(self.shape)) if a not in kept]
            self.perm = tuple(reduced + kept)
            self.view = (math.prod(self.shape[a] for a in reduced), self.channels, 1)

    @classmethod
    def for_data_format(cls, shape: Sequence[int], data_format: str) -> NdView:
        """The view of a TensorFlow layout: the one channel axis kept, size 1 or not
        (remembered per shape and format: every call of the ops asks; treat it as read-only)."""
        return _format_view(tuple(shape), data_format)

    @classmethod
    def _make_for_data_format(cls, shape: tuple[int, ...], data_format: str) -> NdView:
        view = cls.__new__(cls)
        view.shape = shape
        axis = channel_axis(data_format, len(shape))
        view.channels = shape[axis]
        view.perm = None
        view.view = (math.prod(shape[:axis]), view.channels, math.prod(shape[axis + 1 :]))
        return view

    @property
    def outer(self) -> int:
        return self.view[0]

    @property
    def inner(self) -> int:
        return self.view[2]

    @property
    def count(self) -> int:
        """Elements per channel: the ``n`` of the batch statistics."""
        return self.view[0] * self.view[2]

    def to_view(self, a: np.ndarray) -> np.ndarray:
        if self.perm is not None:
            a = np.transpose(a, self.perm)
        return np.ascontiguousarray(a).reshape(self.view)

    def from_view(self, a: np.ndarray) -> np.ndarray:
        if self.perm is None:
            return a.reshape(self.shape)
        permuted = tuple(self.shape[p] for p in self.perm)
        return np.ascontiguousarray(np.transpose(a.reshape(permuted), np.argsort(self.perm)))


@lru_cache(maxsize=1024)
def _format_view(shape: tuple[int, ...], data_format: str) -> NdView:
    return NdView._make_for_data_format(shape, data_format)


def nd_view(shape: Sequence[int], kept: Sequence[int]) -> NdView:
    return NdView(shape, kept)


def channel_vector(v) -> np.ndarray:
    """A per-channel argument as the kernels take it: contiguous float32, flattened to ``C`` values."""
    return np.ascontiguousarray(np.asarray(v, dtype=np.float32).reshape(-1))
