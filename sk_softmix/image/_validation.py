"""Input checks of the image functions."""

import warnings
from typing import NamedTuple

import numpy as np

# A declared noise standard deviation this many times what the image shows
# (``noise_shown``, which texture only raises) cannot be the image's noise;
# the estimate's sampling error is 16% on 16 x 16 pixels.
NOISE_EXCESS = 2.0


def checked_grayscale(image, name: str = "image") -> np.ndarray:
    """``image`` as a finite float64 array of shape (height, width), or a ValueError."""
    if np.iscomplexobj(image):  # float64 would drop the imaginary part with a mere warning
        raise ValueError(
            f"The {name} is complex; the image functions denoise real images. Pass its real "
            "part, its magnitude, or each part separately."
        )
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 2:
        raise ValueError(
            f"Expected a grayscale {name} of shape (height, width); got {image.shape}."
        )
    if not np.all(np.isfinite(image)):
        raise ValueError(f"The {name} holds NaN or infinite pixels.")
    return image


def check_image(image, name="image"):
    """``checked_grayscale``, and at least 2 x 2 pixels."""
    image = checked_grayscale(image, name)
    if min(image.shape) < 2:
        raise ValueError(f"The {name} must be at least 2 x 2 pixels; got {image.shape}.")
    return image


def noise_shown(image) -> float:
    """A robust estimate of the standard deviation of the image's white
    noise: the median absolute diagonal Haar detail over 0.6745 (Donoho &
    Johnstone, 1994). Each detail of 2 x 2 pixels has the noise's standard
    deviation plus whatever texture adds, so the estimate is at least the
    noise's, up to its sampling error, wherever the noise is white."""
    return noise_of_details(diagonal_details(image))


def noise_of_details(details) -> float:
    """The noise's standard deviation from diagonal Haar details: their
    median absolute value over 0.6745 (a Gaussian's median absolute value
    in standard deviations), robust to the few that hold edges."""
    return float(np.median(np.abs(details)) / 0.6745)


def diagonal_details(image) -> np.ndarray:
    """The diagonal Haar details of the image's 2 x 2 pixel squares (each of
    the noise's standard deviation where the image is flat)."""
    rows, cols = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
    x = image[:rows, :cols]
    return (x[0::2, 0::2] - x[0::2, 1::2] - x[1::2, 0::2] + x[1::2, 1::2]) / 2


class IntegerUnits(NamedTuple):
    """How ``integer_image`` took an integer image: divided by ``scale``, its
    result clipped to ``[low, high]``."""

    scale: float
    low: float
    high: float


def is_dask_array(image) -> bool:
    """Whether ``image`` is a dask array (without importing dask)."""
    return type(image).__module__.split(".")[0] == "dask" and hasattr(image, "map_overlap")


def integer_image(image, preserve_range, function: str):
    """``(image, units)``: an integer image in the units the function
    denoises it in, and the :class:`IntegerUnits` that took it there; any
    other image is returned as given, with ``None``.

    scikit-image's denoisers take an integer image as floats in [0, 1]
    ([-1, 1] for a signed type: the integer over its type's largest value,
    ``img_as_float``), the noise in those units. ``preserve_range=False`` is
    that; ``True`` keeps the image's own units. Either way the result is
    clipped to the range the input could hold. ``None``: ``True``, with a
    ``FutureWarning``, since the default is to become scikit-image's.
    """
    if not (
        (isinstance(image, np.ndarray) or is_dask_array(image))
        and np.issubdtype(image.dtype, np.integer)
    ):
        return image, None
    info = np.iinfo(image.dtype)
    if preserve_range is None:
        warnings.warn(
            f"{function}: the image is of integer type {image.dtype}; it is denoised in its "
            f"own units (noise_variance too) and comes back as floats in [{info.min}, "
            f"{info.max}]. In a future version integer images will be taken as scikit-image's "
            "denoisers take them, as floats in [0, 1] ([-1, 1] for a signed type) with "
            "noise_variance in those units. Pass preserve_range=True to keep the image's "
            "units, or preserve_range=False for scikit-image's, to silence this warning.",
            FutureWarning,
            stacklevel=4,  # the user's call, through validate_params
        )
        preserve_range = True
    if preserve_range:
        units = IntegerUnits(1.0, float(info.min), float(info.max))
    else:
        units = IntegerUnits(float(info.max), -1.0 if info.min < 0 else 0.0, 1.0)
    return image.astype(np.float64) / units.scale, units


def in_the_same_units(other, units):
    """``other`` (a study's clean image) in the units ``integer_image`` took
    the noisy image in: an integer ``other`` divided by the same scale."""
    if units is None or not (
        isinstance(other, np.ndarray) and np.issubdtype(other.dtype, np.integer)
    ):
        return other
    return other.astype(np.float64) / units.scale


def clipped(result, units):
    """``result`` clipped to the range of ``units`` (``integer_image``'s), if any."""
    return result if units is None else np.clip(result, units.low, units.high)


def with_model(denoised, model, return_model, function: str):
    """What an image function that fits a model returns: ``denoised``, or
    ``(denoised, model)`` with ``return_model=True``. ``None``: the pair,
    with a ``FutureWarning``, since the default is to become the image alone
    (the return of ``denoise_image_wiener`` and of scikit-image's denoisers)."""
    if return_model is None:
        warnings.warn(
            f"{function} returns (denoised, model); in a future version it will return the "
            "denoised image alone, as denoise_image_wiener and scikit-image's denoisers do. "
            "Pass return_model=True to keep the pair, or return_model=False for the image "
            "alone, to silence this warning.",
            FutureWarning,
            stacklevel=4,  # the user's call, through validate_params
        )
        return_model = True
    return (denoised, model) if return_model else denoised
