"""Input checks of the image functions."""

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
    rows, cols = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
    x = image[:rows, :cols]
    detail = (x[0::2, 0::2] - x[0::2, 1::2] - x[1::2, 0::2] + x[1::2, 1::2]) / 2
    return float(np.median(np.abs(detail)) / 0.6745)
