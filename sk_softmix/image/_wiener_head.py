"""Gated affine experts on an image's patches: one stage of the Wiener denoiser.

For a reference patch ``z_r`` (``k x k`` pixels, ``q = k^2`` values) the
prompt is the patches ``z_i`` of its search window, ``|delta|_inf <= d``.
A key-norm softmax head scores them against a guide image ``g`` (the noisy
image itself in the first stage, the first stage's estimate in the
second)::

    a_i = softmax_i(-||g_i - g_r||^2 / (q T)),

non-local means' weights at temperature ``T`` (the image in units of the
noise, so ``T`` is in units of the noise variance). Where non-local means
returns the weighted mean ``mu = sum_i a_i z_i``, a constant expert, this
stage fits the attention-weighted covariance ``C`` as well and applies the
group's Wiener map, an affine expert, to every patch of the window::

    zhat_i = mu + A (z_i - mu),
    A = (C - I)_+ C^{-1}                 (first stage: C of the noisy patches),
    A = C_g (C_g + I)^{-1}                (second stage: C_g of the guide's),

``(.)_+`` clipping negative eigenvalues at zero. This is the paper's
softmax-gated mixture of affine experts (Proposition 2.1) with the gate
over the window's patches and one Gaussian expert per group, as NL-Bayes
(Lebrun, Buades & Morel, 2013) estimates groups of similar patches. Each
pixel is the average of the estimates of every patch that holds it,
weighted by the patches' attention weights.

References are taken every ``step`` pixels (and at the last row and
column), in tiles, so that memory is bounded by the tile whatever the
image's size.
"""

import torch
import torch.nn.functional as F

# Reference patches per tile side: a tile holds (TILE_REFERENCES)^2 groups of
# (2 d + 1)^2 patches of q values, about 23 MB per tensor at d = 7, k = 5.
TILE_REFERENCES = 32


def patches_of(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Every ``k x k`` patch of ``image`` (H, W): shape (H - k + 1, W - k + 1, k^2),
    indexed by its top-left pixel, values in raster order."""
    height, width = image.shape
    columns = F.unfold(image[None, None], patch_size)[0]  # (k^2, positions)
    return columns.T.reshape(height - patch_size + 1, width - patch_size + 1, -1)


def window_offsets(distance: int, device) -> torch.Tensor:
    """Every offset ``(dy, dx)`` with ``|dy|, |dx| <= distance``, in raster
    order (the centre, ``(0, 0)``, in the middle): shape ((2 d + 1)^2, 2)."""
    axis = torch.arange(-distance, distance + 1, device=device)
    return torch.stack(torch.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)


def reference_positions(length: int, step: int, device) -> torch.Tensor:
    """Every ``step``-th patch position along an axis of ``length`` positions,
    and the last one, so that every pixel lies in a reference patch."""
    positions = torch.arange(0, length, step, device=device)
    if positions[-1] != length - 1:
        positions = torch.cat([positions, torch.tensor([length - 1], device=device)])
    return positions


def wiener_stage(
    noisy: torch.Tensor,
    guide: torch.Tensor,
    *,
    second: bool,
    patch_size: int,
    search_distance: int,
    temperature: float,
    step: int,
) -> torch.Tensor:
    """One stage of the Wiener denoiser on an image in units of its noise.

    Parameters
    ----------
    noisy : Tensor of shape (H, W)
        The noisy image, mean removed and divided by the noise's standard
        deviation (noise variance 1).
    guide : Tensor of shape (H, W)
        The image the attention weights (and, in the second stage, the
        covariances) are computed on: ``noisy`` itself in the first stage.
    second : bool
        Second stage: the Wiener map of the guide's covariance applied to
        the noisy patches; else the clipped empirical Wiener map of the
        noisy patches' own covariance.
    patch_size : int
        Side ``k`` of the patches.
    search_distance : int
        ``d``: each group holds the ``(2 d + 1)^2`` patches around its
        reference (those inside the image).
    temperature : float
        ``T`` of the weights ``softmax(-||g_i - g_r||^2 / (k^2 T))``.
    step : int
        Distance between reference patches.

    Returns
    -------
    Tensor of shape (H, W)
        The estimate, in ``noisy``'s dtype.
    """
    height, width = noisy.shape
    k, d = patch_size, search_distance
    rows, cols = height - k + 1, width - k + 1  # patch positions
    device, dtype = noisy.device, noisy.dtype
    total = torch.zeros(height, width, dtype=torch.float64, device=device)
    weight = torch.zeros_like(total)
    y_refs = reference_positions(rows, step, device)
    x_refs = reference_positions(cols, step, device)
    window = window_offsets(d, device)  # (m, 2)
    identity = torch.eye(k * k, dtype=dtype, device=device)
    for y_block in y_refs.split(TILE_REFERENCES):
        top, bottom = max(int(y_block[0]) - d, 0), min(int(y_block[-1]) + d, rows - 1) + k
        for x_block in x_refs.split(TILE_REFERENCES):
            left, right = max(int(x_block[0]) - d, 0), min(int(x_block[-1]) + d, cols - 1) + k
            # the tile's patches, indexed from its corner
            noisy_patches = patches_of(noisy[top:bottom, left:right], k)
            guide_patches = patches_of(guide[top:bottom, left:right], k)
            tile_rows, tile_cols = noisy_patches.shape[:2]
            references = torch.cartesian_prod(y_block, x_block)  # (n, 2), image positions
            candidates = references[:, None, :] + window[None]  # (n, m, 2)
            inside = (
                (candidates[..., 0] >= 0)
                & (candidates[..., 0] < rows)
                & (candidates[..., 1] >= 0)
                & (candidates[..., 1] < cols)
            )
            local_y = candidates[..., 0].clamp(0, rows - 1) - top
            local_x = candidates[..., 1].clamp(0, cols - 1) - left
            z = noisy_patches[local_y, local_x]  # (n, m, q)
            g = guide_patches[local_y, local_x]
            g_reference = guide_patches[references[:, 0] - top, references[:, 1] - left]
            distances = (g - g_reference[:, None]).square().mean(dim=-1)  # (n, m)
            logits = (-distances / temperature).masked_fill(~inside, -torch.inf)
            attention = torch.softmax(logits, dim=1)  # (n, m)
            estimates = _group_estimates(z, g, attention, second, identity)
            # every patch's estimate, weighted by its attention: summed per
            # patch position, then onto the pixels by folding the patches
            flat = (local_y * tile_cols + local_x).reshape(-1)
            per_patch = torch.zeros(tile_rows * tile_cols, k * k, dtype=dtype, device=device)
            per_patch.index_add_(0, flat, (estimates * attention[..., None]).reshape(-1, k * k))
            patch_weight = torch.zeros(tile_rows * tile_cols, dtype=dtype, device=device)
            patch_weight.index_add_(0, flat, attention.reshape(-1))
            size = (bottom - top, right - left)
            total[top:bottom, left:right] += F.fold(per_patch.T[None], size, k)[0, 0].double()
            spread = patch_weight[None, None].expand(1, k * k, -1)
            weight[top:bottom, left:right] += F.fold(spread, size, k)[0, 0].double()
    return (total / weight).to(dtype)


def _group_estimates(z, g, attention, second, identity):
    """``mu + A (z_i - mu)`` for every patch of every group (see the module)."""
    weights = attention[..., None]  # (n, m, 1)
    mean = attention[:, None, :] @ z  # (n, 1, q)
    if second:
        centred = g - attention[:, None, :] @ g
        covariance = (centred * weights).mT @ centred  # (n, q, q)
        # A = C (C + I)^{-1}, so A^T = (C + I)^{-1} C for a symmetric C;
        # C + I is positive definite, so by its Cholesky factor
        factor = torch.linalg.cholesky(covariance + identity)
        linear = torch.cholesky_solve(covariance, factor).mT
    else:
        centred = z - mean
        covariance = (centred * weights).mT @ centred
        # (C - I)_+ C^{-1} from C's eigenvalues, in float64: flat or
        # repeated groups have (nearly) equal eigenvalues
        values, vectors = torch.linalg.eigh(covariance.double())
        shrink = (values - 1).clamp(min=0) / values.clamp(min=1e-12)
        linear = (vectors * shrink[:, None, :]) @ vectors.mT
        linear = linear.to(z.dtype)
    return mean + (z - mean) @ linear.mT
