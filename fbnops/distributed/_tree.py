"""Reproducible sums: a fixed binary tree over the global sample index.

Leaf ``i`` is sample ``i``'s float64 partial (its sums over its rows).  Node ``(l, i)``
covers samples ``[i * 2**l, (i + 1) * 2**l)`` clipped to ``[0, N)``: it is the sum of its
two children, or just its left child when the right one would start at or past ``N``.
The root is therefore a function of the data alone, not of how the batch was split.

A rank holding samples ``[start, stop)`` adds up the largest aligned blocks that fit
in its range (at most about ``2 * log2(N)`` of them) and sends those node values;
every rank then finishes the same tree from the same nodes, in the same order.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .comm import Communicator

__all__ = ["blocks", "spans", "subtree", "local_nodes", "plan", "tree_total"]


def _levels(total: int) -> int:
    return max(total - 1, 0).bit_length()  # smallest L with 2**L >= total


def blocks(start: int, stop: int, total: int) -> list[tuple[int, int]]:
    """The aligned nodes ``(level, index)`` that tile ``[start, stop)``; the last rank may run past ``total``."""
    top = _levels(total)
    end = (1 << top) if stop >= total else stop  # padding past N belongs to the last range
    out, pos = [], start
    while pos < min(stop, total):
        level = top
        while level > 0 and (pos % (1 << level) or pos + (1 << level) > end):
            level -= 1
        out.append((level, pos >> level))
        pos += 1 << level
    return out


def subtree(leaves: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """Sum aligned leaves ``(k, K)`` up the canonical tree (an odd last node moves up as is).

    In place, by doubling strides: after the pass of stride ``s``, row ``i * 2s`` holds node
    ``(level, i)``, the sum of rows ``i * 2s`` and ``i * 2s + s`` (left + right, as the tree
    says).  ``overwrite=True`` lets it use ``leaves`` as the workspace (no copy).
    """
    a = leaves if overwrite else np.array(leaves, dtype=np.float64, copy=True)
    n, s = a.shape[0], 1
    while s < n:
        left = a[0 : n - s : 2 * s]
        np.add(left, a[s : n : 2 * s], out=left)
        s *= 2
    return np.array(a[0], copy=True)


def spans(start: int, count: int, total: int) -> list[tuple[int, int]]:
    """This rank's blocks as local rows ``(first, rows)`` of its ``count`` samples (clipped at ``total``)."""
    out = []
    for level, index in blocks(start, start + count, total):
        lo = (index << level) - start
        out.append((lo, min(1 << level, count - lo)))
    return out


def local_nodes(
    leaves: np.ndarray, start: int, total: int, *, overwrite: bool = False, out: np.ndarray | None = None
) -> np.ndarray:
    """This rank's block values ``(nblocks, K)`` (into ``out`` if given) from its leaves ``(samples, K)``
    (the rank's first sample is ``start``)."""
    rows = spans(start, leaves.shape[0], total)
    values = np.empty((len(rows), leaves.shape[1]), np.float64) if out is None else out
    for j, (lo, n) in enumerate(rows):
        values[j] = subtree(leaves[lo : lo + n], overwrite=overwrite)
    return values


class Plan(NamedTuple):
    """How the ranks' blocks assemble into the root, for one split of the batch (cached: the split
    is usually the same every step).  ``rows[r]``: rank ``r``'s payload rows (its head row + its
    blocks); ``root``: the root as an expression over ``(rank, row)`` leaves (see :func:`_evaluate`)."""

    total: int
    rows: tuple[int, ...]
    root: tuple | None


@functools.lru_cache(maxsize=64)
def plan(samples: tuple[int, ...]) -> Plan:
    """The :class:`Plan` of a batch split as ``samples[r]`` samples on rank ``r`` (in rank order)."""
    total = sum(samples)
    starts = list(itertools.accumulate(samples, initial=0))[:-1]
    nodes = [blocks(s, s + n, total) for s, n in zip(starts, samples, strict=True)]
    known = {node: (rank, 1 + j) for rank, rank_nodes in enumerate(nodes) for j, node in enumerate(rank_nodes)}

    def node(level: int, index: int) -> tuple:
        if (level, index) in known:
            return known[(level, index)]  # a leaf: (rank, row)
        left = node(level - 1, 2 * index)
        if (2 * index + 1) << (level - 1) < total:
            return (left, node(level - 1, 2 * index + 1))  # left + right, in that order
        return (left,)  # an odd last node moves up as is

    return Plan(total, tuple(1 + len(b) for b in nodes), node(_levels(total), 0) if total else None)


def _evaluate(expr: tuple, gathered: Sequence[np.ndarray]) -> np.ndarray:
    """A plan's node value: ``(rank, row)`` is a gathered block, ``(left, right)`` their sum, ``(left,)`` left."""
    if isinstance(expr[0], int):
        return gathered[expr[0]][expr[1]]
    left = _evaluate(expr[0], gathered)
    return left + _evaluate(expr[1], gathered) if len(expr) == 2 else left


def tree_total(comm: Communicator, payload: np.ndarray, samples: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's head word ``(size, 1)`` and the canonical-tree total, on every rank, in one ``allgatherv``.

    ``payload`` ``(1 + nblocks, K)``: this rank's head row (its first element is the word that
    travels: the rank's status), then its block values (the nodes of :func:`blocks`, from
    :func:`spans`' rows).
    """
    split = plan(tuple(int(s) for s in samples))
    gathered = comm.allgatherv(payload, split.rows)
    heads = np.array([g[0, :1] for g in gathered])  # the status words (the rest of the row is padding)
    if split.root is None:
        return heads, np.zeros(payload.shape[1])
    return heads, np.array(_evaluate(split.root, gathered), np.float64)  # a copy: never a view of `gathered`
