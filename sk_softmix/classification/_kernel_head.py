"""Kernel heads over the labelled prompt: a soft nearest-neighbour vote.

With a key norm ``W = U11`` the head's score of token ``i`` for query ``x``
is ``x_i^T U11 x - 1/2 x_i^T U11 x_i = -1/2 ||x - x_i||^2_U11`` up to a term
of the query alone, which the softmax ignores. With ``U11 = I / h^2``, no
label term (``u12 = 0``) and a read-out of the label only (``v21 = 0``,
``v22 = beta I``), the head returns ``beta`` times the Gaussian-kernel vote
``sum_i softmax_i(-||x - x_i||^2 / (2 h^2)) label_i``: the class
frequencies among the query's neighbours at scale ``h`` (for two classes,
their mean label in {-1, +1}). Neighbourhood components analysis is the
same softmax with a learned metric (Goldberger et al., 2004).

The heads sit on top of the linear start's score (the skip map): where the
vote agrees with the linear score it sharpens it, where the classes are
mixtures of separated clusters it overrules it, which no linear score can.
Their bandwidths and read-outs are fitted by leave-one-out: each training
query votes without its own token, and its linear score is the
out-of-fold one of the linear start's cross-validation, so the
log-loss being minimised is a held-out one, which keeps the vote
calibrated and the comparison with the linear start fair.
"""

import math
from typing import NamedTuple

import numpy as np
import torch

from ..attention._device import as_tensor
from ..training._bandwidths import nearest_neighbour_scale
from ..training._stopping import significantly_lower
from ..training._validation import prompt_positions
from ._heads import classifier_scores, label_blocks, label_width
from ._linear_starts import less_accurate, score_errors, score_losses
from ._neighbours import (
    MAX_SHARE_QUERIES,
    left_out_exactly,
    nearest_tokens,
    token_index,
    truncated_votes,
    with_own_copies,
)
from ._temperature import best_temperature, calibrated_losses

# Bandwidths tried, as multiples of the median leave-one-out distance of a
# training point to its nearest neighbour; read-outs tried for each head.
# Half-octave steps: the leave-one-out log-loss of digits changed by under 1%
# between neighbouring bandwidths at its minimum.
BANDWIDTH_FACTORS = 2.0 ** np.arange(-3.0, 3.01, 0.5)
READOUTS = np.concatenate([[0.0], 2.0 ** np.arange(-2.0, 6.01, 0.5)])

# Training queries on which bandwidths and read-outs are chosen (a random
# subset above it): the votes cost O(queries x prompt x features) each.
MAX_TUNING_QUERIES = 2000
# Query-token distances held at once by the exact votes (float32: 64 MiB),
# and the most squarings of one exponential's weights in a row (each doubles
# the float32 rounding of the kernel's exponent: 64 x 6e-8 at most).
EXACT_BLOCK_ENTRIES = 2**24
MAX_SQUARINGS = 6

# How much better (standard errors of the per-sample difference of held-out
# log-loss) the heads must be to replace the linear start, as for the
# trained heads of ``_objective``: log-loss has a heavy tail.
N_STANDARD_ERRORS = 2.0


def kernel_heads(n_features, n_classes, bandwidths, readouts, metric=None):
    """Parameters (full shapes, NumPy) of Gaussian-kernel heads.

    Head ``h`` has ``U11 = W = A^T A / bandwidths[h]^2`` (``A``: ``metric``,
    (rank, d), the identity where ``None``), ``u12 = 0``, ``v21 = 0`` and
    ``v22 = readouts[h] I``; a zero read-out makes the head return exactly 0.
    """
    width = label_width(n_classes)
    bandwidths = np.asarray(bandwidths, dtype=np.float64)
    readouts = np.asarray(readouts, dtype=np.float64)
    gram = np.eye(n_features) if metric is None else metric.T @ metric
    metric = gram[None] / bandwidths[:, None, None] ** 2
    n_heads = len(bandwidths)
    return {
        "U11": metric,
        "u12": np.zeros((n_heads, width, n_features)),
        "v21": np.zeros((n_heads, width, n_features)),
        "v22": readouts[:, None, None] * np.eye(width)[None],
        "W": metric.copy(),
    }


def kernel_votes(
    features, prompt, n_classes, bandwidth, exclude=None, batch_size=None, token_bias=None
):
    """The Gaussian-kernel vote (n, width) of each query (torch, no grad).

    ``features`` (n, d) are the queries, ``prompt`` the classifier's tokens
    ``(x_i, label block)``; ``exclude`` each query's own token (or -1);
    ``token_bias`` (L,) the log of each token's weight, or ``None``.
    """
    d = features.shape[1]
    heads = kernel_heads(d, n_classes, [bandwidth], [1.0])
    parameters = {
        name: as_tensor(value, features.device, features.dtype) for name, value in heads.items()
    }
    with torch.no_grad():
        return classifier_scores(parameters, features, prompt, exclude, batch_size, token_bias)


def fit_kernel_heads(
    X,
    labels,
    n_classes,
    prompt_indices,
    linear_scores,
    n_heads,
    random_state,
    device,
    weights=None,
    n_neighbors=None,
    candidate_rows=None,
    left_in=None,
    metric=None,
    bandwidths=None,
    measure_left_out=True,
):
    """Bandwidths and read-outs of ``n_heads`` kernel heads on top of a linear score.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training points in the model's coordinates.
    labels : ndarray of shape (n,)
        Class indices.
    n_classes : int
    prompt_indices : ndarray of shape (L,)
        Rows of ``X`` that form the prompt.
    linear_scores : ndarray of shape (n, width)
        Out-of-fold scores of the linear start (``best_linear_start``).
    n_heads : int
        Heads, chosen greedily: each adds the bandwidth and read-out that
        lower the leave-one-out log-loss most given the heads before it
        (read-out 0, an unused head, where none does).
    random_state : RandomState
        Draws the tuning queries when there are more than
        ``MAX_TUNING_QUERIES``.
    device : torch.device
    weights : ndarray of shape (n,), default=None
        The tokens' positive weights (``_tokens``): each prompt token's
        score gains ``log w_i`` and each tuning query's loss counts ``w_i``
        times. ``None``: equal weights.
    n_neighbors : int or None, default=None
        Each query's vote over its ``n_neighbors`` nearest prompt tokens
        only (``_neighbours``), or over the whole prompt (``None``).
    candidate_rows : ndarray, default=None
        The rows whose ``linear_scores`` are out-of-fold, among which the
        tuning queries are drawn (``None``: every row).
    metric : ndarray of shape (rank, d), default=None
        The heads' learned metric ``A`` (``_metric``): the kernel runs in
        the features ``A x``. ``None``: isotropic.
    bandwidths : array-like, default=None
        The bandwidths tried (in the kernel's features); ``None``:
        ``BANDWIDTH_FACTORS`` times the median leave-one-out distance of a
        tuning query to its nearest token.
    measure_left_out : bool, default=True
        Whether to measure, over the whole prompt, the share of mass the
        neighbour restriction leaves out (an exact pass per head kept);
        ``False`` reports 0 (fits whose losses alone are wanted).
    left_in : ndarray of shape (n,), default=None
        The share of its own token's weight each training query keeps in
        the prompt (``_tokens.left_in_shares``: a token of repeated rows
        leaves out one row's share); ``None``: it leaves out the whole token.

    Returns
    -------
    KernelFit
        ``heads``, :func:`kernel_heads`' parameters, the read-outs times
        ``temperature`` (``_temperature``: the skip map's scale where the
        heads are kept); ``kernel_losses`` and ``linear_losses``
        (n_tuning,), the per-sample held-out log-loss of the score with the
        heads at ``temperature`` and of the linear score alone at its own
        best temperature, on the tuning queries; ``kernel_errors`` and ``linear_errors``, their
        misclassifications (0 or 1) by the same two scores;
        ``tuning_weights``, their weights (or ``None``); ``left_out``, the
        largest share of softmax mass a kept head's neighbour restriction
        left out on a tuning query (0 for the exact heads); ``tuning_rows``,
        the rows of the tuning queries.
    """
    if metric is not None:
        # the heads' kernel in the learned features A x (``_metric``)
        X = np.asarray(X, dtype=np.float64) @ metric.T
    n = len(X)
    rows = np.arange(n) if candidate_rows is None else np.asarray(candidate_rows)
    if len(rows) > MAX_TUNING_QUERIES:
        rows = np.sort(random_state.choice(rows, MAX_TUNING_QUERIES, replace=False))
    positions = prompt_positions(prompt_indices, n)
    tuning_weights = None if weights is None else weights[rows]
    own_log_weights = _own_log_weights(rows, positions, weights, left_in)
    if n_neighbors is None:
        votes, bandwidths = _exact_votes(
            X, labels, n_classes, prompt_indices, rows, positions, weights, device, bandwidths
        )
        if own_log_weights is not None:
            token_weights = np.ones(n) if weights is None else weights
            prompt = (
                X[prompt_indices],
                label_blocks(labels[prompt_indices], n_classes),
                np.log(token_weights[prompt_indices]),
            )
            own = positions[rows]
            _put_back_own_copies(votes, X[rows], own, own_log_weights, prompt, bandwidths)
        measured_left_out = None
    else:
        votes, bandwidths, measured_left_out = _neighbour_votes(
            X,
            labels,
            n_classes,
            prompt_indices,
            rows,
            positions,
            weights,
            n_neighbors,
            own_log_weights,
            bandwidths,
        )
    tuning_labels = labels[rows]
    base = linear_scores[rows].astype(np.float64)

    def mean_loss(scores):
        return np.average(score_losses(scores, tuning_labels), weights=tuning_weights)

    linear = base

    def best_head(base):
        # (loss, bandwidth index, read-out): read-out 0 leaves the score as it is
        best = (mean_loss(base), 0, 0.0)
        for k, vote in enumerate(votes):
            for beta in READOUTS[1:]:
                loss = mean_loss(base + beta * vote)
                if loss < best[0]:
                    best = (loss, k, beta)
        return best

    chosen = []
    for _ in range(n_heads):
        _, k, beta = best_head(base)
        chosen.append((k, beta))
        base = base + beta * votes[k]
    # the read-out temperature of the score with the heads. The linear start
    # alone keeps its scale: its out-of-fold scores come from fits on four
    # fifths of the tokens, the start kept from a fit on all of them, and a
    # temperature fitted on the former made the latter worse (LDA on wine
    # and iris: log-loss up 17% and 6%)
    temperature = best_temperature(base, tuning_labels, tuning_weights)
    base = temperature * base
    chosen_bandwidths = [bandwidths[k] for k, _ in chosen]
    chosen_readouts = [temperature * beta for _, beta in chosen]
    chosen_left_out = [0.0] + [
        float(measured_left_out(k).max())
        for k, beta in chosen
        if beta > 0 and measured_left_out is not None and measure_left_out
    ]
    # the start's losses at its own best temperature: the heads' score has one,
    # and heads that only recalibrate an overconfident start (a wide kernel
    # whose vote is nearly constant, times a temperature) must not pass for
    # heads that select (a survey data set: LDA's log-loss 0.27 -> 0.23 with
    # them, and a point of accuracy lost on new data)
    linear_losses = calibrated_losses(linear, tuning_labels, tuning_weights)
    n_features = X.shape[1] if metric is None else metric.shape[1]
    heads = kernel_heads(n_features, n_classes, chosen_bandwidths, chosen_readouts, metric)
    return KernelFit(
        heads,
        score_losses(base, tuning_labels),
        linear_losses,
        tuning_weights,
        max(chosen_left_out),
        rows,
        temperature,
        score_errors(base, tuning_labels),
        score_errors(linear, tuning_labels),
    )


class KernelFit(NamedTuple):
    """What :func:`fit_kernel_heads` found."""

    heads: dict
    kernel_losses: np.ndarray
    linear_losses: np.ndarray
    tuning_weights: np.ndarray | None
    left_out: float
    tuning_rows: np.ndarray
    temperature: float
    kernel_errors: np.ndarray
    linear_errors: np.ndarray


def _exact_votes(
    X, labels, n_classes, prompt_indices, rows, positions, weights, device, bandwidths=None
):
    """Leave-one-out votes of the tuning rows over the whole prompt on the engine,
    in float32, one per bandwidth of the grid, and the grid (``bandwidths``,
    or ``BANDWIDTH_FACTORS`` times the median nearest-neighbour distance)."""
    features = as_tensor(X, device, torch.float32)
    targets = as_tensor(labels, device)
    prompt_rows = as_tensor(prompt_indices, device)
    tokens = features[prompt_rows]
    queries = features[as_tensor(rows, device)]
    exclude = as_tensor(positions[rows], device)
    if bandwidths is None:
        scale = nearest_neighbour_scale(queries, tokens, exclude)
        bandwidths = scale * BANDWIDTH_FACTORS
    token_bias = None
    if weights is not None:
        token_bias = as_tensor(np.log(weights[prompt_indices]), device, torch.float32)
    blocks = label_blocks(targets[prompt_rows], n_classes).to(torch.float32)
    votes = grid_votes(queries, tokens, blocks, bandwidths, exclude, token_bias)
    return [vote.double().cpu().numpy() for vote in votes], np.asarray(bandwidths)


def grid_votes(queries, tokens, blocks, bandwidths, exclude=None, token_bias=None):
    """The Gaussian-kernel votes of the queries over the tokens, one (m, width)
    tensor per bandwidth, from one pass of their distances.

    ``blocks`` (L, width) are the tokens' label blocks, ``exclude`` (m,) each
    query's own token (or -1), ``token_bias`` (L,) the log of each token's
    weight (``None``: equal). The same votes as :func:`kernel_votes` at each
    bandwidth; the kernels of a grid differ only by the scale of the squared
    distances, so those are computed once per block of queries (on digits'
    tuning, a third of the time of one attention pass per bandwidth), and
    the kernel at a bandwidth ``sqrt(2)`` times narrower is the square of
    the wider one's: the grid's half-octaves take an exponential only every
    ``MAX_SQUARINGS + 1`` bandwidths.
    """
    m, n_tokens = len(queries), len(tokens)
    votes = [queries.new_empty((m, blocks.shape[1])) for _ in bandwidths]
    widest_first = np.argsort(-np.asarray(bandwidths, dtype=np.float64), kind="stable")
    # the tokens' relative weights, at most 1, and a column of ones that sums
    # each query's weights in the same product as its vote
    relative = None if token_bias is None else (token_bias - token_bias.max()).exp()
    with_totals = torch.cat([blocks, blocks.new_ones((n_tokens, 1))], dim=1)
    step = max(1, EXACT_BLOCK_ENTRIES // max(n_tokens, 1))
    for start in range(0, m, step):
        stop = min(start + step, m)
        squared = torch.cdist(queries[start:stop], tokens).square_()
        if exclude is not None:
            own = exclude[start:stop]
            mine = own >= 0
            squared[torch.arange(stop - start, device=own.device)[mine], own[mine]] = torch.inf
        # the nearest token at 0: every kernel weight at most 1, the nearest's
        # 1 (the softmax's shift by its largest score, for equal weights)
        nearest = squared.min(dim=1, keepdim=True).values
        squared -= torch.where(torch.isfinite(nearest), nearest, 0.0)
        kernel = torch.empty_like(squared)
        weighted = None if relative is None else torch.empty_like(squared)
        wider, squarings = None, MAX_SQUARINGS
        for index in widest_first:
            h = float(bandwidths[index])
            if squarings < MAX_SQUARINGS and math.isclose(wider**2, 2.0 * h**2, rel_tol=1e-9):
                kernel.square_()
                squarings += 1
            else:
                torch.mul(squared, -0.5 / h**2, out=kernel).exp_()
                squarings = 0
            wider = h
            sums = (kernel if relative is None else torch.mul(kernel, relative, out=weighted)) @ (
                with_totals
            )
            votes[index][start:stop] = sums[:, :-1] / sums[:, -1:]
    return votes


def _own_log_weights(rows, positions, weights, left_in):
    """The log-weight (len(rows),) at which each tuning query's own token stays in
    the prompt (``-inf``: left out whole), or ``None`` where every one is."""
    if left_in is None:
        return None
    own = positions[rows]
    kept = left_in[rows] * (1.0 if weights is None else weights[rows])
    kept = np.where(own >= 0, kept, 0.0)
    if not np.any(kept > 0):
        return None
    with np.errstate(divide="ignore"):
        return np.log(kept)


def _put_back_own_copies(votes, queries, own, own_log_weights, prompt, bandwidths):
    """Recompute, in float64 over the whole prompt, the votes of the tuning queries
    that keep part of their own token.

    ``queries`` (m, d) are the tuning queries, ``own`` (m,) their tokens'
    positions in the prompt, ``own_log_weights`` (m,) the log-weight each
    keeps of it (``-inf``: none, the vote stays as it is); ``prompt`` is
    ``(features (L, d), label blocks (L, width), log-weights (L,))``;
    ``votes`` (one (m, width) per bandwidth) are updated in place.
    """
    again = np.flatnonzero(np.isfinite(own_log_weights))
    tokens, blocks, log_weights = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in prompt)
    # blocks of queries whose distances to every token fit in about 64 MiB
    step = max(1, 2**23 // max(len(tokens), 1))
    for start in range(0, len(again), step):
        chosen = again[start : start + step]
        squared = torch.cdist(torch.as_tensor(queries[chosen], dtype=torch.float64), tokens)
        squared.square_()
        mine = (torch.arange(len(chosen)), torch.as_tensor(own[chosen]))
        squared[mine] = 0.0  # the copy is the query itself
        token_log_weights = log_weights.expand(len(chosen), -1).clone()
        token_log_weights[mine] = torch.as_tensor(own_log_weights[chosen])
        for vote, h in zip(votes, bandwidths, strict=True):
            logits = squared * (-0.5 / h**2) + token_log_weights
            vote[chosen] = (torch.softmax(logits, dim=1) @ blocks).numpy()


def _neighbour_votes(
    X, labels, n_classes, prompt_indices, rows, positions, weights, k, own_log_weights=None,
    bandwidths=None,
):  # fmt: skip
    """Leave-one-out votes of the tuning rows over their ``k`` nearest prompt
    tokens (float64) per bandwidth of the grid, the grid (as
    :func:`_exact_votes`), and a function measuring the share of mass they
    leave out at a bandwidth. Queries with a finite
    ``own_log_weights`` keep their own token at that weight
    (:func:`~._neighbours.with_own_copies`)."""
    prompt_X = np.asarray(X[prompt_indices], dtype=np.float64)
    token_weights = np.ones(len(prompt_indices)) if weights is None else weights[prompt_indices]
    exclude = positions[rows]
    distances, indices = nearest_tokens(token_index(prompt_X), X[rows], k, exclude)
    # the median distance to the nearest token that is not the query itself
    if bandwidths is None:
        positive = np.where(distances > 0, distances, np.inf).min(axis=1)
        positive = positive[np.isfinite(positive)]
        # the lower median, as the exact path's torch.median
        scale = float(np.sort(positive)[(len(positive) - 1) // 2]) if len(positive) else 1.0
        bandwidths = scale * BANDWIDTH_FACTORS
    bandwidths = np.asarray(bandwidths)
    blocks = np.asarray(label_blocks(labels[prompt_indices], n_classes), dtype=np.float64)
    log_weights = np.log(token_weights)
    listed, listed_indices, entry_log_weights = distances, indices, log_weights
    if own_log_weights is not None:
        listed, listed_indices, entry_log_weights = with_own_copies(
            distances, indices, log_weights, exclude, own_log_weights
        )
    votes = [
        truncated_votes(listed, listed_indices, blocks, entry_log_weights, h) for h in bandwidths
    ]

    def measured_left_out(k):
        """The share left out at bandwidth ``k``, measured over the whole prompt
        (only for the bandwidths kept: each costs an exact pass); without a
        query's own copy, whose mass would count as kept: a bound where it
        keeps one."""
        h = bandwidths[k]
        # tuning queries spread over the (sorted) rows
        some = np.unique(np.linspace(0, len(rows) - 1, MAX_SHARE_QUERIES).astype(int))
        return left_out_exactly(
            prompt_X, X[rows][some], distances[some], indices[some], token_weights, h, exclude[some]
        )

    return votes, bandwidths, measured_left_out


def heads_beat_linear(kernel_losses, linear_losses, weights=None, n_effective=None,
                      kernel_errors=None, linear_errors=None,
                      n_standard_errors=N_STANDARD_ERRORS) -> bool:  # fmt: skip
    """Whether the kernel heads' held-out log-loss beats the linear start's by
    ``N_STANDARD_ERRORS`` standard errors of the per-sample difference
    (weighted by ``weights``, the samples' weights, where given, on
    ``n_effective`` samples where given), without their accuracy being lower
    by more than one (:func:`~._linear_starts.less_accurate`, where the
    per-sample ``kernel_errors`` and ``linear_errors`` are given: on
    hayes-roth the heads lowered the log-loss of the quadratic start and
    cost 4 points of accuracy)."""
    lower = significantly_lower(
        torch.as_tensor(kernel_losses),
        torch.as_tensor(linear_losses),
        n_standard_errors,
        None if weights is None else torch.as_tensor(weights),
        n_effective,
    )
    if not lower or kernel_errors is None:
        return lower
    return not less_accurate(kernel_errors, linear_errors, weights, n_effective)
