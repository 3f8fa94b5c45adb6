"""The benchmark's peers: each makes a zero-argument callable for a case (None: unsupported).

torch    PyTorch CPU: ``aten.native_batch_norm_backward`` / ``native_batch_norm``
         (channels_last memory format for NHWC)
tf       TensorFlow CPU: ``tf.raw_ops.FusedBatchNormGradV3`` / ``FusedBatchNormV3`` (eager)
onednn   real oneDNN primitives through a small C++ harness (``benchmarks/onednn_peer``),
         the case's own layout; ``onednn_b8`` the same in oneDNN's blocked nChw8c
ref      the fbnops NumPy reference kernel
numba    the fbnops Numba backend (timed against the Cython one in rounds of its own)
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fbnops import raw_ops
from fbnops.framework import registry

from .cases import EPS, Case


def has_module(name: str) -> bool:
    """Is ``name`` importable (without importing it)?  A module blocked in ``sys.modules`` is not."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def fbnops_call(case: Case, backend: str = "cython", *, block: bool = False) -> Callable:
    """A raw_ops call of ``case`` on ``backend``.  When ``backend`` is already the current one and
    ``block`` is not asked for, the call is the user's plain raw_ops call, as the frameworks' calls
    are timed; otherwise it runs in a ``with backend(...)`` block (about 5 us with cold caches,
    which the timings of two backends against each other both pay)."""
    d = case.data
    empty = np.zeros(0, np.float32)
    if case.op == "grad":

        def call():
            return raw_ops.FusedBatchNormGradV3(
                y_backprop=d["dy"],
                x=d["x"],
                scale=d["scale"],
                reserve_space_1=d["mean"],
                reserve_space_2=d["var"],
                reserve_space_3=empty,
                epsilon=EPS,
                data_format=case.layout,
            )
    else:

        def call():
            return raw_ops.FusedBatchNormV3(
                x=d["x"], scale=d["scale"], offset=d["offset"], mean=empty, variance=empty, epsilon=EPS,
                data_format=case.layout,
            )  # fmt: skip

    if not block and registry.get_backend() == backend:
        return call

    def run():
        with registry.backend(backend):
            return call()

    return run


def torch_call(case: Case):
    import torch

    d = case.data
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[case.dtype]

    def tensor(a):
        t = torch.from_numpy(np.asarray(a, np.float32)).to(tdt)
        if case.channels_last:  # channels-last memory (channels_last / channels_last_3d), N C ... logically
            return t.permute(0, t.dim() - 1, *range(1, t.dim() - 1))
        return t

    x, dy = tensor(d["x"]), tensor(d["dy"])
    w, b = torch.from_numpy(d["scale"]), torch.from_numpy(d["offset"])
    mean = torch.from_numpy(d["mean"])
    invstd = torch.from_numpy((1 / np.sqrt(d["var"] + EPS)).astype(np.float32))
    if case.op == "grad":
        return lambda: torch.ops.aten.native_batch_norm_backward(
            dy, x, w, None, None, mean, invstd, True, EPS, [True, True, True]
        )
    return lambda: torch.ops.aten.native_batch_norm(x, w, b, None, None, True, 0.1, EPS)


def tf_grad(tf, dy, x, scale, mean, var, data_format: str):
    """TensorFlow's training gradient, as every TF measurement here calls it."""
    return tf.raw_ops.FusedBatchNormGradV3(
        y_backprop=dy, x=x, scale=scale, reserve_space_1=mean, reserve_space_2=var,
        reserve_space_3=tf.constant(0.0), epsilon=EPS, data_format=data_format, is_training=True,
    )  # fmt: skip


def tf_call(case: Case):
    import tensorflow as tf

    d = case.data
    tdt = {"float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16}[case.dtype]
    x = tf.cast(tf.constant(np.asarray(d["x"], np.float32)), tdt)
    dy = tf.cast(tf.constant(np.asarray(d["dy"], np.float32)), tdt)
    scale, offset = tf.constant(d["scale"]), tf.constant(d["offset"])
    mean, var, empty = tf.constant(d["mean"]), tf.constant(d["var"]), tf.constant(np.zeros(0, np.float32))
    if case.op == "grad":
        return lambda: tf_grad(tf, dy, x, scale, mean, var, case.layout)[0].numpy()  # host memory, like fbnops

    def run():
        out = tf.raw_ops.FusedBatchNormV3(
            x=x, scale=scale, offset=offset, mean=empty, variance=empty, epsilon=EPS,
            data_format=case.layout, is_training=True,
        )  # fmt: skip
        return out[0].numpy()

    return run


def _torch_setup(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _tf_setup(threads: int) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def _onednn_factory(blocked: bool):
    def make(case: Case):
        from .onednn import onednn_call

        return onednn_call(case, blocked)

    return make


def _onednn_missing() -> str | None:
    from .onednn import missing

    return missing()


_EXTRA_OF = {"torch": "oracle", "tensorflow": "oracle", "numba": "numba"}  # the extra that installs a peer


@dataclass(frozen=True)
class Peer:
    name: str
    factory: Callable[[Case], Callable | None]
    module: str | None = None  # the import that must exist
    setup: Callable[[int], None] | None = None
    backend: bool = False  # an fbnops backend: timed against the Cython one in rounds of its own
    missing_reason: Callable[[], str | None] | None = None

    def missing(self) -> str | None:
        """Why this peer cannot run here (None: it can); does not import anything heavy."""
        if self.module and not has_module(self.module):
            return f"{self.module} is not installed (pip install 'fbnops[{_EXTRA_OF.get(self.module, 'oracle')}]')"
        if self.backend and self.name not in registry.available_backends():
            return f"the fbnops {self.name} backend is not available (pip install 'fbnops[{self.name}]')"
        return self.missing_reason() if self.missing_reason else None


PEERS = {
    p.name: p
    for p in (
        Peer("torch", torch_call, "torch", _torch_setup),
        Peer("tf", tf_call, "tensorflow", _tf_setup),
        Peer("onednn", _onednn_factory(False), missing_reason=_onednn_missing),
        Peer("onednn_b8", _onednn_factory(True), missing_reason=_onednn_missing),
        Peer("ref", lambda case: fbnops_call(case, "reference")),
        Peer("numba", lambda case: fbnops_call(case, "numba", block=True), backend=True),
    )
}
