"""Colour images for the Wiener denoiser: channels, and the opponent transform.

A colour image's channels are whitened (each centred and divided by its
noise's standard deviation) and turned by an orthonormal matrix whose first
row is the channels' mean: the DCT-II over the channels, for three channels
the opponent colour transform of CBM3D (Dabov et al., 2007),
``(R + G + B) / sqrt 3``, ``(R - B) / sqrt 2``, ``(R - 2 G + B) / sqrt 6``.
An orthonormal map of white noise of variance 1 in every channel is white
noise of variance 1 in every new channel, independent across them, so each
is denoised as a grayscale image in units of its noise; and the image's
structure is mostly in the first (the luminance), where the groups of
similar patches are found for all of them.
"""

import numpy as np
import torch

from ._collaborative import dct_matrix
from ._validation import is_dask_array


class Channels:
    """An image's channels as planes of shape (height, width), and the way back.

    ``channel_axis=None``: a grayscale image, one plane.
    """

    def __init__(self, image, channel_axis):
        array = image if is_dask_array(image) else np.asarray(image)
        if channel_axis is None:
            if array.ndim == 3:
                raise ValueError(
                    f"Expected a grayscale image of shape (height, width); got {array.shape}. "
                    "For a colour image pass channel_axis, the axis of its channels (-1 for "
                    "an image of shape (height, width, channels))."
                )
            self.axis, self.planes = None, [image]
            return
        if array.ndim != 3:
            raise ValueError(
                f"channel_axis={channel_axis} needs an image of three axes (height, width and "
                f"channels); got shape {array.shape}."
            )
        if not -3 <= channel_axis < 3:
            raise ValueError(
                f"channel_axis must be an axis of the image, in [-3, 2]; got {channel_axis}."
            )
        self.axis = channel_axis % 3
        self.planes = self.split(array)

    def split(self, image) -> list:
        """The planes of an image (or a chunk of one) of the input's layout."""
        return [image] if self.axis is None else list(np.moveaxis(image, self.axis, 0))

    @property
    def count(self) -> int:
        return len(self.planes)

    def image(self, planes):
        """The planes (float64, (height, width) each) as an image of the input's layout."""
        if self.axis is None:
            return planes[0]
        return np.moveaxis(np.stack(planes), 0, self.axis)


def channel_variances(noise_variance, count: int) -> list:
    """One noise variance (or ``None``, to estimate) per channel: a number
    for every channel, or a sequence of ``count`` non-negative numbers."""
    if noise_variance is None or np.ndim(noise_variance) == 0:
        return [noise_variance] * count
    values = np.asarray(noise_variance, dtype=np.float64)
    if values.shape != (count,) or not np.all(np.isfinite(values) & (values >= 0)):
        raise ValueError(
            f"noise_variance must be a number, or one non-negative number per channel ({count}); "
            f"got {noise_variance!r}."
        )
    return [float(value) for value in values]


class OpponentTransform:
    """The channels with noise, whitened and turned (see the module); those
    without noise (``sigma = 0``) are passed through as they are.

    Fixed by each channel's centre and noise, it applies alike to the whole
    image, to crops of it and to chunks of a dask array.

    Parameters
    ----------
    centres : list of float
        Each channel's mean.
    sigmas : list of float
        Each channel's noise standard deviation.
    """

    def __init__(self, centres, sigmas):
        self.sigmas = np.asarray(sigmas, dtype=np.float64)
        self.noisy = [index for index, sigma in enumerate(self.sigmas) if sigma > 0]
        self.centres = [float(centres[index]) for index in self.noisy]
        # one channel: exactly the identity (the DCT's 1 is 1 + 2e-16)
        count = len(self.noisy)
        self.matrix = dct_matrix(count, torch.float64).numpy() if count > 1 else np.eye(count)

    def opponents(self, planes) -> list:
        """The new channels of ``planes`` (float64, in units of the noise), the luminance first."""
        whitened = np.stack(
            [
                (planes[index] - centre) / self.sigmas[index]
                for index, centre in zip(self.noisy, self.centres, strict=True)
            ]
        )
        return list(np.tensordot(self.matrix, whitened, axes=1))

    def restored(self, estimates, planes) -> list:
        """Every channel in the image's units, from the new channels'
        ``estimates``; the channels without noise from ``planes``."""
        result = [np.array(plane, dtype=np.float64) for plane in planes]
        if not self.noisy:
            return result
        whitened = np.tensordot(self.matrix.T, np.stack(estimates), axes=1)
        for row, index in enumerate(self.noisy):
            result[index] = whitened[row] * self.sigmas[index] + self.centres[row]
        return result
