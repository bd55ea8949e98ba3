"""Collaborative filtering of groups of similar blocks: BM3D's two experts.

For a reference block (``b x b`` pixels, references every ``step``
pixels) the ``n`` blocks of its search window nearest to it on a guide
image, in mean squared difference, form a group ``Z`` (the reference
first). The group's separable transform ``Theta = H Z D^T`` (``H`` the
orthonormal Haar transform across the group, ``D`` the 2-D DCT of a block,
or the biorthogonal spline wavelet 1.5 that BM3D thresholds in) is shrunk
coefficient by coefficient, ``H^T (S * Theta) D^{-T}``, the noise's
standard deviation being 1 (Dabov et al., 2007):

- ``rule="threshold"`` (the guide is the noisy image): ``S = 1`` where
  ``|Theta| > lambda s``, else 0, a projection the data pick (``s`` the
  coefficient's noise standard deviation, 1 in an orthonormal basis);
- ``rule="wiener"`` (the guide a pilot estimate): ``S = G^2 / (G^2 + v)``
  with ``G`` the guide group's coefficients, the group's empirical Wiener
  map in that basis when ``v = 1``, the noise's variance. A pilot's
  coefficients are shrunk towards zero, its energies too small: a ``v``
  below 1 offsets that (BM3D's software takes 0.4).

Given the guide, each is a linear map of the group: a gated linear expert
whose gate is the hard top-``n`` selection (the zero-temperature limit of
the key-norm softmax over the window). Each pixel averages the estimates
of the blocks that hold it, each group weighted by the inverse of its
estimate's noise variance (``1 / sum S^2``: the kept coefficients' count
for the threshold).

The distances for every offset of the window are box sums of squared
differences of shifted images, computed for a band of reference rows at a
time, and the band's groups are gathered and transformed a few reference
columns at a time, so that memory is bounded whatever the image's size.
"""

import math
from collections.abc import Sequence
from numbers import Real

import torch
import torch.nn.functional as F

from ._wiener_head import reference_positions, window_offsets

# Reference rows per band: about 30 MB of work tensors for a 512-pixel-wide
# image at the defaults.
BAND_ROWS = 8
# Reference columns whose groups are gathered and transformed at once: 8 x
# 128 groups of 32 blocks, 17 MB of pixel indices, whatever the image's width.
COLUMN_REFERENCES = 128
# The biorthogonal spline wavelet 1.5's analysis filters (Cohen, Daubechies
# & Feauveau, 1992): a 10-tap low-pass and the Haar high-pass, aligned as
# PyWavelets aligns them in its periodised transform.
BIOR15_LOW = [3, -3, -22, 22, 128, 128, 22, -22, -3, 3]  # times 1 / (128 sqrt 2)
BIOR15_HIGH = [0, 0, 0, 0, -1, 1, 0, 0, 0, 0]  # times 1 / sqrt 2
BLOCK_BASES = ("dct", "bior1.5")


def dct_matrix(size: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The orthonormal DCT-II matrix of ``size`` points (rows: frequencies)."""
    index = torch.arange(size, dtype=torch.float64)
    matrix = torch.cos(math.pi * (2 * index[None] + 1) * index[:, None] / (2 * size))
    matrix *= math.sqrt(2 / size)
    matrix[0] /= math.sqrt(2)
    return matrix.to(dtype=dtype, device=device)


def haar_matrix(size: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The orthonormal Haar matrix of ``size`` points, a power of two (rows:
    the mean first, then differences from coarse to fine)."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"The Haar transform needs a power of two; got {size}.")
    matrix = torch.ones(1, 1, dtype=torch.float64)
    pair_sum, pair_difference = torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, -1.0]])
    while matrix.shape[0] < size:
        half = matrix.shape[0]
        matrix = torch.cat(
            [
                torch.kron(matrix, pair_sum.double()),
                torch.kron(torch.eye(half, dtype=torch.float64), pair_difference.double()),
            ]
        ) / math.sqrt(2)
    return matrix.to(dtype=dtype, device=device)


def bior15_matrix(size: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The analysis matrix of the biorthogonal spline wavelet 1.5 on ``size``
    points, a power of two: the full dyadic decomposition with periodic
    extension (rows: the coarsest approximation, then the details from
    coarse to fine). Not orthonormal: rows' norms are 1 to 1.06 at 8."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"The wavelet transform needs a power of two; got {size}.")
    low_filter = torch.tensor(BIOR15_LOW, dtype=torch.float64) / (128 * math.sqrt(2))
    high_filter = torch.tensor(BIOR15_HIGH, dtype=torch.float64) / math.sqrt(2)
    taps = len(BIOR15_LOW)
    approximation = torch.eye(size, dtype=torch.float64)
    details = []
    while approximation.shape[0] > 1:
        n = approximation.shape[0]
        # one level on n points: output i filters the inputs 2 i + taps / 2 - j
        low = torch.zeros(n // 2, n, dtype=torch.float64)
        high = torch.zeros(n // 2, n, dtype=torch.float64)
        for i in range(n // 2):
            for j in range(taps):
                source = (2 * i + taps // 2 - j) % n
                low[i, source] += low_filter[j]
                high[i, source] += high_filter[j]
        details.insert(0, high @ approximation)
        approximation = low @ approximation
    return torch.cat([approximation, *details]).to(dtype=dtype, device=device)


def collaborative_stage(
    noisy: torch.Tensor,
    guide: torch.Tensor | None = None,
    *,
    rule: str = "threshold",
    block_size: int = 8,
    search_distance: int = 7,
    group_size: int = 16,
    step: int = 3,
    threshold: float = 2.7,
    wiener_variance: float | Sequence[float] = 1.0,
    block_basis: str = "dct",
) -> torch.Tensor:
    """One collaborative stage on an image in units of its noise.

    Parameters
    ----------
    noisy : Tensor of shape (H, W)
        The noisy image, mean removed and divided by the noise's standard
        deviation (noise variance 1); at least ``block_size`` on each side.
    guide : Tensor of shape (H, W) or None, default=None
        The image the groups are matched on, and whose coefficients give
        the Wiener rule's shrinkage; ``None``: ``noisy``.
    rule : {"threshold", "wiener"}, default="threshold"
        The shrinkage (see the module).
    block_size : int, default=8
        Side ``b`` of the blocks.
    search_distance : int, default=7
        ``d``: a group's blocks are taken among the ``(2 d + 1)^2`` around
        its reference (those inside the image).
    group_size : int, default=16
        Blocks per group, a power of two; fewer (the largest power of two
        available) in a band of references whose windows hold fewer blocks.
    step : int, default=3
        Distance between reference blocks, at most ``block_size``.
    threshold : float, default=2.7
        ``lambda`` of the threshold rule, in units of the noise's standard
        deviation (BM3D's value).
    wiener_variance : float or sequence of float, default=1.0
        ``v`` of the Wiener rule, in units of the noise's variance (the
        threshold rule ignores it). A sequence: one estimate for each, from
        the same groups.
    block_basis : {"dct", "bior1.5"}, default="dct"
        The 2-D transform of a block: the orthonormal DCT, or the
        biorthogonal spline wavelet 1.5 (BM3D's for its thresholding),
        whose coefficients' noise standard deviations (its rows' norms)
        scale the threshold.

    Returns
    -------
    Tensor of shape (H, W), or (len(wiener_variance), H, W) for a sequence
        The estimate, in ``noisy``'s dtype.
    """
    height, width = noisy.shape
    b, d = block_size, search_distance
    rows, cols = height - b + 1, width - b + 1  # block positions
    device, dtype = noisy.device, noisy.dtype
    offsets = window_offsets(d, device)
    own_offset = len(offsets) // 2  # (0, 0): the reference itself
    # a block's pixels as flat offsets from its top-left pixel
    block_axis = torch.arange(b, device=device)
    block_pixels = (block_axis[:, None] * width + block_axis).reshape(-1)
    if block_basis not in BLOCK_BASES:
        raise ValueError(f"block_basis must be one of {BLOCK_BASES}; got {block_basis!r}.")
    one_axis = (dct_matrix if block_basis == "dct" else bior15_matrix)(b, torch.float64)
    forward = torch.kron(one_axis, one_axis)
    block_transform = forward.to(dtype=dtype, device=device)
    # Theta D^{-T} rebuilds the blocks (D^{-T} = D for the DCT); each
    # coefficient's noise standard deviation is its row's norm
    inverse_transpose = torch.linalg.inv(forward).T.to(dtype=dtype, device=device)
    coefficient_std = forward.square().sum(dim=1).sqrt().to(dtype=dtype, device=device)
    y_refs = reference_positions(rows, step, device)
    x_refs = reference_positions(cols, step, device)
    guide = noisy if guide is None else guide
    # zeros outside the image; blocks reaching out of it are masked below
    padded = F.pad(guide[None, None], (d, d, d, d))[0, 0]
    flat, guide_flat = noisy.reshape(-1), guide.reshape(-1)
    several = not isinstance(wiener_variance, Real)
    variances = list(wiener_variance) if several else [wiener_variance]
    # sums of weighted estimates per pixel; weights per block position (a
    # group's weight is the same on all its block's pixels), spread onto
    # the pixels at the end
    total = torch.zeros(len(variances), height * width, dtype=dtype, device=device)
    block_weight = torch.zeros(len(variances), rows * cols, dtype=dtype, device=device)
    across_by_size = {}  # the Haar matrix of each group size met (one, but in a small window)
    for y_band in y_refs.split(BAND_ROWS):
        top, bottom = int(y_band[0]), int(y_band[-1]) + b  # the band's pixel rows
        distances = _band_distances(guide, padded, top, bottom, d, b, y_band - top, x_refs)
        distances = distances.permute(1, 2, 0)  # (by, bx, m)
        candidate_y = y_band[:, None, None] + offsets[:, 0]
        candidate_x = x_refs[None, :, None] + offsets[:, 1]
        outside = (
            (candidate_y < 0) | (candidate_y >= rows) | (candidate_x < 0) | (candidate_x >= cols)
        )
        distances = distances.masked_fill(outside, torch.inf)
        distances[..., own_offset] = -1.0  # the reference leads its group, even among ties
        finite = torch.isfinite(distances).sum(dim=-1).min()
        size = min(group_size, 2 ** int(math.log2(int(finite))))
        # the nearest blocks, nearest first (ties in any order)
        order = torch.topk(distances, size, dim=-1, largest=False).indices  # (by, bx, n)
        if size not in across_by_size:
            across_by_size[size] = haar_matrix(size, dtype, device)
        across = across_by_size[size]
        # the groups a few columns of references at a time: their pixels'
        # indices and transforms take (references, n, b^2) each, in proportion
        # to the image's width for a whole band (600 MB at 3072 pixels)
        for first in range(0, len(x_refs), COLUMN_REFERENCES):
            part = slice(first, first + COLUMN_REFERENCES)
            block_y = y_band[:, None, None] + offsets[order[:, part], 0]
            block_x = x_refs[None, part, None] + offsets[order[:, part], 1]
            blocks = (block_y * cols + block_x).reshape(-1)
            pixels = ((block_y * width + block_x).reshape(-1, size))[..., None] + block_pixels
            coefficients = across @ flat[pixels] @ block_transform.T  # (references, n, b^2)
            if rule == "wiener":
                energy = (across @ guide_flat[pixels] @ block_transform.T).square()
            targets = pixels.reshape(-1)
            for index, variance in enumerate(variances):
                if rule == "threshold":
                    shrink = (coefficients.abs() > threshold * coefficient_std).to(dtype)
                else:
                    shrink = energy / (energy + variance)
                estimate = across.T @ (shrink * coefficients) @ inverse_transpose
                # BM3D's aggregation weight: the inverse of the estimate's noise
                # variance (at least that of one coefficient kept)
                group_weight = 1.0 / shrink.square().sum(dim=(1, 2)).clamp(min=1.0)
                weighted = estimate * group_weight[:, None, None]
                total[index].index_add_(0, targets, weighted.reshape(-1))
                block_weight[index].index_add_(0, blocks, group_weight.repeat_interleave(size))
    # a pixel's weight: the sum over the block positions whose block holds it
    padded_weight = F.pad(block_weight.reshape(-1, rows, cols), (b - 1, b - 1, b - 1, b - 1))
    weight = _sliding_sums(_sliding_sums(padded_weight, b, dim=1), b, dim=2)
    estimates = total.reshape(len(variances), height, width) / weight
    return estimates if several else estimates[0]


def _band_distances(image, padded, top, bottom, d, b, y_local, x_refs):
    """Mean squared difference between the reference blocks of a band (rows
    ``top + y_local``, columns ``x_refs``) and their shifts by every offset
    of the window, in raster order: (m, band references, column
    references); meaningless where the shifted block leaves the image (zeros
    there). For one vertical shift, the horizontal ones are views of one
    strip of the padded image (no copies); the box sums are sliding sums
    down the rows and then across the columns, each read only where
    references need them."""
    width = image.shape[1]
    reference = image[top:bottom]
    out = []
    for dy in range(-d, d + 1):
        strip = padded[top + d + dy : bottom + d + dy]  # (band rows, width + 2 d)
        shifted = strip.unfold(1, width, 1).transpose(0, 1)  # (2 d + 1, band rows, width)
        squares = (shifted - reference).square_()
        down = _sliding_sums(squares, b, dim=1).index_select(1, y_local)
        out.append(_sliding_sums(down, b, dim=2).index_select(2, x_refs) / (b * b))
    return torch.cat(out)


def _sliding_sums(values, b, dim):
    """Sums of ``b`` consecutive entries along ``dim``, from every start.

    Sums over ``1, 2, 4, ...`` entries double by adding shifted copies of
    the previous ones, and those of ``b``'s binary digits, placed end to
    end, make up the ``b`` entries: about ``log2 b`` additions of the whole
    tensor, faster than cumulative sums along a dimension that is not the
    last, and without their cancellation."""
    length = values.shape[dim] - b + 1
    power, width, covered, total = values, 1, 0, None
    remaining = b
    while True:
        if remaining & 1:  # a run of `width` entries, after those `covered`
            part = power.narrow(dim, covered, length)
            total = part if total is None else total + part
            covered += width
        remaining >>= 1
        if not remaining:
            return total
        kept = power.shape[dim] - width
        power = power.narrow(dim, 0, kept) + power.narrow(dim, width, kept)
        width *= 2
