"""A solution of 'frozen_gradient' (kept out of the package)."""

import numpy as np

EXERCISE = "frozen_gradient"


def _axis(data_format, ndim):
    return 1 if data_format.startswith("NC") else ndim - 1


def _b(v, x, data_format):
    shape = [1] * x.ndim
    shape[_axis(data_format, x.ndim)] = -1
    return np.reshape(v, shape)


def _others(x, data_format):
    axis = _axis(data_format, x.ndim)
    return tuple(a for a in range(x.ndim) if a != axis)


def rstd(variance, epsilon):
    return 1 / np.sqrt(np.asarray(variance, np.float64) + epsilon)


def scale_backprop(dy, x, mean, rstd, data_format):
    xc = x.astype(np.float64) - _b(mean, x, data_format)
    return (dy.astype(np.float64) * xc).sum(axis=_others(x, data_format)) * rstd


def x_backprop(dy, scale, rstd, data_format):
    return _b(np.asarray(scale, np.float64) * rstd, dy, data_format) * dy.astype(np.float64)


def gradient(dy, x, scale, mean, variance, epsilon, data_format):
    r = rstd(variance, epsilon)
    offset_backprop = dy.astype(np.float64).sum(axis=_others(dy, data_format))
    return (
        x_backprop(dy, scale, r, data_format).astype(x.dtype),
        scale_backprop(dy, x, mean, r, data_format).astype(np.float32),
        offset_backprop.astype(np.float32),
    )
