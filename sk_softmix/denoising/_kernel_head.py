"""Kernel heads over the clean targets: the empirical-Bayes posterior mean.

With clean targets ``x_i`` as the prompt's tokens (keys and values), key
norm ``W = U = I / h^2`` and value ``V = I``, a head's score of token ``i``
for the noisy query ``z`` is ``z^T x_i / h^2 - ||x_i||^2 / (2 h^2)``, which
is ``-||z - x_i||^2 / (2 h^2)`` up to a term of the query alone, and the
head returns::

    vote_h(z) = sum_i softmax_i(-||z - x_i||^2 / (2 h^2)) x_i.

At ``h^2 = xi^2`` this is ``E[X | Z = z]`` when ``X`` is drawn from the
training targets and ``Z = X + N(0, xi^2 I)``: the Bayes denoiser of the
empirical prior, the paper's softmax-gated mixture of experts (Proposition
2.1) with one constant expert per training target. A finite sample makes
that prior spiky, so ``h`` is chosen by leave-one-out, and the heads are
blended with the best affine map ``L``, the skip map of the model::

    f(z) = (1 - sum_h w_h) L(z) + sum_h w_h vote_h(z),

with weights ``w_h >= 0`` summing to at most 1 (a convex blend).

Bandwidths and weights are fitted by leave-one-out: each training query
votes without its own target, and its affine prediction is an out-of-fold
one, so the squared error being minimised is a held-out one and the
comparison with the affine map is fair.
"""

import numpy as np
import torch
from sklearn.model_selection import KFold

from ..attention._device import as_tensor
from ..attention._softmax import softmax_attention
from ..theory.affine_maps import best_affine_map
from ..training._bandwidths import nearest_neighbour_scale
from ..training._stopping import significantly_lower
from ..training._units import rms_scale
from ..training._validation import prompt_positions

# Bandwidths tried, in quarter octaves from half the noise's standard
# deviation up to 16 times it, or 4 times the median distance of a query to
# its nearest target where that is larger (small noise: the targets' spacing
# sets the scale, and the grid starts no lower than 1/32 of it). On noisy
# digits the held-out error changed by 2-5% between neighbouring quarter
# octaves at its minimum (h = 1.2-1.7 xi).
SMALLEST_BANDWIDTH = 0.5
LARGEST_BANDWIDTH = 16.0
BANDWIDTH_STEP = 2.0**0.25
MAX_BANDWIDTHS = 64

# Training queries on which bandwidths and weights are chosen (a random
# subset above it): each vote costs O(queries x prompt x features).
MAX_TUNING_QUERIES = 2000

# How much better (standard errors of the per-sample difference of held-out
# squared errors) the heads must be to replace the affine map.
N_STANDARD_ERRORS = 2.0

# Folds of the out-of-fold affine predictions.
N_FOLDS = 5


def kernel_denoiser_parameters(affine, bandwidths, weights):
    """Parameters (NumPy float64) of the blended kernel heads, in the
    estimator's names.

    Parameters
    ----------
    affine : tuple of ndarray
        ``(A, c)``, the best affine map ``z -> A z + c``.
    bandwidths : sequence of float
        ``h`` of each head.
    weights : sequence of float
        ``w_h`` of each head; 0 makes the head return exactly 0.

    Returns
    -------
    dict
        ``U = W = I / h^2`` and ``V = w I`` per head (shape (H, p, p)),
        ``b = 0`` (H, p), ``skip = (1 - sum w) A`` and
        ``intercept = (1 - sum w) c``.
    """
    A, c = affine
    p = len(c)
    bandwidths = np.asarray(bandwidths, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    metric = np.eye(p)[None] / bandwidths[:, None, None] ** 2
    kept = 1.0 - weights.sum()
    return {
        "U": metric,
        "V": weights[:, None, None] * np.eye(p)[None],
        "skip": kept * A,
        "b": np.zeros((len(bandwidths), p)),
        "W": metric.copy(),
        "intercept": kept * c,
    }


def target_votes(queries, targets, bandwidths, exclude=None):
    """Gaussian-kernel votes of the targets, one per bandwidth (torch, no grad).

    Parameters
    ----------
    queries : Tensor of shape (n, p)
        Noisy queries ``z``.
    targets : Tensor of shape (L, p)
        Clean targets ``x_i``: the tokens.
    bandwidths : sequence of float
    exclude : Tensor of shape (n,), dtype int64, default=None
        Each query's own target (``-1``: none), left out of its vote.

    Returns
    -------
    Tensor of shape (H, n, p)
        ``sum_i softmax_i(-||z - x_i||^2 / (2 h^2)) x_i`` for each ``h``.
    """
    p = queries.shape[1]
    precisions = torch.as_tensor(
        1.0 / np.square(bandwidths), dtype=queries.dtype, device=queries.device
    )
    metric = precisions[:, None, None] * torch.eye(p, dtype=queries.dtype, device=queries.device)
    identity = torch.eye(p, dtype=queries.dtype, device=queries.device).expand_as(metric)
    with torch.no_grad():
        return softmax_attention(
            queries, targets, metric, identity, exclude=exclude, key_norm=metric
        )


def bandwidth_grid(noise_std, nearest_distance):
    """Bandwidths in quarter octaves over the noise's scale and the targets'
    spacing (at most ``MAX_BANDWIDTHS`` of them, see the constants)."""
    low = SMALLEST_BANDWIDTH * max(noise_std, nearest_distance / 16.0)
    high = max(LARGEST_BANDWIDTH * noise_std, 4.0 * nearest_distance)
    count = min(MAX_BANDWIDTHS, int(np.floor(np.log(high / low) / np.log(BANDWIDTH_STEP))) + 1)
    return low * BANDWIDTH_STEP ** np.arange(count)


def out_of_fold_affine(noisy, clean, random_state):
    """Predictions of the best affine map, each row from the folds without it."""
    predictions = np.empty_like(clean)
    n_folds = min(N_FOLDS, len(noisy))
    folds = KFold(n_folds, shuffle=True, random_state=random_state.randint(2**31 - 1))
    for fitted, held in folds.split(noisy):
        A, c = best_affine_map(noisy[fitted], clean[fitted])
        predictions[held] = noisy[held] @ A.T + c
    return predictions


def blend_weights(differences, residuals):
    """Least-squares weights ``w`` of ``residual ~ sum_h w_h d_h`` for a convex blend.

    ``differences`` (H, n, p) are ``vote_h - L``, ``residuals`` (n, p) the
    affine map's errors ``x - L``. The weights are non-negative and sum to at
    most 1, so that ``f`` stays a convex combination of the affine map and
    the votes: past 1 the output extrapolates beyond the votes, and on a few
    points, where a vote and the affine map nearly coincide, the unbounded
    weight reached 1e7 (outputs near 1e9 from two training pairs). A simple
    active-set pass for the few heads of a model: heads whose weight is
    negative are dropped and the others refitted, first without the sum's
    bound and, where the sum exceeds 1, on the face where it equals 1.
    """
    weights = _active_set_weights(differences, residuals, on_simplex_face=False)
    if weights.sum() > 1.0:
        weights = _active_set_weights(differences, residuals, on_simplex_face=True)
    return weights


def _active_set_weights(differences, residuals, on_simplex_face):
    active = np.ones(len(differences), dtype=bool)
    weights = np.zeros(len(differences))
    while active.any():
        D = differences[active].reshape(active.sum(), -1)
        gram, moments = D @ D.T, D @ residuals.ravel()
        if on_simplex_face:  # the normal equations with sum(w) = 1 by a multiplier
            k = len(gram)
            gram = np.block([[gram, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            moments = np.append(moments, 1.0)
        solution = np.linalg.lstsq(gram, moments, rcond=None)[0][: active.sum()]
        if (solution >= 0).all():
            weights[active] = solution
            break
        active[np.flatnonzero(active)[solution < 0]] = False
    return weights


def fit_target_kernel_heads(
    noisy, clean, prompt_indices, noise_variance, n_heads, random_state, device
):
    """Bandwidths and weights of ``n_heads`` kernel heads over clean targets.

    Parameters
    ----------
    noisy, clean : ndarray of shape (n, p)
        Training pairs, in units where the data's root-mean-square is 1.
    prompt_indices : ndarray of shape (L,)
        Rows whose clean targets form the prompt.
    noise_variance : float
        ``xi^2`` in the same units.
    n_heads : int
        Heads, chosen greedily: each adds the bandwidth that lowers the
        leave-one-out error most with the weights of all heads refitted
        (non-negative least squares).
    random_state : RandomState
        Draws the tuning queries and the affine map's folds.
    device : torch.device
        Where the votes are computed.

    Returns
    -------
    bandwidths, weights : ndarray of shape (n_heads,)
    kernel_losses, affine_losses : ndarray of shape (n_tuning,)
        Per-sample held-out squared errors with and without the heads.
    """
    n = len(noisy)
    rows = np.arange(n)
    if n > MAX_TUNING_QUERIES:
        rows = np.sort(random_state.choice(n, MAX_TUNING_QUERIES, replace=False))
    affine = out_of_fold_affine(noisy, clean, random_state)[rows]
    residuals = clean[rows] - affine
    queries = as_tensor(noisy[rows], device, torch.float32)
    targets = as_tensor(clean[prompt_indices], device, torch.float32)
    exclude = as_tensor(prompt_positions(prompt_indices, n)[rows], device)
    nearest = nearest_neighbour_scale(queries, targets, exclude)
    bandwidths = bandwidth_grid(np.sqrt(noise_variance), nearest)
    votes = target_votes(queries, targets, bandwidths, exclude).double().cpu().numpy()
    differences = votes - affine[None]
    chosen = []
    weights = np.zeros(0)
    for _ in range(n_heads):
        best = (np.inf, None, None)
        for k in range(len(bandwidths)):
            trial = blend_weights(differences[chosen + [k]], residuals)
            error = residuals - np.tensordot(trial, differences[chosen + [k]], axes=1)
            loss = float(np.mean(np.square(error)))
            if loss < best[0]:
                best = (loss, k, trial)
        chosen.append(best[1])
        weights = best[2]
    fitted = np.tensordot(weights, differences[chosen], axes=1)
    kernel_losses = np.sum(np.square(residuals - fitted), axis=1)
    affine_losses = np.sum(np.square(residuals), axis=1)
    return bandwidths[chosen], weights, kernel_losses, affine_losses


def heads_beat_affine(kernel_losses, affine_losses) -> bool:
    """Whether the heads' held-out squared error beats the affine map's by
    ``N_STANDARD_ERRORS`` standard errors of the per-sample difference."""
    return significantly_lower(
        torch.as_tensor(kernel_losses), torch.as_tensor(affine_losses), N_STANDARD_ERRORS
    )


def fit_kernel_denoiser(
    noisy, clean, prompt_indices, noise_variance, n_heads, random_state, device, *,
    with_heads=True, compare=True, verbose=0,
):  # fmt: skip
    """The model's parameters (``kernel_denoiser_parameters``) and whether the
    heads were kept: the best affine map from ``noisy`` to ``clean``, then
    ``n_heads`` kernel heads over the clean targets of ``prompt_indices``
    blended with it where they beat it on held-out error by
    ``N_STANDARD_ERRORS`` (``compare=False``: kept untested;
    ``with_heads=False``: the affine map alone)."""
    noisy = np.ascontiguousarray(noisy, dtype=np.float64)
    clean = np.ascontiguousarray(clean, dtype=np.float64)
    affine = best_affine_map(noisy, clean)
    bandwidths, weights = np.ones(n_heads), np.zeros(n_heads)
    kept = False
    if with_heads:
        # bandwidths are chosen in units of the data's root-mean-square
        scale = rms_scale(noisy)
        bandwidths, weights, kernel_losses, affine_losses = fit_target_kernel_heads(
            noisy / scale,
            clean / scale,
            prompt_indices,
            noise_variance / scale**2,
            n_heads,
            random_state,
            device,
        )
        bandwidths = bandwidths * scale
        kept = not compare or heads_beat_affine(kernel_losses, affine_losses)
        if verbose:
            print(
                "[SoftmaxAttentionDenoiser] best affine map: held-out squared error "
                f"{affine_losses.mean() * scale**2:.4g}; with kernel heads "
                f"{kernel_losses.mean() * scale**2:.4g} -> "
                f"{'kernel heads' if kept else 'affine map'} kept (the heads must be lower "
                f"by {N_STANDARD_ERRORS:g} standard errors of the per-point difference)"
            )
        if not kept:  # at their fitted bandwidths, reading out nothing
            weights = np.zeros_like(weights)
    return kernel_denoiser_parameters(affine, bandwidths, weights), kept


def kernel_heads_wanted(head, init, residual, key_bias, has_targets, partial, previous_head):
    """Whether a fit with these settings fits kernel heads over the clean
    targets (``head``, resolved), or a ValueError for the combinations that
    do not exist. ``previous_head`` is the kind of the fit ``partial_fit``
    would continue (``None`` for a fresh one)."""
    if partial:
        if head == "kernel" or previous_head == "kernel":
            raise ValueError(
                "partial_fit trains the paper's bilinear heads over noisy prompts; "
                "kernel heads over clean targets are fitted by fit alone. Use "
                "head='auto' or 'bilinear', and call fit (or clone the estimator) "
                "to start anew."
            )
        return False
    if head == "bilinear" or (
        head == "auto" and (not has_targets or init != "auto" or not residual or key_bias)
    ):
        return False
    if not has_targets:
        raise ValueError(
            "head='kernel' votes the clean targets y, but fit got none (it would "
            "train by Stein's unbiased risk estimate): give y of X's shape, or use "
            "head='auto' or 'bilinear'."
        )
    if not residual:
        raise ValueError(
            "head='kernel' blends kernel heads with the best affine map, the skip "
            "map, which needs residual=True; with residual=False use head='bilinear'."
        )
    if init not in ("auto", "linear"):
        raise ValueError(
            f"init={init!r} is a start of the paper's bilinear heads; kernel "
            "heads sit on the best affine map (init='auto' or 'linear'). Use "
            "head='bilinear'."
        )
    return True
