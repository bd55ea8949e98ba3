"""The Wiener image denoiser: two stages of gated affine experts, and its SURE."""

import math
import time
import warnings
from numbers import Real

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..attention._device import resolve_device
from ._validation import NOISE_EXCESS, check_image, noise_shown
from ._wiener_head import wiener_stage

# Second-stage temperatures compared by SURE by default (see the docstring).
SECOND_TEMPERATURES = (0.25, 0.5, 1.0, 2.0)


def denoise_image_wiener(
    noisy,
    noise_variance=None,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    second_temperature=SECOND_TEMPERATURES,
    step=3,
    crop_size=192,
    device="auto",
    random_state=None,
    verbose=0,
):
    """Denoise a grayscale image with gated affine experts over similar patches.

    Each reference patch attends over the patches of its search window
    (non-local means' weights, a key-norm softmax head); the weights give a
    mean and a covariance, and every patch of the window is estimated by
    that group's empirical Wiener map, an affine expert; each pixel is the
    weighted average of the estimates of the patches that hold it. A second
    stage recomputes the weights and the covariances on the first stage's
    estimate, as BM3D and NL-Bayes do (user guide, "Images: gated affine
    experts").

    Parameters
    ----------
    noisy : array-like of shape (height, width)
        The noisy image, with white Gaussian noise.
    noise_variance : float, default=None
        ``sigma^2`` of the noise, in the image's units. ``None``: estimated
        from the image, as the square of the median absolute diagonal Haar
        detail over 0.6745 (Donoho & Johnstone, 1994), which texture can
        only raise. ``0``: the image is returned unchanged.
    patch_size : int, default=5
        Odd side ``k`` of the patches.
    search_distance : int, default=7
        ``d``: each group is the ``(2 d + 1)^2`` patches around its
        reference.
    temperature : float, default=2.0
        ``T`` of the first stage's weights
        ``softmax(-||z_i - z_r||^2 / (k^2 T sigma^2))``.
    second_temperature : float or sequence of float, default=(0.25, 0.5, 1, 2)
        ``T`` of the second stage's weights, computed on the first stage's
        estimate. A sequence: the one of lowest Monte-Carlo SURE of the
        whole denoiser on a central crop of ``crop_size`` (one probe shared
        by the candidates, so that their differences are precise). Its best
        value falls as the noise grows against the image's contrast: on
        scikit-image's camera 1 at noise 0.1, 0.25 at 0.2.
    step : int, default=3
        Distance between the second stage's reference patches, at most
        ``patch_size``; the first stage, a guide, takes every ``2 step``-th
        (at most every ``patch_size``-th). On scikit-image's camera,
        moon and coins at noise 0.1 and 0.2, ``step`` 1, 2 and 3 gave the
        same PSNR to 0.01 dB, 3 in 40% of 2's time.
    crop_size : int, default=192
        Side of the crop on which a sequence of second temperatures is
        compared.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds SURE's probe when ``second_temperature`` is a sequence.
    verbose : int, default=0
        Print each stage's time, and the second temperatures' SURE.

    Returns
    -------
    ndarray of shape (height, width)
        The denoised image, float64.

    See Also
    --------
    denoise_image_nonlocal : Trainable non-local means, a constant expert per patch.
    wiener_sure : Stein's unbiased estimate of this function's error.

    Notes
    -----
    The image is denoised in units of its noise (mean removed, divided by
    ``sigma``), which makes the parameters independent of the image's
    scale. A ``noise_variance`` whose standard deviation is more than twice
    what the image shows (its diagonal Haar details) is warned about: the
    result is smoothed beyond the image's noise. Colour images, images
    smaller than a patch and non-finite pixels are a ``ValueError``.

    First stage: the attention-weighted covariance ``C`` of the noisy
    patches of a group gives ``A = (C - I)_+ C^{-1}``, negative eigenvalues
    of ``C - I`` clipped at zero; second stage: the covariance ``C_g`` of the
    first estimate's patches gives ``A = C_g (C_g + I)^{-1}``. A constant
    image is returned exactly; as ``sigma -> 0`` the weights concentrate on
    each reference patch and the result tends to the image. Cost: per
    reference, ``(2 d + 1)^2`` patch distances and a ``k^2 x k^2``
    covariance, eigendecomposition (first stage) or solve (second) and
    ``(2 d + 1)^2`` affine maps, references every ``step`` pixels; memory is
    bounded by tiles of 32 x 32 references. On 2 CPU cores a 512 x 512
    image takes 4-7 s at the defaults, most of it the SURE comparison of
    the second temperatures; the two stages alone about 2.5 s (benchmarks,
    section 12: within 0.1 dB of BM3D on scikit-image's moon and coins,
    0.2-0.3 dB below it on camera).

    References
    ----------
    M. Lebrun, A. Buades and J.-M. Morel, "A nonlocal Bayesian image
    denoising algorithm", SIAM J. Imaging Sciences 6(3), 2013 (NL-Bayes).
    K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by
    sparse 3-D transform-domain collaborative filtering", IEEE Trans. Image
    Processing 16(8), 2007 (BM3D's two stages).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.image import denoise_image_wiener
    >>> rng = np.random.default_rng(0)
    >>> clean = np.kron(rng.integers(0, 4, size=(6, 6)) / 3, np.ones((8, 8)))  # 48 x 48
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> denoised = denoise_image_wiener(noisy, 0.01)
    >>> bool(np.mean((denoised - clean) ** 2) < np.mean((noisy - clean) ** 2) / 2)
    True
    """
    image, sigma = _checked(noisy, noise_variance, patch_size, search_distance, step)
    if sigma == 0:
        return image.copy()
    torch_device = resolve_device(device)
    first = _checked_temperatures(temperature, "temperature")
    if len(first) != 1:
        raise ValueError(f"temperature must be one number; got {temperature!r}.")
    second = _checked_temperatures(second_temperature, "second_temperature")
    if len(second) > 1 and not (
        isinstance(crop_size, int | np.integer) and crop_size >= patch_size
    ):
        raise ValueError(
            f"crop_size must be an integer of at least patch_size={patch_size}; got {crop_size!r}."
        )
    settings = {
        "patch_size": patch_size,
        "search_distance": search_distance,
        "step": step,
        "first_temperature": float(first[0]),
    }
    centre = float(image.mean())
    if len(second) > 1:
        crop = _central_crop(image, crop_size)
        crop_units = torch.as_tensor(
            (crop - crop.mean()) / sigma, dtype=torch.float32, device=torch_device
        )
        probe = check_random_state(random_state).standard_normal(crop.shape)
        risks = _sure_by_second_temperature(
            crop_units,
            torch.as_tensor(probe, dtype=torch.float32, device=torch_device),
            second,
            settings,
        )
        if verbose:
            for t, risk in zip(second, risks, strict=True):
                print(
                    f"[denoise_image_wiener] second temperature {t:g}: SURE {risk * sigma**2:.4g}"
                )
        second = second[[int(np.argmin(risks))]]
    units = torch.as_tensor((image - centre) / sigma, dtype=torch.float32, device=torch_device)
    denoised = _two_stages(units, float(second[0]), settings, verbose)
    return denoised.cpu().double().numpy() * sigma + centre


def wiener_sure(
    noisy,
    noise_variance,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    second_temperature=1.0,
    step=3,
    epsilon=1e-3,
    device="auto",
    random_state=None,
):
    """Monte-Carlo SURE of :func:`denoise_image_wiener`: its mean squared
    error per pixel estimated from the noisy image alone.

    ``SURE = ||f(y) - y||^2 / N - sigma^2 + 2 sigma^2 div f(y) / N``, with the
    divergence estimated along one Gaussian probe ``b`` as
    ``b^T (f(y + eps b) - f(y)) / eps`` (Ramani, Blu & Unser, 2008), both
    stages and the weights included. Its expectation is the error against
    the unseen clean image for white Gaussian noise of variance
    ``noise_variance``.

    Parameters
    ----------
    noisy : array-like of shape (height, width)
        The noisy image.
    noise_variance : float
        ``sigma^2 > 0``.
    patch_size : int, default=5
        As in :func:`denoise_image_wiener`.
    search_distance : int, default=7
        As in :func:`denoise_image_wiener`.
    temperature : float, default=2.0
        The first stage's temperature, as in :func:`denoise_image_wiener`.
    second_temperature : float, default=1.0
        The second stage's temperature (one number).
    step : int, default=3
        As in :func:`denoise_image_wiener`.
    epsilon : float, default=1e-3
        The probe's step, in units of the noise.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds the probe.

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
    >>> estimate = wiener_sure(noisy, 0.01, random_state=0)
    >>> denoised = denoise_image_wiener(noisy, 0.01, second_temperature=1.0)
    >>> error = np.mean((denoised - clean) ** 2)
    >>> bool(abs(estimate - error) < 0.2 * error)
    True
    """
    image, sigma = _checked(noisy, noise_variance, patch_size, search_distance, step)
    if not sigma > 0:
        raise ValueError(f"noise_variance must be positive; got {noise_variance}.")
    torch_device = resolve_device(device)
    settings = {
        "patch_size": patch_size,
        "search_distance": search_distance,
        "step": step,
        "first_temperature": float(_checked_temperatures(temperature, "temperature")[0]),
    }
    second = float(_checked_temperatures(second_temperature, "second_temperature")[0])
    centre = float(image.mean())
    # float64: the divergence is a difference of two runs at a step of 1e-3
    units = torch.as_tensor((image - centre) / sigma, dtype=torch.float64, device=torch_device)
    probe = check_random_state(random_state).standard_normal(image.shape)
    probe = torch.as_tensor(probe, dtype=torch.float64, device=torch_device)
    denoised = _two_stages(units, second, settings, 0)
    nudged = _two_stages(units + epsilon * probe, second, settings, 0)
    divergence = float((probe * (nudged - denoised)).sum()) / epsilon
    n_pixels = image.size
    # in units of the noise (sigma = 1), then back to the image's
    risk = float((denoised - units).square().mean()) - 1 + 2 * divergence / n_pixels
    return risk * sigma**2


def _two_stages(units, second_temperature, settings, verbose):
    """Both stages on an image in units of its noise; the second's guide is the first's output."""
    start = time.perf_counter()
    guide = _first_stage(units, settings)
    middle = time.perf_counter()
    denoised = _second_stage(units, guide, second_temperature, settings)
    if verbose:
        print(
            f"[denoise_image_wiener] first stage {middle - start:.1f} s, "
            f"second {time.perf_counter() - middle:.1f} s"
        )
    return denoised


def _first_stage(units, settings):
    return wiener_stage(
        units,
        units,
        second=False,
        patch_size=settings["patch_size"],
        search_distance=settings["search_distance"],
        temperature=settings["first_temperature"],
        # a guide needs fewer references; at most one a patch, so that every
        # pixel lies in a reference patch (whose own weight is the largest)
        step=min(2 * settings["step"], settings["patch_size"]),
    )


def _second_stage(units, guide, temperature, settings):
    return wiener_stage(
        units,
        guide,
        second=True,
        patch_size=settings["patch_size"],
        search_distance=settings["search_distance"],
        temperature=temperature,
        step=settings["step"],
    )


def _sure_by_second_temperature(units, probe, temperatures, settings, epsilon=1e-2):
    """Monte-Carlo SURE (noise units) of the two stages for each second
    temperature, with one probe: the first stage runs once on the image and
    once on it nudged, and every candidate's second stage on both."""
    nudged_units = units + epsilon * probe
    guide, nudged_guide = _first_stage(units, settings), _first_stage(nudged_units, settings)
    risks = []
    for temperature in temperatures:
        denoised = _second_stage(units, guide, temperature, settings)
        nudged = _second_stage(nudged_units, nudged_guide, temperature, settings)
        divergence = float((probe * (nudged - denoised)).double().sum()) / epsilon
        residual = float((denoised - units).double().square().mean())
        risks.append(residual - 1 + 2 * divergence / units.numel())
    return risks


def _checked_temperatures(value, name):
    temperatures = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if (
        temperatures.ndim != 1
        or len(temperatures) == 0
        or not np.all(np.isfinite(temperatures) & (temperatures > 0))
    ):
        raise ValueError(f"{name} must be positive and finite; got {value!r}.")
    return temperatures


def _checked(noisy, noise_variance, patch_size, search_distance, step):
    """The image (float64) and the noise's standard deviation, or a ValueError."""
    image = check_image(noisy)
    for name, value, low in [
        ("patch_size", patch_size, 1),
        ("search_distance", search_distance, 0),
        ("step", step, 1),
    ]:
        if not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    if patch_size % 2 == 0:
        raise ValueError(f"patch_size must be odd (patches centred on a pixel); got {patch_size}.")
    if step > patch_size:
        raise ValueError(
            f"step={step} must be at most patch_size={patch_size}, so that every pixel lies "
            "in a reference patch."
        )
    if min(image.shape) < patch_size:
        raise ValueError(
            f"The image ({image.shape[0]} x {image.shape[1]}) is smaller than one patch "
            f"(patch_size={patch_size})."
        )
    shown = noise_shown(image)
    if noise_variance is None:
        return image, shown
    if not isinstance(noise_variance, Real) or not (
        np.isfinite(noise_variance) and noise_variance >= 0
    ):
        raise ValueError(f"noise_variance must be non-negative and finite; got {noise_variance!r}.")
    sigma = math.sqrt(noise_variance)
    if sigma > NOISE_EXCESS * shown:
        warnings.warn(
            f"denoise_image_wiener: noise_variance={noise_variance:.4g} is the noise of "
            f"standard deviation {sigma:.4g}, but the image shows at most about {shown:.4g} "
            "(its 2 x 2 pixel details); the result will be smoothed beyond its noise. "
            "Check noise_variance.",
            UserWarning,
            stacklevel=3,
        )
    return image, sigma


def _central_crop(image, size):
    rows, cols = min(size, image.shape[0]), min(size, image.shape[1])
    top, left = (image.shape[0] - rows) // 2, (image.shape[1] - cols) // 2
    return image[top : top + rows, left : left + cols]
