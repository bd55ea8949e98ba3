"""Fitting the non-local key-norm head to one noisy image, and applying it.

The head (``_nonlocal_head``) has ``(2 d + 1)^2 + 4`` numbers to learn. They
are fitted on the noisy image itself by Monte-Carlo SURE on random crops
(Adam), from plain non-local means, which is kept instead if it scores better
on a fixed set of evaluation crops.
"""

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params
from tqdm.auto import tqdm

from ..attention._device import resolve_device
from ._nonlocal_head import margin, nonlocal_head, nonlocal_sure, start_parameters
from ._validation import (
    NOISE_EXCESS,
    check_image,
    clipped,
    in_the_same_units,
    integer_image,
    noise_shown,
    with_model,
)

# Crops on which the start and the trained head are compared, each with its
# own probe, the same for both (paired, so their difference has little noise).
_EVALUATION_CROPS = 8
# Training runs in float64 where the image spans more than this many noise
# standard deviations: SURE's divergence is a difference of two outputs
# nudged by 1e-3 noise units, which float32 resolves only to about 6e-8
# times the outputs' size (on camera with noise 1e-5 of its range, float32
# read the error at 0.32 times the noise variance where it was 1.0).
_FLOAT32_MAX_RANGE = 1e3

# Output values held at once when applying the head: about 2**23 per tensor
# of the (2 d + 1)^2 offsets, some 32 MiB in float32, whatever the image size.
_VALUES_PER_TILE = 2**23


@dataclass(frozen=True, eq=False)  # eq=False: compared by identity, as arrays have no truth value
class NonLocalHead:
    """A fitted non-local key-norm head: trainable non-local means.

    Returned by :func:`denoise_image_nonlocal`; :meth:`apply` denoises other
    images with the same parameters. The parameters hold for the image in
    units of the noise (mean subtracted, divided by ``sqrt(noise_variance)``).

    Parameters
    ----------
    patch_size : int
        Odd side ``k`` of the compared patches.
    search_distance : int
        ``d``: each patch's prompt is the patches centred up to ``d`` pixels
        away along each axis.
    noise_variance : float
        The pixels' noise variance ``sigma^2`` it was fitted for.
    bandwidth : float
        ``g`` in the weights ``exp(-g/2 ||z - z_i||^2 + b_delta)``, patches in
        units of ``sigma``; non-local means' ``h^2 / sigma^2`` is ``2 / (g k^2)``
        with its distance the mean squared pixel difference.
    offset_bias : ndarray of shape (2 d + 1, 2 d + 1)
        ``b_delta``, the learned prior over the search window's offsets.
    value_scale, skip, intercept : float
        ``v``, ``lambda``, ``c`` in ``lambda y(u) + v sum abar y(u + delta) + c``.
    kept : {"trained", "start"}
        Which won on the evaluation crops: the trained head or plain
        non-local means at ``h = sigma``.
    sure : float
        The kept head's loss on the evaluation crops, per pixel, relative to
        ``sigma^2``: Monte-Carlo SURE, or the squared error with ``clean``.
    start_sure : float
        The same for the start.
    n_iter : int
        Adam steps run.
    """

    patch_size: int
    search_distance: int
    noise_variance: float
    bandwidth: float
    offset_bias: np.ndarray
    value_scale: float
    skip: float
    intercept: float
    kept: str
    sure: float
    start_sure: float
    n_iter: int

    def apply(self, image, *, device="auto"):
        """Denoise a grayscale ``image`` with these parameters.

        Parameters
        ----------
        image : array-like of shape (height, width)
            Noisy image, white Gaussian noise of variance ``noise_variance``.
        device : {"auto", "cpu", "cuda"} or str, default="auto"
            Where to compute.

        Returns
        -------
        ndarray of shape (height, width)
            The denoised image, float64.
        """
        image = check_image(image)
        torch_device = resolve_device(device)
        scale = math.sqrt(self.noise_variance)
        centre = float(image.mean())
        parameters = {
            "log_bandwidth": math.log(self.bandwidth),
            "offset_bias": self.offset_bias.ravel(),
            "value_scale": self.value_scale,
            "skip": self.skip,
            "intercept": self.intercept,
        }
        parameters = {
            name: torch.as_tensor(np.asarray(value), dtype=torch.float32, device=torch_device)
            for name, value in parameters.items()
        }
        normalised = torch.as_tensor((image - centre) / scale, dtype=torch.float32)
        padded = _padded(normalised.to(torch_device), margin(self.patch_size, self.search_distance))
        with torch.no_grad():
            denoised = _apply_in_tiles(padded, parameters, self.patch_size, self.search_distance)
        return denoised.cpu().numpy().astype(np.float64) * scale + centre


@validate_params(
    {
        "image": ["array-like"],
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
        "patch_size": [Interval(Integral, 1, None, closed="left")],
        "search_distance": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "crop_size": [Interval(Integral, 8, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "clean": ["array-like", None],
        "device": [StrOptions({"auto", "cpu", "cuda"}), str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "preserve_range": ["boolean", None],
        "return_model": ["boolean", None],
    },
    prefer_skip_nested_validation=True,
)
def denoise_image_nonlocal(
    image,
    noise_variance,
    *,
    patch_size=5,
    search_distance=6,
    max_iter=100,
    crop_size=96,
    learning_rate=0.05,
    clean=None,
    device="auto",
    random_state=None,
    verbose=0,
    preserve_range=None,
    return_model=None,
):
    """Denoise a grayscale image with trainable non-local means, fitted on the image itself.

    A key-norm softmax head whose prompt is each patch's search window (this
    package's extension of the paper's heads): its weights are non-local
    means', ``exp(-g/2 ||z - z_i||^2 + b_delta)``, with a learned bandwidth
    ``g`` and a learned prior ``b_delta`` over the ``(2 d + 1)^2`` offsets;
    each patch's estimate ``lambda z + v sum_i a_i z_i + c`` is averaged over
    the patches that hold a pixel. The head is trained by Monte-Carlo SURE
    on the noisy image (no clean image needed), from plain non-local means
    at ``h = sigma``, and that start is kept if it scores better.

    Parameters
    ----------
    image : array-like of shape (height, width)
        The noisy image, with white Gaussian noise of variance ``noise_variance``.
    noise_variance : float
        ``sigma^2`` of the pixels' noise (in the image's units).
    patch_size : int, default=5
        Odd side ``k`` of the compared patches (scikit-image's
        ``denoise_nl_means`` recommends 5).
    search_distance : int, default=6
        ``d``: each patch attends over the ``(2 d + 1)^2`` patches centred up
        to ``d`` pixels away along each axis (scikit-image's
        ``patch_distance``).
    max_iter : int, default=100
        Adam steps, each on one random crop; 0 keeps the start.
    crop_size : int, default=96
        Side of each step's crop of output pixels (cut to the image's).
    learning_rate : float, default=0.05
        Adam's step size.
    clean : array-like of shape (height, width), default=None
        The clean image, to fit on the squared error instead of SURE (for
        studies, not for real use).
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds the crops and the probes.
    verbose : int, default=0
        Show a progress bar over the training steps (tqdm, on standard
        error) and print the loss every tenth of them.
    preserve_range : bool or None, default=None
        For an integer image (``uint8`` and the like): ``True`` denoises it
        in its own units (``noise_variance`` too) and returns floats within
        the range its type holds; ``False`` takes it as scikit-image's
        denoisers do, floats in [0, 1] ([-1, 1] for a signed type) with
        ``noise_variance`` in those units, and returns floats in that range.
        ``None``: ``True``, with a ``FutureWarning`` (the default will become
        ``False``). Float images are taken as they are.
        ``clean`` is taken in the same units as the image.
    return_model : bool or None, default=None
        Return ``(denoised, head)`` (``True``) or the denoised image alone
        (``False``), as the other image functions and scikit-image's
        denoisers do. ``None``: the pair, with a ``FutureWarning`` (the
        default will become ``False``).

    Returns
    -------
    denoised : ndarray of shape (height, width)
        The denoised image, float64.
    head : NonLocalHead
        The fitted head (:meth:`NonLocalHead.apply` denoises other images),
        with ``return_model=True``.

    See Also
    --------
    denoise_image : Any denoiser of the package on patches, with a global prompt.
    skimage.restoration.denoise_nl_means : Non-local means with a set bandwidth.

    Notes
    -----
    A ``noise_variance`` whose standard deviation is more than twice what
    the image shows (the median absolute diagonal Haar detail over 0.6745,
    which texture only raises) is warned about: it cannot be the image's
    noise, and the result is smoothed beyond it.

    The image is handled in units of its noise (mean subtracted, divided by
    ``sigma``). Training runs in float64 where the image spans more than
    1,000 of them, so that the divergence's finite difference stays exact,
    and in float32 elsewhere. Borders are reflected. Each pass costs
    ``O((2 d + 1)^2)`` per pixel (sliding sums; see the user guide,
    "Trainable non-local means"); a training step makes two on a crop of
    ``crop_size^2`` pixels, one of them on the noisy crop nudged along a
    random probe for SURE's divergence (Ramani, Blu & Unser, 2008). Memory:
    about 2**23 values per tensor of offsets when applying the head, and
    some ``(2 d + 1)^2 (crop_size + 4 r)^2`` per tensor of a training step
    (``r = patch_size // 2``).

    References
    ----------
    A. Buades, B. Coll and J.-M. Morel, "A non-local algorithm for image
    denoising", CVPR 2005. S. Ramani, T. Blu and M. Unser, "Monte-Carlo SURE:
    a black-box optimization of regularization parameters for general
    denoising algorithms", IEEE Trans. Image Processing 17(9), 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.image import denoise_image_nonlocal
    >>> rng = np.random.default_rng(0)
    >>> clean = np.kron(rng.integers(0, 4, size=(6, 6)) / 3, np.ones((8, 8)))  # 48 x 48
    >>> noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    >>> denoised, head = denoise_image_nonlocal(
    ...     noisy, 0.01, max_iter=20, random_state=0, return_model=True
    ... )
    >>> bool(np.mean((denoised - clean) ** 2) < np.mean((noisy - clean) ** 2) / 4)
    True
    """
    image, output_range = integer_image(image, preserve_range, "denoise_image_nonlocal")
    if clean is not None:
        clean = in_the_same_units(clean, output_range)
    image = check_image(image)
    if not np.isfinite(noise_variance):
        raise ValueError(f"noise_variance must be finite; got {noise_variance}.")
    if patch_size % 2 == 0:
        raise ValueError(f"patch_size must be odd (patches centred on a pixel); got {patch_size}.")
    if clean is not None:
        clean = check_image(clean, "clean")
        if clean.shape != image.shape:
            raise ValueError(f"clean has shape {clean.shape}, the image {image.shape}.")
    torch_device = resolve_device(device)
    rng = check_random_state(random_state)
    scale = math.sqrt(noise_variance)
    shown = noise_shown(image)
    if scale > NOISE_EXCESS * shown:
        warnings.warn(
            f"denoise_image_nonlocal: noise_variance={noise_variance:.4g} is the noise "
            f"of standard deviation {scale:.4g}, but the image shows at most about "
            f"{shown:.4g} (its 2 x 2 pixel details); the result will be smoothed "
            "beyond its noise. Check noise_variance.",
            UserWarning,
            stacklevel=2,
        )
    centre = float(image.mean())

    wide = np.abs(image - centre).max() / scale > _FLOAT32_MAX_RANGE
    dtype = torch.float64 if wide else torch.float32

    def normalised(array):
        return torch.as_tensor((array - centre) / scale, dtype=dtype).to(torch_device)

    m = margin(patch_size, search_distance)
    rows = _reflected(image.shape[0], m, torch_device)
    cols = _reflected(image.shape[1], m, torch_device)
    padded = normalised(image)[rows][:, cols]
    target = None if clean is None else normalised(clean)
    crop = min(crop_size, *image.shape)
    start = start_parameters(patch_size, search_distance, torch_device, dtype)

    def loss(parameters, top, left, probe_source):
        region_rows, region_cols = slice(top, top + crop + 2 * m), slice(left, left + crop + 2 * m)
        region = padded[region_rows, region_cols]
        if target is None:
            # the probe laid out as the region, reflected pixels included
            probe = probe_source[rows[region_rows]][:, cols[region_cols]]
            return nonlocal_sure(region, probe, parameters, patch_size, search_distance)
        denoised = nonlocal_head(region, parameters, patch_size, search_distance)
        return ((denoised - target[top : top + crop, left : left + crop]) ** 2).mean()

    def draw():  # a random crop and a probe over the whole image
        top = int(rng.randint(image.shape[0] - crop + 1))
        left = int(rng.randint(image.shape[1] - crop + 1))
        probe = torch.as_tensor(rng.standard_normal(image.shape), dtype=dtype)
        return top, left, probe.to(torch_device)

    trained = {name: value.clone().requires_grad_(True) for name, value in start.items()}
    optimiser = torch.optim.Adam(trained.values(), lr=learning_rate)
    # the step size decays to 0 along a cosine: one crop's SURE is a noisy
    # estimate of the image's, and the last steps average that noise out
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, max(max_iter, 1))
    report_every = max(1, max_iter // 10)
    # a progress bar on standard error beside the loss lines, as the
    # estimators' solvers show with verbose
    with tqdm(total=max_iter, desc="denoise_image_nonlocal", disable=not verbose) as bar:
        for iteration in range(max_iter):
            value = loss(trained, *draw())
            optimiser.zero_grad()
            value.backward()
            optimiser.step()
            schedule.step()
            bar.update()
            if verbose and (iteration % report_every == 0 or iteration == max_iter - 1):
                criterion = "SURE" if target is None else "squared error"
                print(
                    f"[denoise_image_nonlocal] step {iteration + 1}/{max_iter}: "
                    f"{criterion} {float(value.detach()):.4f}"
                )
    trained = {name: value.detach() for name, value in trained.items()}

    crops = [draw() for _ in range(_EVALUATION_CROPS)]
    candidates = {"start": start, "trained": trained} if max_iter > 0 else {"start": start}
    with torch.no_grad():
        scores = {
            name: float(np.mean([float(loss(parameters, *where)) for where in crops]))
            for name, parameters in candidates.items()
        }
    kept = min(scores, key=scores.get)  # the start on a tie
    parameters = trained if kept == "trained" else start
    side = 2 * search_distance + 1
    head = NonLocalHead(
        patch_size=int(patch_size),
        search_distance=int(search_distance),
        noise_variance=float(noise_variance),
        bandwidth=float(parameters["log_bandwidth"].exp()),
        offset_bias=parameters["offset_bias"].cpu().numpy().astype(np.float64).reshape(side, side),
        value_scale=float(parameters["value_scale"]),
        skip=float(parameters["skip"]),
        intercept=float(parameters["intercept"]),
        kept=kept,
        sure=scores[kept],
        start_sure=scores["start"],
        n_iter=int(max_iter),
    )
    denoised = clipped(head.apply(image, device=device), output_range)
    return with_model(denoised, head, return_model, "denoise_image_nonlocal")


def _apply_in_tiles(padded, parameters, patch_size, search_distance):
    """The head on every pixel of a padded image, in square tiles of output
    holding about ``_VALUES_PER_TILE`` values per tensor of offsets."""
    m = margin(patch_size, search_distance)
    height, width = padded.shape[0] - 2 * m, padded.shape[1] - 2 * m
    offsets = (2 * search_distance + 1) ** 2
    tile = max(16, int(math.sqrt(_VALUES_PER_TILE / offsets)) - 4 * (patch_size // 2))
    denoised = padded.new_empty((height, width))
    for top in range(0, height, tile):
        for left in range(0, width, tile):
            rows, cols = min(tile, height - top), min(tile, width - left)
            region = padded[top : top + rows + 2 * m, left : left + cols + 2 * m]
            denoised[top : top + rows, left : left + cols] = nonlocal_head(
                region, parameters, patch_size, search_distance
            )
    return denoised


def _reflected(length: int, width: int, device) -> torch.Tensor:
    """Indices of ``length`` pixels with ``width`` more reflected each side
    (the border pixel not repeated, as in ``numpy.pad(mode="reflect")``, for
    any width)."""
    return torch.as_tensor(np.pad(np.arange(length), width, mode="reflect"), device=device)


def _padded(image: torch.Tensor, width: int) -> torch.Tensor:
    """``image`` with ``width`` reflected pixels each side."""
    rows = _reflected(image.shape[0], width, image.device)
    return image[rows][:, _reflected(image.shape[1], width, image.device)]
