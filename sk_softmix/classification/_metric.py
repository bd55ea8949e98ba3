"""A learned metric for the kernel heads: ``U11 = W = A^T A / h^2``.

The isotropic heads measure every standardised feature alike; the paper's
heads have a full key matrix ``U11``. With ``U11 = W = A^T A`` a head's
score of token ``i`` is ``-1/2 ||A (x - x_i)||^2`` up to a term of the query
alone: a Gaussian kernel in the features ``A x``. Fitting ``A`` by the
leave-one-out log-loss of the softmax vote is neighbourhood components
analysis (Goldberger et al., 2004); here the vote sits on top of the
out-of-fold linear score, with a read-out fitted alongside, so the metric
is learned for what the linear score misses.

Two forms: ``"diagonal"``, ``A = diag(s)``, a scale per feature (d
parameters: which features matter, and how much), and ``"full"``, ``A`` of
shape (rank, d) (low rank allowed). On the KEEL panel the diagonal form
helped where features differ in relevance (hayes-roth, whose first feature
is a random code; contraceptive; ionosphere) and the full one overfitted on
a few hundred points (rank 60 on sonar's 166 training points). So the
default keeps the diagonal metric only where it beats the isotropic heads
on held-out queries (:func:`metric_for_heads`): the metric is fitted on each
half of the tuning queries and both kernels are compared on the other.
"""

from typing import NamedTuple

import numpy as np
import torch

from ..attention._device import as_tensor
from ..training._stopping import significantly_lower
from ._heads import classification_losses, label_blocks
from ._kernel_head import fit_kernel_heads

METRICS = ("auto", "isotropic", "diagonal", "full")

# L-BFGS iterations of the metric's fit, and the most tokens it runs on
# (their pairwise scores, 8 x MAX_METRIC_TOKENS^2 bytes, are its memory and
# its cost per iteration).
MAX_METRIC_ITERATIONS = 30
MAX_METRIC_TOKENS = 500
# Bandwidths (in the learned features, where the fit's is 1) at which the
# metric's heads are judged: half-octaves about 1, since the judging queries
# vote over the whole prompt, denser than the half the metric was fitted on.
JUDGING_BANDWIDTHS = 2.0 ** np.arange(-1.5, 0.51, 0.5)
# Standard errors by which the learned metric's held-out log-loss must beat
# the isotropic heads' (``metric="auto"``).
N_STANDARD_ERRORS = 2.0


def metric_start(X, bandwidth, kind, rank):
    """The learned metric's parameters at the start: ``s = 1 / h`` per feature
    (``"diagonal"``); ``A = I / h`` at full rank, else the ``rank`` leading
    principal directions of ``X`` over ``h`` (``"full"``)."""
    d = X.shape[1]
    if kind == "diagonal":
        return np.full(d, 1.0 / bandwidth)
    if rank >= d:
        return np.eye(d) / bandwidth
    _, _, directions = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    start = np.zeros((rank, d))
    start[: len(directions)] = directions[:rank]
    return start / bandwidth


def metric_matrix(parameters):
    """``A`` from the parameters: ``diag(s)`` for a vector, the matrix itself else."""
    if parameters.ndim == 1:
        return torch.diag(parameters) if torch.is_tensor(parameters) else np.diag(parameters)
    return parameters


def metric_loss(A, log_readout, features, blocks, labels, linear, log_weights, weights=None):
    """Mean leave-one-out log-loss (torch scalar) of ``linear + beta * vote_A``.

    Each of the n ``features`` (n, d) votes over the others with weights
    ``softmax_j(-1/2 ||A (x - x_j)||^2 + log w_j)``; ``blocks`` (n, width)
    are their label blocks, ``linear`` (n, width) their out-of-fold linear
    scores, ``beta = exp(log_readout)``; ``weights`` weigh the queries.
    """
    projected = features @ A.T
    # |a|^2 + |b|^2 - 2 a.b: matrix products, whose gradient is cheap (cdist's
    # backward took two thirds of the fit), exact enough in float64
    norms = projected.square().sum(dim=1)
    squared = (norms[:, None] + norms[None, :] - 2.0 * projected @ projected.T).clamp_(min=0.0)
    logits = -0.5 * squared + log_weights
    logits.fill_diagonal_(-torch.inf)  # leave-one-out: a query never sees its token
    votes = torch.softmax(logits, dim=1) @ blocks
    losses = classification_losses(linear + log_readout.exp() * votes, labels)
    if weights is None:
        return losses.mean()
    return (weights * losses).sum() / weights.sum()


def metric_loss_and_gradient(
    parameters, log_readout, features, blocks, labels, linear, log_weights, weights=None
):
    """:func:`metric_loss` and its gradients with respect to ``parameters``
    (``s`` (d,) or ``A`` (rank, d)) and ``log_readout``, written out.

    The fit's cost is this function, about forty times: autograd's graph of
    the n x n softmax took 1.5 to 2 times as long on 500 tokens. With
    ``S`` the leave-one-out weights, ``v = S B`` the votes, ``G`` the
    loss's gradient with respect to the scores ``linear + beta v`` and
    ``D = S * (beta G B^T - rowsum(S * beta G B^T))`` that with respect to
    the logits, the squared distances ``||A (x_i - x_j)||^2`` receive
    ``-D / 2``; their symmetric part ``M`` gives the projected points
    ``P = X A^T`` the gradient ``2 (diag(M 1) P - M P)``, and ``A`` its
    product with ``X``.
    """
    diagonal = parameters.ndim == 1
    projected = features * parameters if diagonal else features @ parameters.T
    norms = projected.square().sum(dim=1)
    squared = torch.addmm(norms[:, None] + norms[None, :], projected, projected.T, alpha=-2.0)
    logits = squared.clamp_(min=0.0).mul_(-0.5).add_(log_weights)
    logits.fill_diagonal_(-torch.inf)  # leave-one-out: a query never sees its token
    attention = torch.softmax(logits, dim=1)
    del logits, squared
    votes = attention @ blocks
    readout = log_readout.exp()
    scores = linear + readout * votes
    query_weights = (
        torch.full((len(features),), 1.0 / len(features), dtype=scores.dtype, device=scores.device)
        if weights is None
        else weights / weights.sum()
    )
    if scores.shape[1] == 1:
        signs = 2.0 * labels.to(scores.dtype) - 1
        margins = -signs * scores[:, 0]
        losses = torch.nn.functional.softplus(margins)
        score_gradient = (-signs * torch.sigmoid(margins))[:, None]
    else:
        log_probabilities = torch.log_softmax(scores, dim=1)
        losses = -log_probabilities.gather(1, labels[:, None])[:, 0]
        score_gradient = log_probabilities.exp()
        score_gradient[torch.arange(len(labels), device=labels.device), labels] -= 1.0
    loss = query_weights @ losses
    score_gradient *= query_weights[:, None]
    readout_gradient = readout * (score_gradient * votes).sum()
    vote_gradient = readout * score_gradient
    # the logits' gradient, overwriting the attention's storage
    offsets = (vote_gradient * votes).sum(dim=1, keepdim=True)
    logit_gradient = attention.mul_(torch.addmm(-offsets, vote_gradient, blocks.T))
    symmetric = (logit_gradient + logit_gradient.T).mul_(-0.5)
    projected_gradient = 2.0 * (
        symmetric.sum(dim=1, keepdim=True) * projected - symmetric @ projected
    )
    if diagonal:
        parameter_gradient = (projected_gradient * features).sum(dim=0)
    else:
        parameter_gradient = projected_gradient.T @ features
    return loss, parameter_gradient, readout_gradient


def learn_metric(
    X, labels, n_classes, linear_scores, bandwidth, readout, kind, rank, device, weights=None,
    start=None,
):  # fmt: skip
    """``A`` (rank, d) that minimises :func:`metric_loss` on the tokens ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The fitting tokens (each votes over the others).
    labels : ndarray of shape (n,)
    n_classes : int
    linear_scores : ndarray of shape (n, width)
        Their out-of-fold linear scores.
    bandwidth, readout : float
        The isotropic head's, where the fit starts (a read-out of 0 starts
        at 1).
    kind : {"diagonal", "full"}
    rank : int
        Rows of ``A`` for ``"full"``.
    device : torch.device
    weights : ndarray of shape (n,), default=None
        The tokens' weights, as key biases and for the queries' losses.
    start : ndarray, default=None
        The parameters to start from (``s`` or ``A``), in place of
        :func:`metric_start`'s.

    Returns
    -------
    A : ndarray of shape (rank, d)
    parameters : ndarray
        ``s`` (d,) for the diagonal metric, ``A`` for the full one.
    readout : float
        Where the loss did not stay finite, the start's parameters.
    """
    dtype = torch.float64
    features = as_tensor(np.asarray(X, dtype=np.float64), device, dtype)
    blocks = as_tensor(np.asarray(label_blocks(labels, n_classes), dtype=np.float64), device)
    targets = as_tensor(labels, device)
    linear = as_tensor(np.asarray(linear_scores, dtype=np.float64), device, dtype)
    query_weights, log_weights = None, torch.zeros(len(X), dtype=dtype, device=device)
    if weights is not None:
        query_weights = as_tensor(np.asarray(weights, dtype=np.float64), device, dtype)
        log_weights = query_weights.log()
    if start is None:
        start = metric_start(np.asarray(X, dtype=np.float64), bandwidth, kind, rank)
    # a copy: L-BFGS updates its parameters in place
    parameters = torch.tensor(np.array(start, dtype=np.float64), dtype=dtype, device=device)
    parameters.requires_grad_(True)
    start_readout = readout if readout > 0 else 1.0
    log_readout = torch.tensor(np.log(start_readout), dtype=dtype, device=device)
    log_readout.requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [parameters, log_readout], max_iter=MAX_METRIC_ITERATIONS, line_search_fn="strong_wolfe"
    )

    def closure():
        loss, parameters.grad, log_readout.grad = metric_loss_and_gradient(
            parameters.detach(), log_readout.detach(), features, blocks, targets, linear,
            log_weights, query_weights,
        )  # fmt: skip
        return loss

    optimiser.step(closure)
    fitted = parameters.detach().cpu().numpy().copy()
    fitted_readout = float(log_readout.detach().exp())
    if not (np.all(np.isfinite(fitted)) and np.isfinite(fitted_readout)):
        # a step that overflowed: the start, which the isotropic heads had
        fitted, fitted_readout = np.array(start, dtype=np.float64), start_readout
    return np.asarray(metric_matrix(fitted)), fitted, fitted_readout


class MetricChoice(NamedTuple):
    """What :func:`metric_for_heads` decided: ``metric``, ``A`` or ``None``;
    the mean held-out log-losses of the learned and the isotropic heads;
    ``held_out_losses`` and ``held_out_errors``, the learned heads'
    per-query log-loss and misclassification on the isotropic fit's tuning
    rows, each from the fit on the other half (or ``None``)."""

    metric: np.ndarray | None
    learned_loss: float
    isotropic_loss: float
    held_out_losses: np.ndarray | None = None
    held_out_errors: np.ndarray | None = None


def metric_for_heads(kind, rank, X, labels, n_classes, linear_scores, isotropic, random_state,
                     device, weights=None, **tuning):  # fmt: skip
    """The learned metric ``A`` for the kernel heads, or ``None`` for the isotropic one.

    ``isotropic`` is the isotropic heads' ``KernelFit``; ``A`` starts from
    its first head's bandwidth and read-out. With ``kind="auto"`` (the
    diagonal metric) their tuning queries are split in two halves at random,
    and ``A`` is fitted on each half (at most ``MAX_METRIC_TOKENS`` of it)
    and judged on the other: the heads in its features, their bandwidth,
    read-out and temperature tuned on the judging half as
    :func:`~._kernel_head.fit_kernel_heads` does (over the whole prompt, at
    ``JUDGING_BANDWIDTHS``), against the isotropic heads' losses there (not
    at all where a half has fewer queries than ``A`` has scales). ``A`` is
    kept where its log-loss over both halves is lower by
    ``N_STANDARD_ERRORS`` standard errors of the paired difference, and then
    fitted on every tuning query (at most ``MAX_METRIC_TOKENS``); its
    per-query held-out losses and errors come back with it, for judging the
    heads against the linear start (the refit's own losses are of the
    queries it was fitted on: on ionosphere 0.135 against 0.288 held out).
    ``"diagonal"`` and ``"full"`` fit it on them at once and keep it.
    ``tuning`` holds the other arguments of ``fit_kernel_heads``
    (``prompt_indices``, ``n_heads``, ``n_neighbors``, ``left_in``).
    """
    rows = random_state.permutation(isotropic.tuning_rows)
    bandwidth = 1.0 / np.sqrt(isotropic.heads["U11"][0, 0, 0])
    readout = float(np.ravel(isotropic.heads["v22"])[0]) / isotropic.temperature
    form = "diagonal" if kind == "auto" else kind

    def learned(fit_rows, start=None):
        fit_rows = np.sort(fit_rows[:MAX_METRIC_TOKENS])
        return learn_metric(
            X[fit_rows], labels[fit_rows], n_classes, linear_scores[fit_rows], bandwidth, readout,
            form, rank, device, None if weights is None else weights[fit_rows], start,
        )  # fmt: skip

    if kind != "auto":
        return MetricChoice(learned(rows)[0], np.nan, np.nan)
    halves = np.array_split(rows, 2)
    if min(len(half) for half in halves) < max(2, X.shape[1]):
        # fewer fitting queries than scales to fit: the metric would fit the
        # half's noise (lfw_subset, 625 pixels and 80 queries a half: kept in
        # one fold of five, it doubled the log-loss)
        return MetricChoice(None, np.nan, np.nan)

    def judged(metric, judging_rows):
        # the judging queries number under MAX_TUNING_QUERIES: no draw is made
        return fit_kernel_heads(
            X, labels, n_classes, linear_scores=linear_scores,
            random_state=np.random.RandomState(0), device=device, weights=weights,
            candidate_rows=np.sort(judging_rows), metric=metric,
            bandwidths=JUDGING_BANDWIDTHS, measure_left_out=False, **tuning,
        )  # fmt: skip

    # the isotropic heads' losses of the judging queries, from their own fit
    # (tuned on every tuning query: as much in their favour as the learned
    # heads' tuning on the judging half is in theirs)
    learned_losses, learned_errors, isotropic_losses, places = [], [], [], []
    for fit_half, judging_half in ((halves[0], halves[1]), (halves[1], halves[0])):
        A, parameters, _ = learned(fit_half)
        judging_half = np.sort(judging_half)
        judging = judged(A, judging_half)
        learned_losses.append(judging.kernel_losses)
        learned_errors.append(judging.kernel_errors)
        # tuning_rows are sorted: each judging query's place among them
        where = np.searchsorted(isotropic.tuning_rows, judging_half)
        isotropic_losses.append(isotropic.kernel_losses[where])
        places.append(where)
    learned_losses, isotropic_losses, places = (
        np.concatenate(learned_losses),
        np.concatenate(isotropic_losses),
        np.concatenate(places),
    )
    held_out_losses = np.empty(len(isotropic.tuning_rows))
    held_out_losses[places] = learned_losses
    held_out_errors = np.empty(len(isotropic.tuning_rows))
    held_out_errors[places] = np.concatenate(learned_errors)
    judging_weights = None if weights is None else weights[isotropic.tuning_rows[places]]
    keep = significantly_lower(
        torch.as_tensor(learned_losses),
        torch.as_tensor(isotropic_losses),
        N_STANDARD_ERRORS,
        None if judging_weights is None else torch.as_tensor(judging_weights),
    )
    learned_loss = float(np.average(learned_losses, weights=judging_weights))
    isotropic_loss = float(np.average(isotropic_losses, weights=judging_weights))
    if not keep:
        return MetricChoice(None, learned_loss, isotropic_loss)
    # kept: fitted on every tuning query, from where the last half's fit ended
    return MetricChoice(
        learned(rows, parameters)[0], learned_loss, isotropic_loss, held_out_losses,
        held_out_errors,
    )  # fmt: skip
