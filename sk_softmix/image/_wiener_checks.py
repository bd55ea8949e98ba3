"""Argument checks of the Wiener image denoiser (``denoise_image_wiener``,
``wiener_sure``): each a clear ValueError naming the argument."""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._validation import NOISE_EXCESS, check_image, noise_shown

FIRST_STAGES = ("wiener", "threshold")
# The collaborative stages' blocks: BM3D's 8 x 8.
THRESHOLD_BLOCK = 8
# At most this many collaborative shrinkage variances (SURE's blend tries
# every face of the simplex of experts).
MAX_WIENER_VARIANCES = 7
# An estimated noise variance this share of the image's variance or more
# leaves nothing to keep: the estimate is not to be trusted silently.
ALL_NOISE = 0.9

# The scalar parameters both public functions take, their types and ranges
# as validate_params checks them; what constraints cannot express (odd
# patches, a step within a patch, sequences of candidates, "auto") is checked
# in _wiener_checks, each a ValueError naming the argument.
SHARED_CONSTRAINTS = {
    "noisy": ["array-like"],
    "patch_size": [Interval(Integral, 1, None, closed="left")],
    "search_distance": [Interval(Integral, 0, None, closed="left")],
    "block_search_distance": [Interval(Integral, 0, None, closed="left")],
    "step": [Interval(Integral, 1, None, closed="left")],
    "device": [str],
    "random_state": ["random_state"],
    "preserve_range": ["boolean", None],
}


def checked_distances(value, name, single=False):
    values = [value] if single or isinstance(value, int | np.integer) else list(value)
    if not values or not all(isinstance(v, int | np.integer) and v >= 0 for v in values):
        expected = "an integer" if single else "an integer or a sequence of integers"
        raise ValueError(f"{name} must be {expected} >= 0; got {value!r}.")
    return [int(v) for v in values]


def checked_first_stages(value, fits_blocks, shape, *, auto):
    """The first stages to compare: both for "auto" (the Wiener one alone on
    an image smaller than the thresholding's blocks), else the one named."""
    if auto and isinstance(value, str) and value == "auto":
        return list(FIRST_STAGES) if fits_blocks else ["wiener"]
    if not (isinstance(value, str) and value in FIRST_STAGES):
        options = ("auto",) + FIRST_STAGES if auto else FIRST_STAGES
        raise ValueError(f"first_stage must be one of {options}; got {value!r}.")
    if value == "threshold" and not fits_blocks:
        raise ValueError(too_small("first_stage='threshold'", shape))
    return [value]


def checked_weight(value, fits_blocks, shape, *, auto):
    """The collaborative weight, or None for "auto" (0 on an image smaller
    than a block)."""
    if auto and isinstance(value, str) and value == "auto":
        return None if fits_blocks else 0.0
    if isinstance(value, str) or not isinstance(value, Real) or not 0 <= value <= 1:
        expected = '"auto" or a number' if auto else "a number"
        raise ValueError(f"collaborative_weight must be {expected} in [0, 1]; got {value!r}.")
    if value > 0 and not fits_blocks:
        raise ValueError(too_small(f"collaborative_weight={value}", shape))
    return float(value)


def too_small(what, shape):
    return (
        f"{what} needs an image of at least {THRESHOLD_BLOCK} x {THRESHOLD_BLOCK} pixels "
        f"(its blocks); got {shape[0]} x {shape[1]}."
    )


def checked_positive(value, name):
    """One or more positive finite numbers, as a 1-D float64 array."""
    values = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if values.ndim != 1 or len(values) == 0 or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(f"{name} must be positive and finite; got {value!r}.")
    return values


def checked_variances(value, single=False):
    """The collaborative experts' shrinkage variances, as floats (one for
    ``single``, at most MAX_WIENER_VARIANCES, without repeats)."""
    variances = tuple(float(v) for v in checked_positive(value, "wiener_variance"))
    most = 1 if single else MAX_WIENER_VARIANCES
    if len(variances) > most or len(set(variances)) != len(variances):
        expected = "one number" if single else f"at most {most} distinct numbers"
        raise ValueError(f"wiener_variance must be {expected}; got {value!r}.")
    return variances


def checked_image_and_noise(noisy, noise_variance, patch_size, search_distance, step):
    """The image (float64) and the noise's standard deviation, or a ValueError."""
    image = check_image(noisy)  # the integer ranges: validate_params, by the caller
    checked_geometry(image.shape, patch_size, step)
    return image, checked_noise(noise_variance, noise_shown(image), image.var())


def checked_geometry(shape, patch_size, step):
    """A ValueError unless patches of ``patch_size`` every ``step`` pixels fit the image."""
    if patch_size % 2 == 0:
        raise ValueError(f"patch_size must be odd (patches centred on a pixel); got {patch_size}.")
    if step > patch_size:
        raise ValueError(
            f"step={step} must be at most patch_size={patch_size}, so that every pixel lies "
            "in a reference patch."
        )
    if min(shape) < patch_size:
        raise ValueError(
            f"The image ({shape[0]} x {shape[1]}) is smaller than one patch "
            f"(patch_size={patch_size})."
        )


def checked_noise(noise_variance, shown, image_variance):
    """The noise's standard deviation: ``sqrt(noise_variance)``, or ``shown``
    (the noise the image shows) where it is ``None``; warned about where
    either cannot be the image's noise."""
    if noise_variance is None:
        if shown**2 >= ALL_NOISE * image_variance:
            # a clean +-1 checkerboard: every 2 x 2 detail is texture, taken for noise
            warnings.warn(
                f"denoise_image_wiener: the noise estimated from the image's 2 x 2 pixel "
                f"details (variance {shown**2:.4g}) is as large as the image's own "
                f"({image_variance:.4g}): the image is pure noise, or "
                "its texture is at the pixel scale and is taken for noise (the result is "
                "then nearly flat). Give noise_variance.",
                UserWarning,
                stacklevel=4,
            )
        return shown
    sigma = math.sqrt(noise_variance)  # non-negative and finite: validate_params
    if sigma > NOISE_EXCESS * shown:
        warnings.warn(
            f"denoise_image_wiener: noise_variance={noise_variance:.4g} is the noise of "
            f"standard deviation {sigma:.4g}, but the image shows at most about {shown:.4g} "
            "(its 2 x 2 pixel details); the result will be smoothed beyond its noise. "
            "Check noise_variance.",
            UserWarning,
            stacklevel=4,
        )
    return sigma
