"""The stages' drivers (:mod:`fbnops.kernels.stages` on the Numba backend): each stage is one
compiled call, as the op is one (``_numba_loops.drive``).  From Python, every call into a
compiled function types its arguments, and a ``Plan`` NamedTuple is typed field by field
(~3 us a call, against ~1 us for a plain tuple); a stage used to make up to three such calls
(its region, the centre tile and the combine).  Here the plan comes as a tuple, once, and the
drivers call the same regions and combines as the op, so the bits are the op's.  Each driver
exists twice, over the serial and over the parallel regions (``_numba_loops._over``).
"""

from __future__ import annotations

from ._numba_channels import _combine, center_tile, partials
from ._numba_loops import _over, apply_region, apply_tiles, reduce_region, samples_region
from ._plan import Plan


def _reduce_totals(a, b, mode, plan_fields, nchunks, center, s):
    """One pass's totals into s[2][C]: the items' partials, then the fixed-order combine."""
    p = Plan(*plan_fields)
    part = partials(p)
    reduce_region(a, b, mode, p, nchunks, center_tile(p, center), center, part, False)
    _combine(p, mode, part, s)


def _reduce_samples(a, b, mode, plan_fields, nsamples, nchunks, center, out):
    """Each sample's totals into out[k] (the plan is one sample's: see samples_region)."""
    p = Plan(*plan_fields)
    samples_region(a, b, mode, p, nsamples, nchunks, center_tile(p, center), center, out)


def _apply(a, b, out, amode, plan_fields, nchunks, A, B, K, center, stream):
    """The apply pass with the given coefficients."""
    p = Plan(*plan_fields)
    tiles, pairs = apply_tiles(a, p, A, B, K, center)
    apply_region(a, b, out, amode, p, nchunks, tiles, pairs, A, B, K, center, stream, False)


reduce_totals = (_over(_reduce_totals, 0, "_serial"), _over(_reduce_totals, 1, "_parallel"))
reduce_samples = (_over(_reduce_samples, 0, "_serial"), _over(_reduce_samples, 1, "_parallel"))
apply = (_over(_apply, 0, "_serial"), _over(_apply, 1, "_parallel"))
