"""Warnings for fits on too few points to trust.

A denoiser with a skip path builds on the best affine map; fitted on a
handful of pairs, that map interpolates them and denoises new points worse
than doing nothing (3-4 pairs in the plane: held-out squared error 1.3-3.3
against 0.25 for the identity). The leave-one-out error in closed form
tells, at the cost of one SVD of the design, before anything is trained.
"""

import warnings

import numpy as np

from ..theory.affine_maps import leave_one_out_affine_errors

# Above this many points per coefficient of a row of the affine map the
# check is skipped: there the map's held-out error is close to its fitted one.
CHECKED_POINTS_PER_COEFFICIENT = 10


def warn_if_affine_overfits(noisy, clean, name: str, *, stacklevel: int) -> None:
    """Warn where the best affine map from ``noisy`` to ``clean`` denoises
    held-out pairs worse than the identity (leave-one-out, mean squared error)."""
    n, p = noisy.shape
    if n > CHECKED_POINTS_PER_COEFFICIENT * (p + 1):
        return
    affine = leave_one_out_affine_errors(noisy, clean).mean()
    identity = np.sum(np.square(noisy - clean, dtype=np.float64), axis=1).mean()
    if affine < identity:
        return
    warnings.warn(
        f"{name}: from {n} pairs of {p} features the best affine map, on which the model "
        f"builds, denoises a left-out pair worse than the identity (leave-one-out squared "
        f"error {affine:.3g} against {identity:.3g}): the model may denoise new points "
        "worse than doing nothing. Use more pairs.",
        UserWarning,
        stacklevel=stacklevel,
    )
