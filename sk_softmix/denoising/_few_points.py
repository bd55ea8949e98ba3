"""Warnings for fits on too few points, or points SURE cannot train on.

A denoiser with a skip path builds on the best affine map; fitted on a
handful of pairs, that map interpolates them and denoises new points worse
than doing nothing (3-4 pairs in the plane: held-out squared error 1.3-3.3
against 0.25 for the identity). The leave-one-out error in closed form
tells, at the cost of one SVD of the design, before anything is trained.
"""

import warnings

import numpy as np

from ..theory.affine_maps import leave_one_out_affine_errors
from ..training._validation import DEGENERATE_FRACTION, noiseless_directions, repeated_rows

# Above this many points per coefficient of a row of the affine map the
# check is skipped: there the map's held-out error is close to its fitted one.
CHECKED_POINTS_PER_COEFFICIENT = 10
# Below this many points per coefficient the warning is given whatever the
# leave-one-out estimate says.
MIN_POINTS_PER_COEFFICIENT = 2


def warn_if_affine_overfits(noisy, clean, name: str, *, stacklevel: int) -> None:
    """Warn where the best affine map from ``noisy`` to ``clean`` denoises
    held-out pairs worse than the identity (leave-one-out, mean squared
    error), or where the pairs are fewer than two per coefficient of a row
    of the map."""
    n, p = noisy.shape
    if n > CHECKED_POINTS_PER_COEFFICIENT * (p + 1):
        return
    affine = leave_one_out_affine_errors(noisy, clean).mean()
    identity = np.sum(np.square(noisy - clean, dtype=np.float64), axis=1).mean()
    # below two pairs per coefficient the leave-one-out estimate itself is too
    # noisy to clear the map (4 pairs in the plane: the map was worse than the
    # identity on new points in 89% of draws, the estimate said so in 92%)
    if affine < identity and n >= MIN_POINTS_PER_COEFFICIENT * (p + 1):
        return
    evidence = (
        f"denoises a left-out pair worse than the identity (leave-one-out squared error "
        f"{affine:.3g} against {identity:.3g})"
        if affine >= identity
        else f"has {p + 1} coefficients per output for fewer than two pairs each, where it is "
        "worse than the identity on new points more often than not"
    )
    warnings.warn(
        f"{name}: from {n} pairs of {p} features the best affine map, on which the model "
        f"builds, {evidence}: the model may denoise new points worse than doing nothing. "
        "Use more pairs.",
        UserWarning,
        stacklevel=stacklevel,
    )


def warn_if_fewer_numbers_than_parameters(X, n_parameters, name: str, *, stacklevel: int):
    """Warn where ``X`` holds fewer numbers than the heads have parameters."""
    if X.size < n_parameters:
        warnings.warn(
            f"{name}: X holds {X.shape[0]} points of {X.shape[1]} features ({X.size} "
            f"numbers) for {n_parameters} parameters; a fit on so few is unreliable and "
            "may denoise worse than the identity. Use more points, or fewer heads.",
            UserWarning,
            stacklevel=stacklevel,
        )


def sure_without_minimum(X, noise_variance, name: str, *, stacklevel: int) -> str | None:
    """``"noiseless"`` or ``"repeated"``, with a warning, where Stein's unbiased
    risk estimate has no minimum on ``X`` (a direction without noise, or rows
    that Gaussian noise cannot repeat); else ``None``. The fit is then the
    untrained Wiener map."""
    n_noiseless = noiseless_directions(X, noise_variance)
    if n_noiseless:
        warnings.warn(
            f"{name}: X has {n_noiseless} direction(s) with a variance below "
            f"{DEGENERATE_FRACTION:g} times noise_variance={noise_variance:.4g} "
            "(constant or duplicated features, or fewer points than features), "
            "where training by Stein's unbiased risk estimate has no minimum. "
            "The answer is the untrained linear start, the Wiener map: it "
            "returns the mean along those directions (a constant feature's "
            "constant) and shrinks the others towards it. Drop such features, "
            "or give clean targets y.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return "noiseless"
    if n_repeated := repeated_rows(X):
        warnings.warn(
            f"{name}: {n_repeated} of the {X.shape[0]} rows of X repeat earlier "
            "ones, which Gaussian noise of any variance cannot produce "
            "(binary, count or duplicated data); there Stein's unbiased risk "
            "estimate has no minimum. The answer is the untrained linear "
            "start, the Wiener map. Give clean targets y to train.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return "repeated"
    return None
