"""Kernel heads over a query's nearest tokens: the softmax restricted to where its mass is.

A Gaussian-kernel head weighs token ``i`` by ``w_i exp(-||x - x_i||^2 /
(2 h^2))``: a token a few bandwidths beyond the query's neighbours weighs
less than float rounding of the vote, yet the exact head scores every
token of the prompt, ``O(n_queries x L)``. Restricted to the query's ``k``
nearest tokens (a tree from :mod:`sklearn.neighbors` in low dimension,
chunked brute force above), the vote costs ``O(k)`` per query after the
search, and memory stays at ``chunk x k``.

What is left out is bounded: every token beyond the ``k``-th neighbour lies
at least as far as it, so the weight left out is at most ``(W - W_k)
exp(-d_k^2 / (2 h^2))``, with ``W`` the prompt's total weight and ``W_k``
that of the ``k`` tokens kept. Its share ``eps`` of the softmax's mass
bounds the change of the vote: each vote entry moves by at most ``2 eps``.
That bound (:func:`left_out_bound`) puts every token left out at the
``k``-th distance, loose where the kernel spans more than ``k`` tokens; on
the queries the heads are tuned on, :func:`left_out_exactly` measures the
share instead, and that is what the classifier reports.
The restricted head is a model of its own (a Gaussian-weighted vote of the
``k`` nearest neighbours), tuned by leave-one-out and used for prediction
alike, so it stays calibrated where ``eps`` is not small (the widest
bandwidths of the grid on large prompts).
"""

import numpy as np
import torch
from scipy.special import logsumexp
from sklearn.neighbors import NearestNeighbors

# ``n_neighbors="auto"``: the exact heads up to this many prompt tokens (the
# reference, and cheap there), ``AUTO_NEIGHBOURS`` nearest tokens above.
EXACT_MAX_TOKENS = 20_000
AUTO_NEIGHBOURS = 64
# Queries whose neighbour lists are held at once: 2 x 8 bytes x k each.
QUERY_CHUNK = 8192
# Tuning queries on which the share of mass left out is measured exactly
# (each costs a pass over the whole prompt).
MAX_SHARE_QUERIES = 256


def resolve_n_neighbors(n_neighbors, n_tokens: int) -> int | None:
    """The number of nearest tokens each query attends to, or ``None`` for all."""
    if n_neighbors == "auto":
        n_neighbors = None if n_tokens <= EXACT_MAX_TOKENS else AUTO_NEIGHBOURS
    if n_neighbors is None or n_neighbors >= n_tokens:
        return None
    return int(n_neighbors)


def nearest_tokens(index, queries, k, exclude=None):
    """Distances and indices (m, k) of each query's ``k`` nearest tokens.

    ``index`` is a fitted :class:`~sklearn.neighbors.NearestNeighbors` over
    the prompt; ``exclude`` (m,) the token each query must not see (its own,
    for leave-one-out) or -1. Rows are sorted by distance.
    """
    m = len(queries)
    distances = np.empty((m, k))
    indices = np.empty((m, k), dtype=np.int64)
    extra = 0 if exclude is None else 1
    for start in range(0, m, QUERY_CHUNK):
        stop = min(start + QUERY_CHUNK, m)
        found_distances, found = index.kneighbors(queries[start:stop], n_neighbors=k + extra)
        if extra:
            # drop the excluded token where it was found, else the farthest
            own = found == exclude[start:stop, None]
            own[~own.any(axis=1), -1] = True
            keep = ~own
            found_distances = found_distances[keep].reshape(stop - start, k)
            found = found[keep].reshape(stop - start, k)
        distances[start:stop], indices[start:stop] = found_distances, found
    return distances, indices


def token_index(prompt_X) -> NearestNeighbors:
    """A neighbour index over the prompt's features (a tree in low dimension)."""
    return NearestNeighbors(algorithm="auto").fit(prompt_X)


def truncated_votes(distances, indices, label_blocks, log_weights, bandwidth):
    """Gaussian-kernel votes (m, width) over each query's listed tokens.

    ``sum_i softmax_i(-d_i^2 / (2 h^2) + log w_i) label_i`` over the listed
    tokens, for ``distances`` and ``indices`` (m, k) of each query's nearest
    tokens (:func:`nearest_tokens`), the tokens' ``label_blocks`` (L, width)
    and ``log_weights``: (L,) per token, or (m, k) per listed entry (where a
    query keeps part of its own token, :func:`with_own_copies`).
    """
    if log_weights.shape != distances.shape:
        log_weights = log_weights[indices]
    logits = -np.square(distances) / (2.0 * bandwidth**2) + log_weights  # (m, k)
    probabilities = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
    return np.einsum("mk,mkc->mc", probabilities, label_blocks[indices])


def with_own_copies(distances, indices, log_weights, own, own_log_weights):
    """Each query's listed tokens and its own token, put back at part of its weight.

    For leave-one-out over merged tokens (``_tokens.left_in_shares``): the
    query's own token ``own`` (m,) (-1: none), left out of the lists by
    :func:`nearest_tokens`, re-enters first, at distance 0 with log-weight
    ``own_log_weights`` (m,) (``-inf``: it stays out). Returns distances,
    indices and per-entry log-weights (m, k + 1) for :func:`truncated_votes`.
    """
    back = (own >= 0) & np.isfinite(own_log_weights)
    distances = np.column_stack([np.zeros(len(own)), distances])
    indices = np.column_stack([np.where(back, own, indices[:, 0]), indices])
    entry_log_weights = log_weights[indices]
    entry_log_weights[:, 0] = np.where(back, own_log_weights, -np.inf)
    return distances, indices, entry_log_weights


def left_out_bound(distances, indices, log_weights, bandwidth, total_weight):
    """A bound (m,) on the share of each query's full softmax mass its listed tokens miss.

    Every token not listed lies at least as far as the ``k``-th, so their
    mass is at most ``(W - W_k) exp(-d_k^2 / (2 h^2))``; ``total_weight``
    (m,) or float is ``W``, the weight of every token each query may attend
    to (less its own token's for leave-one-out). Each vote entry of
    :func:`truncated_votes` is within twice the share of the exact head's.
    """
    logits = -np.square(distances) / (2.0 * bandwidth**2) + log_weights[indices]  # (m, k)
    log_kept = logsumexp(logits, axis=1)
    kept_weight = np.exp(log_weights[indices]).sum(axis=1)
    omitted = np.maximum(np.asarray(total_weight) - kept_weight, 0.0)
    with np.errstate(divide="ignore"):
        log_omitted = np.log(omitted) - np.square(distances[:, -1]) / (2.0 * bandwidth**2)
    return np.exp(log_omitted - np.logaddexp(log_omitted, log_kept))


def neighbour_head_votes(index, queries, label_blocks, token_weights, bandwidths, readouts, k):
    """``sum_h readouts[h] * vote_h`` (m, width) of kernel heads restricted to each
    query's ``k`` nearest tokens, in chunks of ``QUERY_CHUNK`` queries.

    ``index`` is :func:`token_index` over the prompt whose tokens have
    ``label_blocks`` (L, width) and ``token_weights`` (L,); heads of read-out
    0 are skipped.
    """
    log_weights = np.log(token_weights)
    votes = np.zeros((len(queries), label_blocks.shape[1]))
    for start in range(0, len(queries), QUERY_CHUNK):
        chunk = slice(start, start + QUERY_CHUNK)
        distances, indices = nearest_tokens(index, queries[chunk], k)
        for bandwidth, readout in zip(bandwidths, readouts, strict=True):
            if readout != 0:
                vote = truncated_votes(distances, indices, label_blocks, log_weights, bandwidth)
                votes[chunk] += readout * vote
    return votes


def left_out_exactly(prompt_X, queries, distances, indices, token_weights, bandwidth, exclude=None):
    """The share (m,) of each query's full softmax mass that its listed tokens miss.

    The kernel sum over the whole prompt but the query's own token
    (``exclude``, -1 or ``None`` for none), ``sum_i w_i exp(-d_i^2 / (2
    h^2))``, in float64 by chunked distances (``O(m L)``: run on the few
    thousand tuning queries only), less the listed tokens' mass.
    """
    log_weights = torch.as_tensor(np.log(token_weights))
    tokens = torch.as_tensor(prompt_X, dtype=torch.float64)
    exclude = np.full(len(queries), -1) if exclude is None else np.asarray(exclude)
    total = np.empty(len(queries))
    # blocks of queries whose distances to every token fit in about 64 MiB
    step = max(1, 2**23 // max(len(tokens), 1))
    for start in range(0, len(queries), step):
        block = torch.as_tensor(queries[start : start + step], dtype=torch.float64)
        squared = torch.cdist(block, tokens).square_()  # (step, L)
        own = torch.as_tensor(exclude[start : start + step])
        mine = torch.nonzero(own >= 0).flatten()
        squared[mine, own[mine]] = torch.inf
        squared.mul_(-0.5 / bandwidth**2).add_(log_weights)
        total[start : start + step] = torch.logsumexp(squared, dim=1).exp().numpy()
    kept = np.sum(token_weights[indices] * np.exp(-np.square(distances) / (2 * bandwidth**2)), 1)
    # the listed tokens' mass is part of the total: what is left, up to rounding
    omitted = np.maximum(total - kept, 0.0)
    return omitted / np.maximum(total, np.finfo(np.float64).tiny)
