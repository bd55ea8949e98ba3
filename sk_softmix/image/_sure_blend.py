"""SURE for the Wiener image denoiser: its crops, probes and blend of experts.

For experts ``f_k`` with residuals ``f_k(y) - y`` and divergences
``d_k`` on the crops, the SURE of a blend ``sum_k u_k f_k`` with weights
on the simplex is a quadratic in ``u`` (user guide, "Images: gated affine
experts"): its minimum is the stationary point of one of the simplex's
faces, each found by a small linear system.
"""

import itertools
import math

import numpy as np
import torch

from ._wiener_checks import THRESHOLD_BLOCK

# SURE's crops are at least this many pixels on a side where the image
# allows: on scikit-image's text (172 x 448) crops of 43 pixels put weight on
# the gated expert that cost up to 0.9 dB, crops of 64 at most 0.12.
MIN_CROP_SIDE = 64
# Of blends whose SURE ties with the lowest up to rounding, the one with the
# fewest experts is kept: each expert left out is a stage run saved. (A
# tolerance of 0.2%, 0.01 dB, with one probe per crop, left the
# collaborative experts out on moon at noise 0.1 for three probes in five:
# -0.05 dB against BM3D instead of +0.1.)
BLEND_TOLERANCE = 1e-9


def blend_by_sure(gated, collaborative, weight, n_pixels):
    """The experts' weights of lowest SURE, and that SURE (noise units).

    ``gated`` and each of ``collaborative`` are ``(residual f(y) - y,
    divergence)`` on the crops; ``gated`` is ``None`` when not run. For
    weights ``u`` summing to 1, SURE is ``(u^T Q u + 2 d^T u) / N - 1``, with
    ``Q`` the residuals' Gram matrix and ``d`` the divergences: a quadratic
    minimised over the simplex (``simplex_faces``). ``weight`` (not
    ``None``) fixes the gated expert's weight to ``1 - weight``, and the
    collaborative ones share ``weight``. Returns ``((gated weight,
    collaborative weights), risk)``."""
    experts = ([gated] if gated is not None else []) + collaborative
    residuals = torch.stack([residual for residual, _ in experts], dim=1)
    gram = (residuals.T @ residuals).cpu().numpy()
    divergences = np.array([divergence for _, divergence in experts])
    fixed_gated = weight is not None and gated is not None and bool(collaborative)
    if fixed_gated:  # a quadratic in the collaborative weights, which sum to `weight`
        quadratic = weight**2 * gram[1:, 1:]
        linear = weight * ((1 - weight) * gram[0, 1:] + divergences[1:])
    else:
        quadratic, linear = gram, divergences

    def risk(weights):
        return float(weights @ gram @ weights + 2 * divergences @ weights) / n_pixels - 1

    candidates = []
    for support, shares in simplex_faces(quadratic, linear):
        weights = np.concatenate([[1 - weight], weight * shares]) if fixed_gated else shares
        candidates.append((len(support), risk(weights), weights))
    lowest = min(value for _, value, _ in candidates)
    bound = lowest + BLEND_TOLERANCE * abs(lowest)
    # the fewest experts within the tolerance, then the lowest SURE
    _, value, weights = min(
        (candidate for candidate in candidates if candidate[1] <= bound),
        key=lambda candidate: candidate[:2],
    )
    if gated is None:
        return (0.0, tuple(map(float, weights))), value
    return (float(weights[0]), tuple(map(float, weights[1:]))), value


def simplex_faces(quadratic, linear):
    """The stationary point of ``u^T Q u + 2 l^T u`` (``Q`` positive
    semi-definite) on each face of the simplex ``{u >= 0, sum u = 1}`` that
    holds one: ``(support, u)`` pairs. The minimum over the simplex is one of
    them (on its face, the KKT conditions are the linear system solved), and
    each vertex is one."""
    size = len(linear)
    for face_size in range(1, size + 1):
        for support in itertools.combinations(range(size), face_size):
            index = list(support)
            system = np.ones((face_size + 1, face_size + 1))
            system[:face_size, :face_size] = quadratic[np.ix_(index, index)]
            system[face_size, face_size] = 0.0
            rhs = np.append(-linear[index], 1.0)
            solution = np.linalg.lstsq(system, rhs, rcond=None)[0][:face_size]
            if np.any(solution < 0) or not math.isclose(solution.sum(), 1.0, abs_tol=1e-9):
                continue  # outside the simplex, or a face without a stationary point
            shares = np.zeros(size)
            shares[index] = solution / solution.sum()  # a vertex exactly 1
            yield support, shares


def rademacher_probe(rng, shape):
    """A Rademacher probe (entries +-1): Hutchinson's estimate of a trace
    has the variance of a Gaussian probe's less the diagonal's share."""
    return 2.0 * rng.randint(0, 2, size=shape) - 1.0


def sure_crops(image, size):
    """Where SURE compares the candidates (:func:`crop_slices`): the crops of ``image``."""
    return [image[rows, cols] for rows, cols in crop_slices(image.shape[:2], size)]


def crop_slices(shape, size):
    """Where SURE compares the candidates: the centres of the image's four
    quadrants, ``size // 2`` on a side (the area of one ``size`` crop, spread
    over the image), at most a quarter of the image's smaller side but at
    least MIN_CROP_SIDE (within half of it), or the image's centre, ``size``
    on a side, on images too small for that. ``(rows, columns)`` slices."""
    rows, cols = shape
    smaller = min(rows, cols)
    half = min(size // 2, max(smaller // 4, MIN_CROP_SIDE), smaller // 2)
    if half < 2 * THRESHOLD_BLOCK:
        rows_kept, cols_kept = min(size, rows), min(size, cols)
        top, left = (rows - rows_kept) // 2, (cols - cols_kept) // 2
        return [(slice(top, top + rows_kept), slice(left, left + cols_kept))]
    slices = []
    for centre_row in (rows // 4, 3 * rows // 4):
        for centre_col in (cols // 4, 3 * cols // 4):
            top = min(max(centre_row - half // 2, 0), rows - half)
            left = min(max(centre_col - half // 2, 0), cols - half)
            slices.append((slice(top, top + half), slice(left, left + half)))
    return slices
