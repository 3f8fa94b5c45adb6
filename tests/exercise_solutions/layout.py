"""A solution of 'layout' (kept out of the package)."""

import numpy as np

EXERCISE = "layout"


def channel_axis(data_format, ndim):
    return 1 if data_format.startswith("NC") else ndim - 1


def to_channels_last(x, data_format):
    return np.moveaxis(x, 1, -1) if data_format.startswith("NC") else x


def from_channels_last(x_last, data_format):
    return np.moveaxis(x_last, -1, 1) if data_format.startswith("NC") else x_last


def canonical_view(x, data_format):
    axis = channel_axis(data_format, x.ndim)
    return x.reshape(int(np.prod(x.shape[:axis])), x.shape[axis], int(np.prod(x.shape[axis + 1 :])))
