"""The Monte-Carlo SURE of the Wiener image denoiser at fixed settings (``wiener_sure``).

:func:`denoise_image_wiener` compares its candidates by the same estimate
on crops; this function gives it for the whole image and one choice, to
check a setting against the error on a clean image, or to tune one by hand.
"""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from ..attention._device import resolve_device
from ._colour import Channels, OpponentTransform, channel_variances
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
        "noise_variance": [Interval(Real, 0, None, closed="neither"), "array-like"],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "channel_axis": [Integral, None],
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
    channel_axis=None,
):
    """Monte-Carlo SURE of :func:`denoise_image_wiener`: its mean squared
    error per pixel estimated from the noisy image alone.

    ``SURE = ||f(y) - y||^2 / N - sigma^2 + 2 sigma^2 div f(y) / N``, with the
    divergence estimated along one Rademacher probe ``b`` (entries +-1) as
    ``b^T (f(y + eps b) - f(y)) / eps`` (Ramani, Blu & Unser, 2008), both
    stages and the weights included. Its expectation is the error against
    the unseen clean image for white Gaussian noise of variance
    ``noise_variance``.

    For a colour image each new channel of the opponent transform (see
    :func:`denoise_image_wiener`) is denoised on its own, in units of its
    white noise, so the divergence is each channel's; the residuals are
    weighed by ``T S^2 T^T`` (``T`` the transform, ``S`` the channels' noise
    standard deviations), which is ``sigma^2 I`` where the noise is the same
    on every channel. The estimate is then of the error per pixel and
    channel, as ``np.mean((denoised - clean) ** 2)`` over the whole array.

    Parameters
    ----------
    noisy : array-like of shape (height, width), or with a channel axis
        The noisy image.
    noise_variance : float or sequence of float
        ``sigma^2 > 0``, the true one (one per channel, for a colour image,
        or one for all): ``None`` is a ValueError (an estimate from the
        image would bias SURE).
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
    channel_axis : int or None, default=None
        The axis of a colour image's channels, as in
        :func:`denoise_image_wiener`.

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
    channels = Channels(noisy, channel_axis)
    variances_given = channel_variances(noise_variance, channels.count)
    checked = [
        checked_image_and_noise(plane, variance, patch_size, search_distance, step)
        for plane, variance in zip(channels.planes, variances_given, strict=True)
    ]
    planes, sigmas = [plane for plane, _ in checked], np.array([sigma for _, sigma in checked])
    image_shape = planes[0].shape
    fits_blocks = min(image_shape) >= THRESHOLD_BLOCK
    (stage,) = _first_stage_candidates(
        checked_first_stages(first_stage, fits_blocks, image_shape, auto=False),
        checked_distances(pilot_search_distance, "pilot_search_distance", single=True),
    )
    weight = checked_weight(collaborative_weight, fits_blocks, image_shape, auto=False)
    variances = checked_variances(wiener_variance, single=True)
    if not np.all(sigmas > 0):
        raise ValueError(f"noise_variance must be positive; got {noise_variance}.")
    torch_device = resolve_device(device)
    first = checked_positive(temperature, "temperature")[0]
    settings = _settings(patch_size, search_distance, block_search_distance, step, first)
    second = float(checked_positive(second_temperature, "second_temperature")[0])
    transform = OpponentTransform([float(plane.mean()) for plane in planes], sigmas)
    rng = check_random_state(random_state)
    choice = (stage, second, (1 - weight, (weight,)))
    residuals, divergences = [], []
    for opponent in transform.opponents(planes):
        # float64: the divergence is a difference of two runs a small step apart
        units = torch.as_tensor(opponent, dtype=torch.float64, device=torch_device)
        probe = rademacher_probe(rng, image_shape)
        probe = torch.as_tensor(probe, dtype=torch.float64, device=torch_device)
        denoised = _denoised(units, choice, variances, settings)
        nudged = _denoised(units + epsilon * probe, choice, variances, settings)
        divergences.append(float((probe * (nudged - denoised)).sum()) / epsilon)
        residuals.append((denoised - units).cpu().numpy())
    # the error in the image's units is r^T M r per pixel, M = T S^2 T^T, for
    # the residuals r in units of the noise (sigma = 1 in every new channel)
    weights = transform.matrix @ np.diag(sigmas**2) @ transform.matrix.T
    residuals = np.stack(residuals)
    n_pixels = residuals[0].size
    squared = float(np.einsum("ipq,ij,jpq->", residuals, weights, residuals)) / n_pixels
    divergence = float(np.diag(weights) @ np.array(divergences)) / n_pixels
    risk = squared - np.trace(weights) + 2 * divergence
    return risk / len(sigmas)
