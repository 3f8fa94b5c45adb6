"""A solution of 'running_stats' (kept out of the package)."""

import numpy as np

EXERCISE = "running_stats"


def blend(running, batch, factor):
    return (1 - factor) * np.asarray(running, np.float64) + factor * np.asarray(batch, np.float64)


def update(x, running_mean, running_variance, factor, data_format):
    axis = 1 if data_format.startswith("NC") else x.ndim - 1
    others = tuple(a for a in range(x.ndim) if a != axis)
    xf = x.astype(np.float64)
    n = x.size // x.shape[axis]
    mean = xf.mean(axis=others)
    variance = xf.var(axis=others) * n / max(n - 1, 1)
    return blend(running_mean, mean, factor).astype(np.float32), blend(running_variance, variance, factor).astype(
        np.float32
    )
