"""Dask arrays in the Wiener denoiser: the blend chosen on crops, then chunk by chunk.

An image larger than memory, or spread over a cluster, is a ``dask.array``.
SURE chooses each channel's blend on the crops of the whole image (the same
crops, and so the same choice, as for the image in memory), and every chunk
is then denoised with that blend, ``dask.array.map_overlap`` giving it a
margin of its neighbours' pixels as wide as the denoiser's reach:

- a stage's estimate of a pixel depends on the blocks (or patches) that hold
  it, the groups of references up to the search distance ``D`` away, and
  the blocks of those groups' windows: pixels up to ``2 D + b - 1`` away
  (``b`` the block's side); the second stage reads the first stage's
  estimate as far again;
- the chunks start at multiples of the reference grids' period, so that
  their references fall where the whole image's do.

Within that margin each chunk's pixels are computed from the same pixels,
groups and weights as the whole image's: the result equals the image's in
memory up to float rounding. The channels' centres are the whole image's
(one pass over it); the noise, where not given, is estimated on the crops.
"""

import numpy as np

from ._sure_blend import crop_slices
from ._validation import diagonal_details, noise_of_details
from ._wiener_checks import THRESHOLD_BLOCK, checked_geometry, checked_noise


def lazy_planes_and_noise(planes, variances, patch_size, search_distance, step, crop_size):
    """``(planes, sigmas, centres, crops)`` of a dask image's channels,
    checked without reading it but for the centres (one pass, which finds
    non-finite pixels too) and SURE's crops of every channel (read once:
    the noise is estimated on them where a variance is ``None``, and the
    blend chosen on them)."""
    dtype = planes[0].dtype
    if np.issubdtype(dtype, np.complexfloating):
        raise ValueError(
            "The image is complex; the image functions denoise real images. Pass its real "
            "part, its magnitude, or each part separately."
        )
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise ValueError(f"The image must hold real numbers; got dtype {dtype}.")
    if planes[0].ndim != 2:
        raise ValueError(
            f"Expected a grayscale image of shape (height, width); got {planes[0].shape}."
        )
    checked_geometry(planes[0].shape, patch_size, step)
    planes = [plane.astype(np.float64) for plane in planes]
    import dask

    centres = [float(centre) for centre in dask.compute(*[plane.mean() for plane in planes])]
    if not np.all(np.isfinite(centres)):  # the pass over the image finds them
        raise ValueError("The image holds NaN or infinite pixels.")
    where = crop_slices(planes[0].shape, crop_size)
    (crops,) = dask.compute([[plane[at] for plane in planes] for at in where])
    crops = [[np.asarray(plane, dtype=np.float64) for plane in crop] for crop in crops]
    sigmas = []
    for index, variance in enumerate(variances):
        if variance is None:
            details = np.concatenate([diagonal_details(crop[index]).ravel() for crop in crops])
            image_variance = np.mean([crop[index].var() for crop in crops])
            sigmas.append(checked_noise(None, noise_of_details(details), image_variance))
        else:
            sigmas.append(float(np.sqrt(variance)))
    return planes, sigmas, centres, crops


def receptive_radius(settings, first_stages, weight, patch_size) -> int:
    """How far (pixels) the denoiser reaches: the first stage's ``2 D + b - 1``
    (the widest candidate's) plus the second's (see the module)."""
    block, patch = THRESHOLD_BLOCK - 1, patch_size - 1
    first = max(
        2 * window + block if stage == "threshold" else 2 * settings["search_distance"] + patch
        for stage, window in first_stages
    )
    second = 0
    if weight != 0.0:  # collaborative experts (weight None: chosen by SURE)
        second = 2 * settings["block_search_distance"] + block
    if weight != 1.0:  # the gated expert
        second = max(second, 2 * settings["search_distance"] + patch)
    return first + second


def aligned_chunks(chunks, length, margin, period) -> tuple:
    """Chunk sizes along an axis of ``length``: each a multiple of ``period``,
    at least ``margin`` (the last one too, merged into the one before where
    it would be smaller), about the largest of ``chunks``."""
    size = max(max(chunks), margin)
    size = -(-size // period) * period
    if size >= length:
        return (length,)
    sizes = [size] * (length // size)
    remainder = length - sum(sizes)
    if remainder >= margin:
        sizes.append(remainder)
    elif remainder:
        sizes[-1] += remainder
    return tuple(sizes)


def denoised_lazily(image, channels, denoised_planes, radius, period):
    """The dask array of the image denoised chunk by chunk (see the module):
    ``denoised_planes(planes)`` denoises a chunk's channels with the chosen
    blend; ``radius`` is the denoiser's reach, ``period`` its references'."""
    margin = -(-radius // period) * period
    spatial = [axis for axis in range(image.ndim) if axis != channels.axis]
    chunks, depth = {}, {}
    for axis in spatial:
        sizes = aligned_chunks(image.chunks[axis], image.shape[axis], margin, period)
        chunks[axis] = sizes
        depth[axis] = margin if len(sizes) > 1 else 0
    if channels.axis is not None:
        chunks[channels.axis] = -1  # a chunk holds every channel
        depth[channels.axis] = 0
    image = image.astype(np.float64).rechunk(chunks)

    def denoised_chunk(values):
        return channels.image(denoised_planes(channels.split(values)))

    return image.map_overlap(
        denoised_chunk, depth=depth, boundary="none", trim=True, dtype=np.float64
    )
