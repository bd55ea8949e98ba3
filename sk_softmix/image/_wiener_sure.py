"""The Monte-Carlo SURE of the Wiener image denoiser at fixed settings (``wiener_sure``).

:func:`denoise_image_wiener` compares its candidates by the same estimate
on crops; this function gives it for the whole image and one choice, to
check a setting against the error on a clean image, or to tune one by hand.
"""

from numbers import Real

import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from ..attention._device import resolve_device
from ._sure_blend import rademacher_probe
from ._validation import integer_image
from ._wiener_checks import (
    SHARED_CONSTRAINTS,
    THRESHOLD_BLOCK,
    checked_distances,
    checked_first_stages,
    checked_image_and_noise,
    checked_positive,
    checked_variances,
    checked_weight,
)
from ._wiener_fit import (
    SECOND_TEMPERATURE,
    SURE_STEP,
    _denoised,
    _first_stage_candidates,
    _settings,
)


@validate_params(
    {
        **SHARED_CONSTRAINTS,
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def wiener_sure(
    noisy,
    noise_variance,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    second_temperature=SECOND_TEMPERATURE,
    first_stage="threshold",
    collaborative_weight=0.5,
    wiener_variance=1.0,
    block_search_distance=19,
    pilot_search_distance=19,
    step=3,
    epsilon=SURE_STEP,
    device="auto",
    random_state=None,
    preserve_range=None,
):
    """Monte-Carlo SURE of :func:`denoise_image_wiener`: its mean squared
    error per pixel estimated from the noisy image alone.

    ``SURE = ||f(y) - y||^2 / N - sigma^2 + 2 sigma^2 div f(y) / N``, with the
    divergence estimated along one Rademacher probe ``b`` (entries +-1) as
    ``b^T (f(y + eps b) - f(y)) / eps`` (Ramani, Blu & Unser, 2008), both
    stages and the weights included. Its expectation is the error against
    the unseen clean image for white Gaussian noise of variance
    ``noise_variance``.

    Parameters
    ----------
    noisy : array-like of shape (height, width)
        The noisy image.
    noise_variance : float
        ``sigma^2 > 0``, the true one: ``None`` is a ValueError (an estimate
        from the image would bias SURE).
    patch_size : int, default=5
        As in :func:`denoise_image_wiener`.
    search_distance : int, default=7
        As in :func:`denoise_image_wiener`.
    temperature : float, default=2.0
        The first stage's temperature, as in :func:`denoise_image_wiener`.
    second_temperature : float, default=0.25
        The second stage's temperature (one number), as in
        :func:`denoise_image_wiener`.
    first_stage : {"threshold", "wiener"}, default="threshold"
        The first stage, as in :func:`denoise_image_wiener` (one of them).
    collaborative_weight : float, default=0.5
        The collaborative second stage's weight in ``[0, 1]``, as in
        :func:`denoise_image_wiener` (one number).
    wiener_variance : float, default=1.0
        The collaborative expert's shrinkage variance, as in
        :func:`denoise_image_wiener` (one number).
    block_search_distance : int, default=19
        As in :func:`denoise_image_wiener`.
    pilot_search_distance : int, default=19
        The thresholding first stage's window (one number).
    step : int, default=3
        As in :func:`denoise_image_wiener`.
    epsilon : float, default=0.1
        The probe's step (positive), in units of the noise, as the denoiser's own
        search takes it. Block matching and thresholds jump as the probe
        moves them, and the finite difference's variance grows as
        ``1 / epsilon``: on a 192 x 192 crop of coins at noise 0.2 (the
        collaborative expert alone, three draws of a Gaussian probe) single
        estimates were off by -26% to +35% at ``1e-2`` and by -12% to -3%
        at 0.1. Its bias at 0.1 was +5-7% of the error on a 128 x 128 crop
        of camera (the Wiener first stage, eight draws of the noise).
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds the probe.
    preserve_range : bool or None, default=None
        For an integer image, the units it is taken in, as
        :func:`denoise_image_wiener`'s (the estimate is in those units).

    Returns
    -------
    float
        The estimate, in the image's squared units.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.image import denoise_image_wiener, wiener_sure
    >>> rng = np.random.default_rng(0)
    >>> clean = np.kron(rng.integers(0, 4, size=(8, 8)) / 3, np.ones((8, 8)))
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> settings = {"second_temperature": 1.0, "collaborative_weight": 0.5}
    >>> estimate = wiener_sure(noisy, 0.01, random_state=0, **settings)
    >>> denoised = denoise_image_wiener(noisy, 0.01, **settings)
    >>> error = np.mean((denoised - clean) ** 2)
    >>> bool(abs(estimate - error) < 0.2 * error)
    True
    """
    noisy, _ = integer_image(noisy, preserve_range, "wiener_sure")
    image, sigma = checked_image_and_noise(noisy, noise_variance, patch_size, search_distance, step)
    fits_blocks = min(image.shape) >= THRESHOLD_BLOCK
    (stage,) = _first_stage_candidates(
        checked_first_stages(first_stage, fits_blocks, image.shape, auto=False),
        checked_distances(pilot_search_distance, "pilot_search_distance", single=True),
    )
    weight = checked_weight(collaborative_weight, fits_blocks, image.shape, auto=False)
    variances = checked_variances(wiener_variance, single=True)
    if not sigma > 0:
        raise ValueError(f"noise_variance must be positive; got {noise_variance}.")
    torch_device = resolve_device(device)
    first = checked_positive(temperature, "temperature")[0]
    settings = _settings(patch_size, search_distance, block_search_distance, step, first)
    second = float(checked_positive(second_temperature, "second_temperature")[0])
    centre = float(image.mean())
    # float64: the divergence is a difference of two runs a small step apart
    units = torch.as_tensor((image - centre) / sigma, dtype=torch.float64, device=torch_device)
    probe = rademacher_probe(check_random_state(random_state), image.shape)
    probe = torch.as_tensor(probe, dtype=torch.float64, device=torch_device)
    choice = (stage, second, (1 - weight, (weight,)))
    denoised = _denoised(units, choice, variances, settings)
    nudged = _denoised(units + epsilon * probe, choice, variances, settings)
    divergence = float((probe * (nudged - denoised)).sum()) / epsilon
    n_pixels = image.size
    # in units of the noise (sigma = 1), then back to the image's
    risk = float((denoised - units).square().mean()) - 1 + 2 * divergence / n_pixels
    return risk * sigma**2
