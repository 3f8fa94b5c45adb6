"""Testing helpers for fbnops and for code built on it, in the spirit of ``numpy.testing``.

* Tolerances: :data:`TOLERANCES` (one per dtype, with the reason for its number),
  :func:`tolerance`, :func:`rel_err`, :func:`assert_close_to_oracle`, :func:`close_to_oracle`.
* float64 oracles and inputs: :func:`grad_f64`, :func:`forward_f64`, :func:`grad_inputs`,
  :class:`Golden` (TensorFlow's recorded cases), :data:`PUBLISHED_CRASH_INPUTS`.
* Crash-prone calls: :func:`run_isolated` runs one in a fresh process and reports ``ok``,
  a (typed) ``error``, a ``crash`` with its signal, or a ``hang``.
* A gradient check: :func:`gradient_error` (finite differences of the float64 forward).
* Submodules: :mod:`.extras` (one skip reason per optional extra), :mod:`.params` (pytest
  parameters over the backends), :mod:`.reliability` (threads, GIL, memory),
  :mod:`.strategies` (Hypothesis strategies for shapes, strides, offsets, GraphDef text and
  run files; needs ``hypothesis``).

The project's own hostile-input attacks and fuzzer are tests (``tests/attacks``,
``tests/fuzzing``), not part of this kit.  The kit imports no tool (``fbnops.tools`` may use
it: the layer test ranks ``testing`` below ``tools``).

Nothing here imports pytest or Hypothesis unless :mod:`.strategies` is imported.
"""

from __future__ import annotations

from ._tolerances import (
    STAT_TOL,
    TOLERANCES,
    X_TOL,
    Tolerance,
    assert_close_to_oracle,
    close_to_oracle,
    rel_err,
    tolerance,
)
from .crash_inputs import PUBLISHED_CRASH_INPUTS
from .gradcheck import gradient_error
from .isolated import Outcome, run_isolated
from .oracles import (
    DTYPES,
    FORMATS,
    Golden,
    canonical,
    channels_of,
    forward_f64,
    grad_f64,
    grad_inputs,
    run_grad,
)

__all__ = [
    "TOLERANCES",
    "Tolerance",
    "X_TOL",
    "STAT_TOL",
    "tolerance",
    "rel_err",
    "close_to_oracle",
    "assert_close_to_oracle",
    "DTYPES",
    "FORMATS",
    "channels_of",
    "canonical",
    "grad_inputs",
    "grad_f64",
    "forward_f64",
    "run_grad",
    "Golden",
    "PUBLISHED_CRASH_INPUTS",
    "gradient_error",
    "Outcome",
    "run_isolated",
]
