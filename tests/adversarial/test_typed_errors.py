"""Class 7 of issue 15 on the graph/session paths: a bad fetch is TensorFlow's typed error; helpers
given zero sizes do not die of SIGFPE (run in a subprocess, so a signal fails the test)."""

from __future__ import annotations

import numpy as np
import pytest

from fbnops.errors import InvalidArgumentError, NotFoundError, OpError
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
from fbnops.testing import run_isolated


def _bn_graph():
    g = Graph()
    x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(np.float32), "shape": (2,)})
    g.add_operation("bn", "Identity", [x.output(0)], {})
    return g


def test_bad_output_index_in_session_run_is_tensorflows_error():
    g = _bn_graph()
    with pytest.raises(InvalidArgumentError) as info:
        Session(g).run("bn:9", {"x:0": np.ones(2, np.float32)})
    assert str(info.value) == (
        "Argument `fetch` = bn:9 cannot be interpreted as a Tensor. (\"The name 'bn:9' refers to a Tensor "
        "which does not exist. The operation, 'bn', exists but only has 1 outputs.\")"
    )


@pytest.mark.parametrize("fetch", ["bn:x", "bn:-1", "^bn", "", ":0", "bn:1:2"])
def test_malformed_fetch_names_are_typed_errors(fetch):
    with pytest.raises(InvalidArgumentError):
        Session(_bn_graph()).run(fetch, {"x:0": np.ones(2, np.float32)})


@pytest.mark.parametrize("fetch", ["nope", "nope:0"])
def test_unknown_fetch_is_not_found(fetch):
    with pytest.raises(NotFoundError):
        Session(_bn_graph()).run(fetch)


@pytest.mark.parametrize("fetch", [3, None, 1.5, object(), b"bn:0"])
def test_fetch_of_a_wrong_type_is_typed(fetch):
    with pytest.raises(OpError):
        Session(_bn_graph()).run(fetch)


def test_feed_errors_are_typed():
    g = _bn_graph()
    for feed in ({"x:0": np.ones(3, np.float32)}, {"x:0": np.ones(2, np.int32)}, {"x:0": [1.0, 2.0]}, {"x:5": 1}):
        with pytest.raises(OpError):
            Session(g).run("bn:0", feed)


ZERO_SIZE_CALLS = """
import numpy as np
import fbnops
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
from fbnops.testing import canonical

g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(np.float32), "shape": None}).output(0)
s = g.add_operation("s", "AddN", [x, x], {}).output(0)
o = g.add_operation("o", "OnesLike", [x], {}).output(0)
for shape in [(0,), (0, 0), (3, 0, 2), (0, 4, 4, 0)]:
    got = Session(g).run([s, o], {x: np.zeros(shape, np.float32)})
    assert got[0].shape == shape and got[1].shape == shape
for shape, fmt in [((0, 2, 2, 3), "NHWC"), ((2, 0, 2, 2), "NCHW"), ((0, 0, 0, 0), "NHWC"), ((1, 3, 0, 0, 0), "NCDHW")]:
    canonical(shape, fmt)
    c = shape[1] if fmt.startswith("NC") else shape[-1]
    z = np.zeros(shape, np.float32)
    for backend in fbnops.available_backends():
        with fbnops.backend(backend):
            fbnops.raw_ops.FusedBatchNormGradV3(y_backprop=z, x=z, scale=np.ones(c, np.float32),
                reserve_space_1=np.ones(c, np.float32), reserve_space_2=np.ones(c, np.float32),
                reserve_space_3=np.zeros(0, np.float32), data_format=fmt)
            fbnops.raw_ops.FusedBatchNormV3(x=z, scale=np.ones(c, np.float32), offset=np.ones(c, np.float32),
                mean=np.ones(c, np.float32), variance=np.ones(c, np.float32), data_format=fmt, is_training=False)
result = "survived"
"""


def test_zero_sizes_never_die_of_sigfpe():
    outcome = run_isolated(ZERO_SIZE_CALLS, timeout=300)
    assert outcome.kind == "ok" and outcome.value == "survived", str(outcome)
