"""Image denoising: the package's denoisers on a grayscale image's patches,
and trainable non-local means.

- :func:`denoise_image` (``_patches``): any denoiser of the package fitted on
  the noisy image's own overlapping patches, one prompt for the whole image,
  the estimates averaged back into an image;
- :func:`denoise_image_nonlocal` (``_nonlocal_fit``, with the head's math in
  ``_nonlocal_head``): the key-norm head with each patch's search window as
  its prompt, trained by Monte-Carlo SURE on the noisy image alone;
- :func:`denoise_image_wiener` (``_wiener_fit``, with the stage's math in
  ``_wiener_head``): the same attention over the search window gating an
  affine expert per group (its empirical Wiener map), on a pilot from a
  first stage (``_collaborative``: BM3D's hard thresholding, or the same
  Wiener experts on the noisy image), and :func:`wiener_sure`
  (``_wiener_sure``), its Monte-Carlo SURE.
"""

from ._nonlocal_fit import NonLocalHead, denoise_image_nonlocal
from ._patches import denoise_image, image_to_patches, patches_to_image
from ._validation import checked_grayscale  # noqa: F401  (importable here before the move)
from ._wiener_fit import denoise_image_wiener
from ._wiener_sure import wiener_sure

__all__ = [
    "NonLocalHead",
    "denoise_image",
    "denoise_image_nonlocal",
    "denoise_image_wiener",
    "image_to_patches",
    "patches_to_image",
    "wiener_sure",
]
