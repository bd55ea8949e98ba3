"""A key-norm softmax head whose prompt is each patch's search window: trainable non-local means.

A key-norm head scores a token ``z_i`` against a query ``z`` by
``z_i^T U z - 1/2 z_i^T W z_i + b_i`` (user guide, "Key-bias heads"; this
package's extension of the paper's heads). With ``U = W = g I`` the score is
``-g/2 ||z - z_i||^2 + g/2 ||z||^2 + b_i``, and ``g/2 ||z||^2`` is the same for
every token, so the weights are ``softmax_i(-g/2 ||z - z_i||^2 + b_i)``: those
of non-local means (Buades, Coll & Morel, 2005), whose bandwidth ``h``
compares ``k x k`` patches by their mean squared pixel difference, with
``h^2 = 2 / (g k^2)``, plus a prior ``b_i`` over the tokens.

On an image the query is the ``k x k`` patch centred on a pixel ``x`` and its
prompt the patches centred on ``x + delta`` for every offset of the search
window, ``|delta|_inf <= d``; ``b_delta`` is a learned prior over offsets.
The head estimates the patch at ``x`` as
``lambda z_x + v sum_delta a_delta(x) z_{x + delta} + c`` (a skip ``lambda``,
a value scale ``v``, an intercept ``c``), and each pixel ``u`` is the average
of the estimates of the ``k^2`` patches that hold it. The patch at
``x = u - o`` holds ``u`` at place ``o``, where ``z_{x + delta}`` holds
``y(u + delta)``; so that average is

    f(u) = lambda y(u) + v sum_delta abar_delta(u) y(u + delta) + c,
    abar_delta(u) = (1 / k^2) sum_{|o|_inf <= k // 2} a_delta(u - o).

Both the squared patch distances (the ``k x k`` sums of ``(y - y(. + delta))^2``)
and ``abar`` are sliding sums over the image, so a pass costs
``O((2 d + 1)^2)`` per pixel, not ``O(k^2 (2 d + 1)^2)``.

The image is in units of the noise: its mean subtracted, divided by the noise
standard deviation (``image._normalised``), so that one set of defaults fits
every scale.
"""

import torch
import torch.nn.functional as F

# Squared pixel differences are clipped where a patch distance that large
# scores this far below its own patch (g/2 D >= 50: a relative weight below
# e^-50 for offset priors within a few units of each other). It keeps the
# cumulative sums, and so their float32 rounding, bounded on images whose
# contrast is many times the noise.
_NEGLIGIBLE_SCORE = 50.0


def margin(patch_size: int, search_distance: int) -> int:
    """Pixels of input each side of an output region: a patch's half-width to
    reach the patches that cover a pixel, ``d`` to reach their search windows,
    and a half-width again for the patches there."""
    return 2 * (patch_size // 2) + search_distance


def start_parameters(patch_size: int, search_distance: int, device, dtype) -> dict:
    """Plain non-local means at ``h`` equal to the noise's standard deviation.

    The head's parameters, tensors on ``device``: ``log_bandwidth``, the log
    of the metric weight ``g``; ``offset_bias``, the prior ``b`` over the
    ``(2 d + 1)^2`` offsets in raster order from ``(-d, -d)``;
    ``value_scale`` ``v``; ``skip`` ``lambda``; ``intercept`` ``c``.

    Non-local means weighs ``exp(-||z - z_i||^2 / (k^2 h^2))`` (the mean
    squared pixel difference over ``h^2``); in units of the noise ``h = 1``,
    so ``g / 2 = 1 / k^2``. No prior over offsets, no skip, value scale 1.
    """
    window = (2 * search_distance + 1) ** 2

    def scalar(value):
        return torch.tensor(float(value), device=device, dtype=dtype)

    return {
        "log_bandwidth": scalar(torch.log(torch.tensor(2.0 / patch_size**2))),
        "offset_bias": torch.zeros(window, device=device, dtype=dtype),
        "value_scale": scalar(1.0),
        "skip": scalar(0.0),
        "intercept": scalar(0.0),
    }


def sliding_sums(x: torch.Tensor, size: int) -> torch.Tensor:
    """Sums over every ``size x size`` window of the last two axes ("valid").

    One axis at a time, by differences of cumulative sums: each cumulative sum
    runs along one row or column, so float32 rounding grows with the image's
    side, not its area as it would with an integral image.
    """
    for dim in (-1, -2):
        total = x.cumsum(dim)
        count = x.shape[dim] - size + 1
        # sum of x[j : j + size] = total[j + size - 1] - (total[j] - x[j])
        x = total.narrow(dim, size - 1, count) - (
            total.narrow(dim, 0, count) - x.narrow(dim, 0, count)
        )
    return x


def nonlocal_head(
    padded: torch.Tensor, parameters: dict, patch_size: int, search_distance: int
) -> torch.Tensor:
    """The head's output for every pixel of a region.

    Parameters
    ----------
    padded : Tensor of shape (h + 2 m, w + 2 m)
        The (normalised) image region with ``m = margin(patch_size,
        search_distance)`` pixels of context each side.
    parameters : dict of Tensor
        As :func:`start_parameters` makes them.
    patch_size : int
        Odd side ``k`` of the patches.
    search_distance : int
        ``d``: offsets up to ``d`` pixels along each axis.

    Returns
    -------
    Tensor of shape (h, w)
        ``f(u) = lambda y(u) + v sum_delta abar_delta(u) y(u + delta) + c``.
    """
    r, side = patch_size // 2, 2 * search_distance + 1
    # patch pixels whose distances are needed: the output region plus 2 r
    rows, cols = padded.shape[0] - 2 * search_distance, padded.shape[1] - 2 * search_distance
    h, w = rows - 4 * r, cols - 4 * r
    # shifted[delta](x) = y(x + delta), offsets in raster order: (side^2, rows, cols)
    shifted = F.unfold(padded[None, None], side).view(side * side, rows, cols)
    own = shifted[side * side // 2]  # delta = 0
    # ||z_x - z_{x + delta}||^2 for the patches that cover the output: (side^2, h + 2r, w + 2r)
    bandwidth = parameters["log_bandwidth"].exp()
    largest = 2 * _NEGLIGIBLE_SCORE / bandwidth.detach()
    distances = sliding_sums(((shifted - own) ** 2).clamp(max=largest), patch_size)
    scores = -0.5 * bandwidth * distances
    weights = torch.softmax(scores + parameters["offset_bias"].view(-1, 1, 1), dim=0)
    per_pixel = sliding_sums(weights, patch_size) / patch_size**2  # abar: (side^2, h, w)
    values = shifted[:, 2 * r : 2 * r + h, 2 * r : 2 * r + w]  # y(u + delta)
    averaged = (per_pixel * values).sum(dim=0)
    return (
        parameters["skip"] * values[side * side // 2]
        + parameters["value_scale"] * averaged
        + parameters["intercept"]
    )


def nonlocal_sure(
    padded: torch.Tensor,
    probe_padded: torch.Tensor,
    parameters: dict,
    patch_size: int,
    search_distance: int,
    epsilon: float = 1e-3,
) -> torch.Tensor:
    """Monte-Carlo SURE of the head on a region, per pixel, for unit noise.

    ``mean_u (f(u) - y(u))^2 - 1 + 2 div / N``, the divergence
    ``sum_u df(u)/dy(u)`` estimated by one random probe ``b`` as
    ``b^T (f(y + epsilon b) - f(y)) / epsilon`` (Ramani, Blu & Unser, 2008):
    unbiased up to ``O(epsilon)`` for a standard normal ``b``, whatever
    depends on what, so the patches' shared noise needs no special care.
    ``probe_padded`` is ``b`` laid out as ``padded`` (padding pixels repeat
    the probe of the pixels they copy, so the estimate counts their paths
    too); its central ``h x w`` is the output pixels' probe.
    """
    m = margin(patch_size, search_distance)
    denoised = nonlocal_head(padded, parameters, patch_size, search_distance)
    nudged = nonlocal_head(padded + epsilon * probe_padded, parameters, patch_size, search_distance)
    h, w = denoised.shape
    noisy = padded[m : m + h, m : m + w]
    probe = probe_padded[m : m + h, m : m + w]
    divergence = (probe * (nudged - denoised)).sum() / epsilon
    return ((denoised - noisy) ** 2).mean() - 1 + 2 * divergence / (h * w)
