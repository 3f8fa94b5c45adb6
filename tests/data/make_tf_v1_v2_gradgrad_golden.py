"""Generate tests/data/tf_v1_v2_gradgrad.npz: TensorFlow's V1/V2 ops and second-order gradients.

Needs tensorflow-cpu (2.21.0 was used); run from the repository root:

    TF_ENABLE_ONEDNN_OPTS=0 python tests/data/make_tf_v1_v2_gradgrad_golden.py

Two kinds of case (``kind`` in the metadata):

* ``op``: one call of ``tf.raw_ops.<op>`` for ``FusedBatchNorm``, ``FusedBatchNormV2``,
  ``FusedBatchNormGrad``, ``FusedBatchNormGradV2``: the inputs and every output.
  Inference forward calls store no ``reserve_space_1/2`` (TensorFlow leaves them
  uninitialized).
* ``gradgrad``: the registered gradient of ``FusedBatchNormGrad{,V2,V3}``
  (``tensorflow/python/ops/nn_fused_batch_norm_grad.py``), taken with a
  ``GradientTape`` around the grad op: inputs ``y_backprop``, ``x``, ``scale``,
  ``reserve_space_1``, ``reserve_space_2``, upstream gradients ``grad_x_backprop``,
  ``grad_scale_backprop``, ``grad_offset_backprop``; outputs ``grad_y_backprop``,
  ``grad_x``, ``grad_scale``.  In training the reserve spaces are the forward's.

bfloat16 arrays are stored as uint16 bits with a ``<i>/<name>__bf16`` marker (as in
``tf_fused_batch_norm_v3.npz``).
"""

import json
import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "tf_v1_v2_gradgrad.npz")
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SHAPES = {"NHWC": (2, 3, 4, 5), "NCHW": (2, 5, 3, 4), "NDHWC": (2, 2, 3, 2, 3), "NCDHW": (2, 3, 2, 3, 2)}
EPSILON = 1e-3


def channels(shape, fmt):
    return shape[1] if fmt.startswith("NC") else shape[-1]


class Writer:
    def __init__(self):
        self.arrays, self.meta = {}, []

    def add(self, meta, arrays):
        i = len(self.meta)
        for k, a in arrays.items():
            a = np.asarray(a)
            if a.dtype == ml_dtypes.bfloat16:
                self.arrays[f"{i}/{k}__bf16"] = np.zeros(0, np.uint8)
                a = a.view(np.uint16)
            self.arrays[f"{i}/{k}"] = a
        self.meta.append(meta)

    def save(self):
        self.arrays["__meta__"] = np.frombuffer(json.dumps(self.meta).encode(), np.uint8)
        self.arrays["__tf_version__"] = np.frombuffer(tf.__version__.encode(), np.uint8)
        np.savez_compressed(OUT, **self.arrays)
        print(f"wrote {len(self.meta)} cases to {OUT}")


def forward_cases(w, rng):
    for op, dtypes in (("FusedBatchNorm", ["float32"]), ("FusedBatchNormV2", list(DTYPES))):
        for dtype in dtypes:
            for fmt in ("NHWC", "NCHW"):
                for training, factor in ((True, 1.0), (True, 0.5), (False, 1.0)):
                    shape = SHAPES[fmt]
                    c = channels(shape, fmt)
                    inputs = {
                        "x": (rng.standard_normal(shape) * 2 + 0.5).astype(DTYPES[dtype]),
                        "scale": (rng.random(c) + 0.5).astype(np.float32),
                        "offset": rng.standard_normal(c).astype(np.float32),
                        "mean": rng.standard_normal(c).astype(np.float32),
                        "variance": (rng.random(c) + 0.5).astype(np.float32),
                    }
                    attrs = dict(epsilon=EPSILON, exponential_avg_factor=factor, data_format=fmt, is_training=training)
                    out = getattr(tf.raw_ops, op)(**inputs, **attrs)
                    names = ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"]
                    outputs = {k: t.numpy() for k, t in zip(names, out, strict=True)}
                    if not training:  # uninitialized memory in TensorFlow
                        del outputs["reserve_space_1"], outputs["reserve_space_2"]
                    w.add({"kind": "op", "op": op, "dtype": dtype, "attrs": attrs}, {**inputs, **outputs})
    # V2 runs 5-D input under a 2-D format in eager mode (the kernel reshapes it)
    shape = SHAPES["NDHWC"]
    inputs = {
        "x": rng.standard_normal(shape).astype(np.float32),
        "scale": (rng.random(3) + 0.5).astype(np.float32),
        "offset": rng.standard_normal(3).astype(np.float32),
        "mean": np.zeros(0, np.float32),
        "variance": np.zeros(0, np.float32),
    }
    attrs = dict(epsilon=EPSILON, exponential_avg_factor=1.0, data_format="NHWC", is_training=True)
    out = tf.raw_ops.FusedBatchNormV2(**inputs, **attrs)
    names = ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"]
    w.add(
        {"kind": "op", "op": "FusedBatchNormV2", "dtype": "float32", "attrs": attrs},
        {**inputs, **{k: t.numpy() for k, t in zip(names, out, strict=True)}},
    )


def grad_inputs(rng, shape, fmt, dtype, training):
    c = channels(shape, fmt)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(DTYPES[dtype])
    scale = (rng.random(c) + 0.5).astype(np.float32)
    if training:  # the forward's reserve spaces, as in a real training step
        fwd = tf.raw_ops.FusedBatchNormV3(
            x=x,
            scale=scale,
            offset=np.zeros(c, np.float32),
            mean=np.zeros(0, np.float32),
            variance=np.zeros(0, np.float32),
            epsilon=EPSILON,
            data_format=fmt,
            is_training=True,
        )
        rs1, rs2 = fwd[3].numpy(), fwd[4].numpy()
    else:
        rs1, rs2 = rng.standard_normal(c).astype(np.float32), (rng.random(c) + 0.5).astype(np.float32)
    return {
        "y_backprop": rng.standard_normal(shape).astype(DTYPES[dtype]),
        "x": x,
        "scale": scale,
        "reserve_space_1": rs1,
        "reserve_space_2": rs2,
    }


def grad_cases(w, rng):
    for op, dtypes in (("FusedBatchNormGrad", ["float32"]), ("FusedBatchNormGradV2", list(DTYPES))):
        for dtype in dtypes:
            for fmt, training in (("NHWC", True), ("NCHW", True), ("NHWC", False)):
                inputs = grad_inputs(rng, SHAPES[fmt], fmt, dtype, training)
                attrs = dict(epsilon=EPSILON, data_format=fmt, is_training=training)
                out = getattr(tf.raw_ops, op)(**inputs, **attrs)
                names = ["x_backprop", "scale_backprop", "offset_backprop", "reserve_space_3", "reserve_space_4"]
                outputs = {k: t.numpy() for k, t in zip(names, out, strict=True)}
                w.add({"kind": "op", "op": op, "dtype": dtype, "attrs": attrs}, {**inputs, **outputs})


def gradgrad_cases(w, rng):
    plan = [("FusedBatchNormGradV3", dt, fmt) for dt in DTYPES for fmt in SHAPES]
    plan += [("FusedBatchNormGradV2", dt, fmt) for dt in DTYPES for fmt in ("NHWC", "NCHW")]
    plan += [("FusedBatchNormGrad", "float32", fmt) for fmt in ("NHWC", "NCHW")]
    for op, dtype, fmt in plan:
        # TF's CPU grad kernel refuses channels-first inference: training only there
        for training in (True, False) if not fmt.startswith("NC") else (True,):
            shape = SHAPES[fmt]
            c = channels(shape, fmt)
            inputs = grad_inputs(rng, shape, fmt, dtype, training)
            upstream = {
                "grad_x_backprop": rng.standard_normal(shape).astype(DTYPES[dtype]),
                "grad_scale_backprop": rng.standard_normal(c).astype(np.float32),
                "grad_offset_backprop": rng.standard_normal(c).astype(np.float32),
            }
            attrs = dict(epsilon=EPSILON, data_format=fmt, is_training=training)
            watched = [tf.constant(inputs[k]) for k in ("y_backprop", "x", "scale")]
            call = dict(inputs, y_backprop=watched[0], x=watched[1], scale=watched[2])
            if op == "FusedBatchNormGradV3":
                call["reserve_space_3"] = np.zeros((), np.float32)
            with tf.GradientTape() as tape:
                tape.watch(watched)
                out = getattr(tf.raw_ops, op)(**call, **attrs)
            grads = tape.gradient(list(out[:3]), watched, output_gradients=[tf.constant(u) for u in upstream.values()])
            outputs = {k: g.numpy() for k, g in zip(["grad_y_backprop", "grad_x", "grad_scale"], grads, strict=True)}
            w.add({"kind": "gradgrad", "op": op, "dtype": dtype, "attrs": attrs}, {**inputs, **upstream, **outputs})


def main():
    rng = np.random.default_rng(2121)
    w = Writer()
    forward_cases(w, rng)
    grad_cases(w, rng)
    gradgrad_cases(w, rng)
    w.save()


if __name__ == "__main__":
    main()
