"""The Wiener image denoiser: gated affine experts on a first stage's pilot, chosen by SURE."""

import math
from numbers import Integral, Real

import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params
from tqdm.auto import tqdm

from ..attention._device import resolve_device
from ._collaborative import collaborative_stage
from ._colour import Channels, OpponentTransform, channel_variances
from ._sure_blend import blend_by_sure, crop_slices, rademacher_probe
from ._validation import clipped, integer_image, is_dask_array
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
from ._wiener_dask import denoised_lazily, lazy_planes_and_noise, receptive_radius
from ._wiener_head import wiener_stage

# The second stage's temperature by default (see the docstring).
SECOND_TEMPERATURE = 0.25
# SURE's finite-difference step, in units of the noise: the collaborative
# stages' block matching and thresholds jump as the probe moves them, and
# the estimate's variance grows as 1 / step (see wiener_sure).
SURE_STEP = 0.1
# Probes per crop: each is one more run of every stage on the crop, and
# divides the divergence's variance.
SURE_PROBES = 2
# The collaborative stages' group sizes: BM3D's (16 blocks of
# THRESHOLD_BLOCK x THRESHOLD_BLOCK in a thresholding group, 32 in a Wiener one).
THRESHOLD_GROUP, WIENER_GROUP = 16, 32
# The thresholding pilot's block transform, BM3D's: against the DCT it
# raised the pilot by 0.16 and 0.30 dB on coins and page at noise 0.1, and
# the best collaborative expert on it by 0.13 and 0.10 dB.
PILOT_BASIS = "bior1.5"
# The collaborative experts' shrinkage variances compared by default.
WIENER_VARIANCES = (1.0, 0.5, 0.25)


@validate_params(
    {
        **SHARED_CONSTRAINTS,
        "noise_variance": [Interval(Real, 0, None, closed="left"), "array-like", None],
        "channel_axis": [Integral, None],
        "crop_size": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def denoise_image_wiener(
    noisy,
    noise_variance=None,
    *,
    patch_size=5,
    search_distance=7,
    temperature=2.0,
    second_temperature=SECOND_TEMPERATURE,
    first_stage="threshold",
    collaborative_weight="auto",
    wiener_variance=WIENER_VARIANCES,
    block_search_distance=19,
    pilot_search_distance=19,
    step=3,
    crop_size=192,
    device="auto",
    random_state=None,
    verbose=0,
    preserve_range=None,
    channel_axis=None,
):
    """Denoise a grayscale or colour image with gated affine experts over similar patches.

    A pilot estimate of the image (a first stage) gates and fits two kinds
    of experts, blended in a second stage:

    - the gated Wiener expert: each reference patch attends over the
      patches of its search window (non-local means' weights, a key-norm
      softmax head) on the pilot; the weights give a mean and a covariance,
      and every patch of the window is estimated by that group's empirical
      Wiener map, an affine expert (NL-Bayes);
    - the collaborative Wiener experts: the 32 blocks nearest each
      reference block on the pilot, shrunk coefficient by coefficient in a
      3-D transform by the pilot's energies ``G^2``, ``G^2 / (G^2 + v)``
      (BM3D's second stage at ``v = 1``), a linear map of the group given
      the pilot; one expert for each ``v`` of ``wiener_variance``.

    The blend's weights are those of lowest Stein's unbiased risk estimate
    (SURE) on crops of the image. Each pixel averages the estimates of the
    patches that hold it (user
    guide, "Images: gated affine experts").

    A colour image (``channel_axis``) is whitened channel by channel and
    turned into a luminance and colour differences, CBM3D's opponent
    transform (the DCT over the channels), whose new channels carry
    independent noise of variance 1; each is denoised so, by its own blend,
    and the result turned back (user guide, "Colour images").

    Parameters
    ----------
    noisy : array-like of shape (height, width), or with a channel axis
        The noisy image, with white Gaussian noise. A ``dask.array``
        (larger than memory, or spread over a cluster) is denoised chunk by
        chunk (see Notes) and a dask array returned.
    noise_variance : float or sequence of float, default=None
        ``sigma^2`` of the noise, in the image's units; a sequence gives one
        for each channel of a colour image. ``None``: estimated
        from the image, as the square of the median absolute diagonal Haar
        detail over 0.6745 (Donoho & Johnstone, 1994), which texture can
        only raise: texture at the pixel scale (a +-1 checkerboard) is taken
        for noise, and where the estimate is 90% of the image's variance or
        more a warning says so, each channel's on its own. ``0``: the image
        (or the channel) is returned unchanged.
    patch_size : int, default=5
        Odd side ``k`` of the gated experts' patches.
    search_distance : int, default=7
        ``d``: each gated group is the ``(2 d + 1)^2`` patches around its
        reference.
    temperature : float, default=2.0
        ``T`` of the Wiener first stage's weights
        ``softmax(-||z_i - z_r||^2 / (k^2 T sigma^2))``.
    second_temperature : float or sequence of float, default=0.25
        ``T`` of the gated expert's weights, computed on the pilot. A
        sequence: the one of lowest Monte-Carlo SURE of the whole denoiser
        on crops (see ``crop_size``; the probes shared by the candidates,
        so that their differences are precise), at a third more search
        time per candidate.
    first_stage : {"threshold", "wiener", "auto"}, default="threshold"
        The pilot. ``"threshold"``: for each reference block of 8 x 8
        pixels, the 16 nearest blocks of its window (``pilot_search_distance``)
        transformed (the 2-D biorthogonal spline wavelet 1.5, Haar across the
        group) and hard-thresholded at 2.7 times each coefficient's noise
        standard deviation (BM3D's first stage). ``"wiener"``: the
        gated Wiener experts on the noisy image, with the clipped map
        ``(C - I)_+ C^{-1}``. ``"auto"``: the one of lower SURE on the crops,
        jointly with the rest (twice the search's time). Images smaller than
        a block use ``"wiener"`` under ``"auto"``.
    collaborative_weight : "auto" or float in [0, 1], default="auto"
        ``w`` of the blend ``(1 - w) gated + w collaborative``, the
        collaborative part itself a blend of the experts of
        ``wiener_variance`` whose weights sum to 1. ``"auto"``: for each
        candidate (first stage, temperature), all the weights of lowest
        SURE on the crops, exactly: SURE is quadratic in the weights, and
        its minimum over the simplex is the stationary point on one of its
        faces; of tied blends, the one with the fewest experts (fewer stage
        runs). A number: the gated expert gets ``1 - w``, and SURE splits
        ``w`` among the collaborative experts. 0 on images smaller than a
        block under ``"auto"``. Neither expert is better on every image
        (user guide, "Images: gated affine experts").
    wiener_variance : float or sequence of float, default=(1.0, 0.5, 0.25)
        ``v`` of the collaborative experts' shrinkage ``G^2 / (G^2 + v)``,
        in units of the noise's variance: 1 is the group's empirical Wiener
        map, and a smaller ``v`` offsets the pilot's energies, which its
        own shrinkage made too small (BM3D's software takes 0.4 on its
        pilot). One pass over the groups gives every expert; at most 7
        distinct positive values.
    block_search_distance : int, default=19
        The collaborative second stage's window: offsets up to this many
        pixels (BM3D's 39 x 39).
    pilot_search_distance : int or sequence of int, default=19
        The thresholding first stage's window. A sequence: the one of lowest
        SURE on the crops, jointly with the rest (each candidate adds a
        first stage and its second stages to the search).
    step : int, default=3
        Distance between reference patches and blocks, at most
        ``patch_size`` (and 8 for the blocks); the Wiener first stage takes
        every ``2 step``-th patch (at most every ``patch_size``-th).
    crop_size : int, default=192
        SURE compares the candidates on four crops, at the centres of the
        image's quadrants, ``crop_size // 2`` on a side (at most a quarter
        of the image's smaller side, but at least 64 pixels where that is
        within half of it, since smaller crops misjudge the blend): one
        ``crop_size`` crop's area spread over the image. On images too small
        for that, on the central crop of ``crop_size``.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where to compute.
    random_state : int, RandomState instance or None, default=None
        Seeds SURE's probe.
    verbose : int, default=0
        Show a progress bar (tqdm, on standard error) over the stage runs,
        and print each candidate's SURE.
    preserve_range : bool or None, default=None
        For an integer image (``uint8`` and the like): ``True`` denoises it
        in its own units (``noise_variance`` too) and returns floats within
        the range its type holds; ``False`` takes it as scikit-image's
        denoisers do, floats in [0, 1] ([-1, 1] for a signed type) with
        ``noise_variance`` in those units, and returns floats in that range.
        ``None``: ``True``, with a ``FutureWarning`` (the default will become
        ``False``). Float images are taken as they are.
    channel_axis : int or None, default=None
        The axis of a colour image's channels (scikit-image's name): ``-1``
        for an image of shape (height, width, channels). ``None``: a
        grayscale image. Any number of channels; three are the opponent
        colour transform.

    Returns
    -------
    ndarray of the shape of ``noisy``
        The denoised image, float64; for a dask array, a dask array (lazy:
        ``.compute()`` it, or store it chunk by chunk).

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
    result is smoothed beyond the image's noise. A three-axis image without
    ``channel_axis``, images smaller than a patch and non-finite pixels are
    a ``ValueError``. The luminance is not used to group the colour
    differences' patches (CBM3D's grouping): their error was the same on
    blocks and larger with the gated expert's weights (user guide).

    The gated expert: the pilot's patches give the weights and the signal
    covariance ``C_g`` of each group, and ``A = C_g (C_g + I)^{-1}`` acts on
    the noisy patches (``mu + A (z_i - mu)``). A constant image is returned
    exactly; as ``sigma -> 0`` the weights concentrate on each reference
    patch, every coefficient clears the threshold, and the result tends to
    the image. SURE's divergence is a finite difference at a step of 0.1
    noise standard deviations along two Rademacher probes per crop (block
    matching and thresholds jump as the probe moves them, and the
    estimate's variance grows as the step shrinks): the weights it picks
    vary from probe to probe (``random_state`` fixes them). Memory is
    bounded by tiles of 32 x 32 references (gated) and bands of 8 reference
    rows (collaborative). Cost and PSNR against BM3D: user guide, "Images:
    gated affine experts", and ``benchmarks/README.md``.

    A dask array: SURE chooses the blend on the same crops as for the image
    in memory, and each chunk is denoised with a margin of its neighbours'
    pixels as wide as the two stages' reach (twice ``2 D + 7`` at the
    defaults, ``D = 19``: 90 pixels), the chunks rechunked to start on the
    reference grid: the result equals the image's in memory up to float
    rounding. It reads the image once for the channels' means (which also
    finds non-finite pixels), and estimates an unknown noise on the crops
    rather than on the whole image.

    References
    ----------
    M. Lebrun, A. Buades and J.-M. Morel, "A nonlocal Bayesian image
    denoising algorithm", SIAM J. Imaging Sciences 6(3), 2013 (NL-Bayes).
    K. Dabov, A. Foi, V. Katkovnik and K. Egiazarian, "Image denoising by
    sparse 3-D transform-domain collaborative filtering", IEEE Trans. Image
    Processing 16(8), 2007 (BM3D's two stages, its settings for the
    collaborative stages).

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
    noisy, output_range = integer_image(noisy, preserve_range, "denoise_image_wiener")
    lazy = is_dask_array(noisy)
    channels = Channels(noisy, channel_axis)
    given = channel_variances(noise_variance, channels.count)
    if lazy:
        planes, sigmas, centres, lazy_crops = lazy_planes_and_noise(
            channels.planes, given, patch_size, search_distance, step, crop_size
        )
    else:
        checked = [
            checked_image_and_noise(plane, variance, patch_size, search_distance, step)
            for plane, variance in zip(channels.planes, given, strict=True)
        ]
        planes, sigmas = [plane for plane, _ in checked], [sigma for _, sigma in checked]
        centres = [float(plane.mean()) for plane in planes]
    image_shape = planes[0].shape
    fits_blocks = min(image_shape) >= THRESHOLD_BLOCK
    first_stages = _first_stage_candidates(
        checked_first_stages(first_stage, fits_blocks, image_shape, auto=True),
        checked_distances(pilot_search_distance, "pilot_search_distance"),
    )
    weight = checked_weight(collaborative_weight, fits_blocks, image_shape, auto=True)
    variances = checked_variances(wiener_variance)
    first = checked_positive(temperature, "temperature")
    if len(first) != 1:
        raise ValueError(f"temperature must be one number; got {temperature!r}.")
    second = checked_positive(second_temperature, "second_temperature")
    if weight == 1.0:  # no gated second stage: its temperature plays no part
        second = second[:1]
    if weight == 0.0:  # no collaborative expert: nor its variances
        variances = variances[:1]
    searched = weight is None or len(second) * len(first_stages) * len(variances) > 1
    if searched and crop_size < patch_size:
        raise ValueError(
            f"crop_size must be an integer of at least patch_size={patch_size}; got {crop_size!r}."
        )
    transform = OpponentTransform(centres, sigmas)
    search = {
        "searched": searched,
        "first_stages": first_stages,
        "second": second,
        "variances": variances,
        "weight": weight,
        "settings": _settings(patch_size, search_distance, block_search_distance, step, first[0]),
        "rng": check_random_state(random_state),
        "device": resolve_device(device),
        # SURE printed per pixel: in the image's units for a grayscale image,
        # in those of the noise for a colour one (its new channels are whitened)
        "sure_units": ("", transform.sigmas[0] ** 2)
        if channels.count == 1
        else (" (in units of the noise's variance)", 1.0),
    }
    count = len(transform.noisy)
    per_first = 1 + (weight != 0.0) + (weight != 1.0) * len(second)
    runs = (1 + SURE_PROBES) * len(first_stages) * per_first if searched else 0
    with tqdm(
        total=(runs + 3 * (not lazy)) * count, desc="denoise_image_wiener", disable=not verbose
    ) as bar:
        crops = []
        if searched and count:
            if lazy:  # read once, with the noise
                crops = lazy_crops
            else:
                where = crop_slices(image_shape, crop_size)
                crops = [[plane[at] for plane in planes] for at in where]
            crops = [transform.opponents(crop) for crop in crops]
        # each new channel on its own, its groups matched on itself: matched on
        # the denoised luminance (CBM3D's grouping) the chroma channels' error
        # moved by -6% to +10% (blocks) or grew by 13-100% (the gated expert's
        # weights too, whose temperature is the chroma's; user guide)
        choices = [
            _blend_choice(
                [crop[index] for crop in crops], search, bar, verbose, _label(index, count)
            )
            for index in range(count)
        ]

        def denoised_planes(planes, bar=None):
            opponents = transform.opponents(planes) if count else []
            estimates = [
                _denoised(_tensor(opponent, search), choice, variances, search["settings"], bar)
                for opponent, choice in zip(opponents, choices, strict=True)
            ]
            return transform.restored([e.cpu().double().numpy() for e in estimates], planes)

        if lazy:
            depth = receptive_radius(search["settings"], first_stages, weight, patch_size)
            result = denoised_lazily(noisy, channels, denoised_planes, depth, _alignment(search))
        else:
            result = channels.image(denoised_planes(planes, bar))
    return clipped(result, output_range)


def _tensor(array, search):
    return torch.as_tensor(array, dtype=torch.float32, device=search["device"])


def _blend_choice(crops, search, bar, verbose, label):
    """The blend of lowest SURE on a channel's ``crops`` (float64 arrays in
    units of its noise), or the one given where nothing is searched:
    ``(first stage, second temperature, (gated weight, collaborative weights))``."""
    if not search["searched"]:
        weight = search["weight"]
        return (search["first_stages"][0], float(search["second"][0]), (1 - weight, (weight,)))
    tensors, probes = [], []
    for crop in crops:
        tensors.append(_tensor(crop - crop.mean(), search))
        probes.append(
            [
                _tensor(rademacher_probe(search["rng"], crop.shape), search)
                for _ in range(SURE_PROBES)
            ]
        )
    risks = _sure_by_candidates(
        tensors,
        probes,
        search["first_stages"],
        search["second"],
        search["variances"],
        search["weight"],
        search["settings"],
        bar,
    )
    if verbose:
        for ((stage, window), t, (gated, collaborative)), risk in risks.items():
            where = "" if window is None else f" (window {window})"
            shares = ", ".join(
                f"{w:.2f} at v={v:g}"
                for v, w in zip(search["variances"], collaborative, strict=True)
            )
            bar.write(
                f"[denoise_image_wiener]{label} first stage {stage}{where}, gated weight "
                f"{gated:.2f} at temperature {t:g}, collaborative weights {shares}: "
                f"SURE{search['sure_units'][0]} {risk * search['sure_units'][1]:.4g}"
            )
    return min(risks, key=risks.get)


def _alignment(search):
    """The reference grids' common period: chunks starting at its multiples
    place their references where the whole image's are."""
    settings = search["settings"]
    steps = [min(settings["step"], THRESHOLD_BLOCK), settings["step"]]
    if any(stage == "wiener" for stage, _ in search["first_stages"]):
        steps.append(min(2 * settings["step"], settings["patch_size"]))
    return math.lcm(*steps)


def _label(index, count):
    if count == 1:
        return ""
    return " (luminance)" if index == 0 else f" (chroma channel {index})"


def _settings(patch_size, search_distance, block_search_distance, step, first_temperature):
    return {
        "patch_size": patch_size,
        "search_distance": search_distance,
        "block_search_distance": int(block_search_distance),  # checked by validate_params
        "step": step,
        "first_temperature": float(first_temperature),
    }


def _denoised(units, choice, variances, settings, bar=None):
    """The denoiser for one ``(first stage, second temperature, (gated
    weight, collaborative weights))`` on an image in units of its noise, the
    collaborative weights one for each of ``variances``; experts of weight
    0 are not run."""
    stage, temperature, (gated_weight, collaborative_weights) = choice
    guide = _first_stage(units, stage, settings)
    _advance(bar)
    denoised = torch.zeros_like(units)
    if gated_weight > 0:
        denoised += gated_weight * _second_stage(units, guide, temperature, settings)
    _advance(bar)
    kept = [(v, w) for v, w in zip(variances, collaborative_weights, strict=True) if w > 0]
    if kept:
        experts = _collaborative_second(units, guide, [v for v, _ in kept], settings)
        for expert, (_, w) in zip(experts, kept, strict=True):
            denoised += w * expert
    _advance(bar)
    return denoised


def _first_stage(units, first_stage, settings):
    """The pilot the second stage is gated and fitted on, for a ``(stage,
    window)`` pair: BM3D's hard thresholding over offsets up to ``window``,
    or the clipped empirical Wiener map over the gated window."""
    stage, window = first_stage
    if stage == "threshold":
        return _blocks(units, None, "threshold", window, THRESHOLD_GROUP, settings)
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
    """The gated second stage: attention over the window, a Gaussian expert per group."""
    return wiener_stage(
        units,
        guide,
        second=True,
        patch_size=settings["patch_size"],
        search_distance=settings["search_distance"],
        temperature=temperature,
        step=settings["step"],
    )


def _collaborative_second(units, guide, variances, settings):
    """The collaborative second stage, one estimate for each shrinkage
    variance (BM3D's Wiener filter of the groups at 1): (k, H, W)."""
    window = settings["block_search_distance"]
    return _blocks(units, guide, "wiener", window, WIENER_GROUP, settings, list(variances))


def _blocks(units, guide, rule, window, group_size, settings, variances=1.0):
    """A collaborative stage on BM3D's 8 x 8 blocks, references every ``step``
    pixels (at most every block)."""
    return collaborative_stage(
        units,
        guide,
        rule=rule,
        block_size=THRESHOLD_BLOCK,
        search_distance=window,
        group_size=group_size,
        step=min(settings["step"], THRESHOLD_BLOCK),
        wiener_variance=variances,
        block_basis=PILOT_BASIS if rule == "threshold" else "dct",
    )


def _sure_by_candidates(
    crops, probes, first_stages, temperatures, variances, weight, settings, bar, epsilon=SURE_STEP
):
    """Monte-Carlo SURE (noise units) over the crops for each first stage and
    second temperature, with the probes of each crop (a list per crop)
    shared by all candidates: each stage runs once on a crop and once on it
    nudged along each probe, the divergence averaged over the probes. The experts'
    weights (the gated one's and one for each collaborative variance) are
    those of lowest SURE (``_sure_blend.blend_by_sure``), the collaborative ones summing to
    ``weight`` unless it is ``None``. Returns ``{(first stage, temperature,
    (gated weight, collaborative weights)): risk}``."""
    nudged_crops = [
        [crop + epsilon * probe for probe in crop_probes]
        for crop, crop_probes in zip(crops, probes, strict=True)
    ]
    n_pixels = sum(crop.numel() for crop in crops)
    n_probes = len(probes[0])

    def pilots(stage):
        plain = [_first_stage(crop, stage, settings) for crop in crops]
        nudged = [[_first_stage(image, stage, settings) for image in row] for row in nudged_crops]
        _advance(bar, 1 + n_probes)
        return plain, nudged

    def residuals_and_divergences(stage_function, guides):
        """``(residual, divergence)`` of each estimate ``stage_function``
        returns, stacked: (k, H, W); the divergence averaged over the probes."""
        residuals, divergences = [], 0.0
        for crop, nudged_row, crop_probes, guide, nudged_guides in zip(
            crops, nudged_crops, probes, *guides, strict=True
        ):
            plain = stage_function(crop, guide)
            for nudged_crop, probe, nudged_guide in zip(
                nudged_row, crop_probes, nudged_guides, strict=True
            ):
                nudged = stage_function(nudged_crop, nudged_guide)
                divergences += (probe * (nudged - plain)).double().sum(dim=(1, 2)) / n_probes
            residuals.append((plain - crop).double().flatten(1))
        _advance(bar, 1 + n_probes)
        residuals = torch.cat(residuals, dim=1)
        return list(zip(residuals, (divergences / epsilon).tolist(), strict=True))

    risks = {}
    for stage in first_stages:
        guides = pilots(stage)
        collaborative = []
        if weight != 0.0:
            collaborative = residuals_and_divergences(
                lambda image, pilot: _collaborative_second(image, pilot, variances, settings),
                guides,
            )
        for temperature in temperatures:
            gated = None
            if weight != 1.0:
                (gated,) = residuals_and_divergences(
                    lambda image, pilot, t=temperature: _second_stage(image, pilot, t, settings)[
                        None
                    ],
                    guides,
                )
            weights, risk = blend_by_sure(gated, collaborative, weight, n_pixels)
            if weight == 0.0:  # no collaborative expert was run
                weights = (1.0, (0.0,) * len(variances))
            risks[stage, float(temperature), weights] = risk
    return risks


def _advance(bar, runs=1):
    if bar is not None:
        bar.update(runs)


def _first_stage_candidates(stages, windows):
    """``(stage, window)`` pairs: the thresholding at each window, the Wiener
    first stage (whose window is ``search_distance``) once."""
    return [
        (stage, window)
        for stage in stages
        for window in (windows if stage == "threshold" else [None])
    ]
