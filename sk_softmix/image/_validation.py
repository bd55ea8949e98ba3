"""Input checks of the image functions."""

import numpy as np


def checked_grayscale(image, name: str = "image") -> np.ndarray:
    """``image`` as a finite float64 array of shape (height, width), or a ValueError."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 2:
        raise ValueError(
            f"Expected a grayscale {name} of shape (height, width); got {image.shape}."
        )
    if not np.all(np.isfinite(image)):
        raise ValueError(f"The {name} holds NaN or infinite pixels.")
    return image
