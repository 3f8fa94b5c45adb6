"""A solution of 'forward' (kept out of the package: tests grade it, and its broken copies)."""

import numpy as np

EXERCISE = "forward"


def _axis(data_format, ndim):
    return 1 if data_format.startswith("NC") else ndim - 1


def _others(x, data_format):
    axis = _axis(data_format, x.ndim)
    return tuple(a for a in range(x.ndim) if a != axis)


def _broadcast(v, x, data_format):
    shape = [1] * x.ndim
    shape[_axis(data_format, x.ndim)] = -1
    return np.reshape(v, shape)


def count(x, data_format):
    return x.size // x.shape[_axis(data_format, x.ndim)]


def channel_mean(x, data_format):
    return x.astype(np.float64).mean(axis=_others(x, data_format))


def channel_variance(x, mean, data_format):
    xc = x.astype(np.float64) - _broadcast(mean, x, data_format)
    return (xc**2).mean(axis=_others(x, data_format))


def bessel(variance, n):
    return variance * n / max(n - 1, 1)


def rstd(variance, epsilon):
    return 1 / np.sqrt(variance + epsilon)


def normalize(x, mean, rstd, data_format):
    return (x.astype(np.float64) - _broadcast(mean, x, data_format)) * _broadcast(rstd, x, data_format)


def forward(x, scale, offset, epsilon, data_format):
    mean = channel_mean(x, data_format)
    variance = channel_variance(x, mean, data_format)
    x_hat = normalize(x, mean, rstd(variance, epsilon), data_format)
    y = _broadcast(scale, x, data_format) * x_hat + _broadcast(offset, x, data_format)
    f32 = np.float32
    return (
        y.astype(x.dtype),
        mean.astype(f32),
        bessel(variance, count(x, data_format)).astype(f32),
        mean.astype(f32),
        variance.astype(f32),
    )
