"""The Wiener image denoiser: two stages of gated affine experts, and its SURE."""

import math
import time
import warnings
from numbers import Real

import numpy as np
import torch
from sklearn.utils import check_random_state

from ..attention._device import resolve_device
from ._nonlocal_fit import _NOISE_EXCESS, _check_image, _noise_shown
from ._wiener_head import wiener_stage


def denoise_image_wiener(
    noisy,
    noise_variance=None,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    step=2,
    crop_size=96,
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
    temperature : float or sequence of float, default=2.0
        ``T`` of the weights ``softmax(-||g_i - g_r||^2 / (k^2 T sigma^2))``
        in both stages. A sequence: the one of lowest Monte-Carlo SURE on a
        central crop of ``crop_size`` (see :func:`wiener_sure`).
    step : int, default=2
        Distance between reference patches; 1 takes every patch (about
        three times slower, within 0.05 dB on scikit-image's camera).
    crop_size : int, default=96
        Side of the crop on which a sequence of temperatures is compared.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds SURE's probes when ``temperature`` is a sequence.
    verbose : int, default=0
        Print each stage's time, and the temperatures' SURE.

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
    scale. First stage: the attention-weighted covariance ``C`` of the noisy
    patches of a group gives ``A = (C - I)_+ C^{-1}``, negative eigenvalues
    of ``C - I`` clipped at zero; second stage: the covariance ``C_g`` of the
    first estimate's patches gives ``A = C_g (C_g + I)^{-1}``. A constant
    image is returned exactly; as ``sigma -> 0`` the weights concentrate on
    each reference patch and the result tends to the image. Cost: per
    reference, ``(2 d + 1)^2`` patch distances and a ``k^2 x k^2``
    covariance, eigendecomposition (first stage) or solve (second) and
    ``(2 d + 1)^2`` affine maps, references every ``step`` pixels; memory is
    bounded by tiles of 32 x 32 references. On 2 CPU cores a 512 x 512
    image takes about 13 s at the defaults (benchmarks, section 12).

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
    temperatures = np.atleast_1d(np.asarray(temperature, dtype=np.float64))
    if temperatures.ndim != 1 or not np.all(np.isfinite(temperatures) & (temperatures > 0)):
        raise ValueError(f"temperature must be positive and finite; got {temperature!r}.")
    settings = {"patch_size": patch_size, "search_distance": search_distance, "step": step}
    if len(temperatures) > 1:
        crop = _central_crop(image, crop_size)
        risks = [
            wiener_sure(
                crop, sigma**2, temperature=t, device=device, random_state=random_state, **settings
            )
            for t in temperatures
        ]
        if verbose:
            for t, risk in zip(temperatures, risks, strict=True):
                print(f"[denoise_image_wiener] temperature {t:g}: SURE {risk:.4g}")
        temperatures = temperatures[[int(np.argmin(risks))]]
    centre = float(image.mean())
    units = torch.as_tensor((image - centre) / sigma, dtype=torch.float32, device=torch_device)
    denoised = _two_stages(units, float(temperatures[0]), settings, verbose)
    return denoised.cpu().double().numpy() * sigma + centre


def wiener_sure(
    noisy,
    noise_variance,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    step=2,
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
    noise_variance : float
        ``sigma^2 > 0``.
    patch_size, search_distance, temperature, step
        As in :func:`denoise_image_wiener` (one temperature).
    epsilon : float, default=1e-3
        The probe's step, in units of the noise.
    device : str, default="auto"
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
    >>> error = np.mean((denoise_image_wiener(noisy, 0.01) - clean) ** 2)
    >>> bool(abs(estimate - error) < 0.2 * error)
    True
    """
    image, sigma = _checked(noisy, noise_variance, patch_size, search_distance, step)
    if not sigma > 0:
        raise ValueError(f"noise_variance must be positive; got {noise_variance}.")
    torch_device = resolve_device(device)
    settings = {"patch_size": patch_size, "search_distance": search_distance, "step": step}
    centre = float(image.mean())
    # float64: the divergence is a difference of two runs at a step of 1e-3
    units = torch.as_tensor((image - centre) / sigma, dtype=torch.float64, device=torch_device)
    probe = check_random_state(random_state).standard_normal(image.shape)
    probe = torch.as_tensor(probe, dtype=torch.float64, device=torch_device)
    denoised = _two_stages(units, float(temperature), settings, 0)
    nudged = _two_stages(units + epsilon * probe, float(temperature), settings, 0)
    divergence = float((probe * (nudged - denoised)).sum()) / epsilon
    n_pixels = image.size
    # in units of the noise (sigma = 1), then back to the image's
    risk = float((denoised - units).square().mean()) - 1 + 2 * divergence / n_pixels
    return risk * sigma**2


def _two_stages(units, temperature, settings, verbose):
    """Both stages on an image in units of its noise; the second's guide is the first's output."""
    guide, seconds = units, []
    for second in (False, True):
        start = time.perf_counter()
        guide = wiener_stage(units, guide, second=second, temperature=temperature, **settings)
        seconds.append(time.perf_counter() - start)
    if verbose:
        print(f"[denoise_image_wiener] first stage {seconds[0]:.1f} s, second {seconds[1]:.1f} s")
    return guide


def _checked(noisy, noise_variance, patch_size, search_distance, step):
    """The image (float64) and the noise's standard deviation, or a ValueError."""
    image = _check_image(noisy)
    for name, value, low in [
        ("patch_size", patch_size, 1),
        ("search_distance", search_distance, 0),
        ("step", step, 1),
    ]:
        if not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    if patch_size % 2 == 0:
        raise ValueError(f"patch_size must be odd (patches centred on a pixel); got {patch_size}.")
    if min(image.shape) < patch_size:
        raise ValueError(
            f"The image ({image.shape[0]} x {image.shape[1]}) is smaller than one patch "
            f"(patch_size={patch_size})."
        )
    shown = _noise_shown(image)
    if noise_variance is None:
        return image, shown
    if not isinstance(noise_variance, Real) or not (
        np.isfinite(noise_variance) and noise_variance >= 0
    ):
        raise ValueError(f"noise_variance must be non-negative and finite; got {noise_variance!r}.")
    sigma = math.sqrt(noise_variance)
    if sigma > _NOISE_EXCESS * shown:
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
