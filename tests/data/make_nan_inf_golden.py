"""Generate tests/data/tf_nan_inf.npz: how TensorFlow's CPU kernels propagate NaN and Inf.

Needs tensorflow-cpu (2.21 was used); run from the repository root:

    TF_ENABLE_ONEDNN_OPTS=0 python tests/data/make_nan_inf_golden.py

Each case takes random inputs, puts NaN, +Inf or -Inf into one element of x,
y_backprop, scale, reserve_space_1 or reserve_space_2 (or epsilon-sized variance
that underflows), and stores TensorFlow's outputs of FusedBatchNormGradV3 and
FusedBatchNormV3.  The tests compare the NaN/Inf *pattern* of fbnops' outputs with
these (and the finite values within tolerance).
"""

import json
import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "tf_nan_inf.npz")


def main():
    rng = np.random.default_rng(2024)
    arrays, meta = {}, []
    specials = [np.nan, np.inf, -np.inf]
    where_choices = ["x", "y_backprop", "scale", "reserve_space_1", "reserve_space_2", "none"]
    i = 0
    for fmt, shape in [("NHWC", (2, 3, 3, 4)), ("NCHW", (2, 4, 3, 3))]:
        c = 4
        for training in (True, False):
            if fmt == "NCHW" and not training:
                continue  # TF's CPU kernel refuses it
            for where in where_choices:
                for special in specials if where != "none" else [0.0]:
                    x = rng.standard_normal(shape).astype(np.float32)
                    dy = rng.standard_normal(shape).astype(np.float32)
                    scale = (rng.random(c) + 0.5).astype(np.float32)
                    m = (rng.standard_normal(c) * 0.1).astype(np.float32)
                    v = (rng.random(c) + 0.5).astype(np.float32)
                    inputs = {"x": x, "y_backprop": dy, "scale": scale, "reserve_space_1": m, "reserve_space_2": v}
                    if where != "none":
                        flat = inputs[where].reshape(-1)
                        flat[int(rng.integers(flat.size))] = special
                    g = tf.raw_ops.FusedBatchNormGradV3(
                        **inputs, reserve_space_3=tf.constant(0.0), epsilon=1e-3, data_format=fmt, is_training=training
                    )
                    f = tf.raw_ops.FusedBatchNormV3(
                        x=inputs["x"],
                        scale=scale,
                        offset=m,
                        mean=m,
                        variance=inputs["reserve_space_2"],
                        epsilon=1e-3,
                        data_format=fmt,
                        is_training=training,
                    )
                    for k, a in inputs.items():
                        arrays[f"{i}/{k}"] = a
                    for k, t in zip(["x_backprop", "scale_backprop", "offset_backprop"], g[:3], strict=True):
                        arrays[f"{i}/{k}"] = t.numpy()
                    for k, t in zip(["y", "batch_mean", "batch_variance"], f[:3], strict=True):
                        arrays[f"{i}/{k}"] = t.numpy()
                    meta.append({"data_format": fmt, "is_training": training, "where": where, "special": str(special)})
                    i += 1
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    arrays["__tf_version__"] = np.frombuffer(tf.__version__.encode(), np.uint8)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {i} cases to {OUT}")


if __name__ == "__main__":
    main()
