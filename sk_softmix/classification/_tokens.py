"""The kernel heads' prompt: distinct labelled points, each a token with a weight.

A token's weight enters its score as a key bias ``log w_i``: the softmax
over tokens then weighs token ``i`` as ``w_i`` copies of it would be
weighed. So repeated rows become one token whose weight is their summed
``sample_weight`` (times their ``class_weight``), and ``sample_weight=k``
on a row fits the same model as ``k`` copies of it.

Merging matters most for leave-one-out, where a training query must not
see itself. Which rows count as "itself" is the question. Where the
features are measurements, a repeated row is a copy: left in the prompt it
would vote for the query's own label at distance 0, and the bandwidth search
would pick a kernel far too narrow (200 rows given twice raised the held-out
log-loss from 0.16 to 2.9), so a query leaves out its whole token. Where
the features are discrete, repeated rows are observations, and a new point
will often equal a training point (KEEL's hayes-roth: 160 rows of 93
distinct points; leaving out every copy cost 0.17 of accuracy), so a query
leaves out ``m`` rows of its token, ``m`` being the smallest number of rows
any token has (:func:`left_in_shares`): one row where some row is unique,
the whole copy where every row was given ``m`` times, so that such data
given twice tunes exactly as given once. What tells the two apart
(:func:`repeats_are_observations`): measurements have a feature whose value
alone tells every distinct point apart; discrete features share each value
among many points.
"""

import numpy as np
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import _check_sample_weight


def row_weights(y, classes, sample_weight, class_weight, X) -> np.ndarray | None:
    """Each training row's weight: ``sample_weight`` times its class's weight.

    ``None`` when neither is given. ``class_weight`` is scikit-learn's (a
    dict or ``"balanced"``, computed on the weighted counts); the weights
    must be finite, non-negative and not all zero.
    """
    if sample_weight is None and class_weight is None:
        return None
    weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    labels = np.searchsorted(classes, y)
    if class_weight == "balanced":
        # LogisticRegression's n_samples / (n_classes * count), with weighted counts
        totals = np.bincount(labels, weights=weights, minlength=len(classes))
        with np.errstate(divide="ignore"):
            per_class = np.where(totals > 0, totals.sum() / (len(classes) * totals), 0.0)
        weights = weights * per_class[labels]
    elif class_weight is not None:
        per_class = compute_class_weight(class_weight, classes=classes, y=y)
        weights = weights * per_class[labels]
    if not np.sum(weights) > 0:
        raise ValueError(
            "sample_weight (times class_weight) is zero for every sample: there is nothing to fit."
        )
    return weights


def distinct_tokens(X, labels, weights=None, return_counts=False):
    """Merge identical ``(x, label)`` rows into weighted tokens.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    labels : ndarray of shape (n,)
        Class indices.
    weights : ndarray of shape (n,), default=None
        Non-negative weights of the rows (``None``: ones); rows of weight 0
        are left out.

    Returns
    -------
    rows : ndarray of shape (L,)
        For each token, the first row of ``X`` that holds it, in increasing
        order: tokens keep the order of the rows (all of them when no row
        repeats and none weighs 0).
    token_weights : ndarray of shape (L,)
        The summed weights of each token's rows (float64).
    counts : ndarray of shape (L,)
        How many rows (of positive weight) each token holds; only with
        ``return_counts``.
    """
    weights = np.ones(len(X)) if weights is None else np.asarray(weights, dtype=np.float64)
    kept = np.flatnonzero(weights > 0)
    # -0.0 + 0.0 is 0.0: a signed zero is the same point as 0
    keys = np.column_stack([np.asarray(X[kept], dtype=np.float64) + 0.0, labels[kept]])
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    token_of_unique = np.empty_like(order)
    token_of_unique[order] = np.arange(len(order))
    token_of_row = token_of_unique[inverse.ravel()]
    token_weights = np.bincount(token_of_row, weights=weights[kept], minlength=len(first))
    if return_counts:
        return kept[first[order]], token_weights, np.bincount(token_of_row, minlength=len(first))
    return kept[first[order]], token_weights


def repeats_are_observations(X) -> bool:
    """Whether repeated rows of ``X`` (its distinct tokens) are observations, not copies.

    True where no feature alone tells the distinct points apart: every
    feature has fewer distinct values than ``X`` has distinct rows
    (discrete, categorical or rounded features). A continuous measurement
    almost never takes the same value twice, so where one feature has a
    value of its own for every point, points that repeat were copied.
    """
    X = np.asarray(X, dtype=np.float64) + 0.0  # -0.0 is 0.0
    n_points = len(np.unique(X, axis=0))
    return all(len(np.unique(column)) < n_points for column in X.T)


def left_in_shares(counts) -> np.ndarray | None:
    """The share of its own token's weight that a leave-one-out query keeps in the prompt.

    A query leaves out ``m = min(counts)`` rows of its token, the rest of
    it stays: ``1 - m / counts`` (0 for a token of ``m`` rows). ``None``
    where every token is left out whole (no token has more than ``m`` rows).
    """
    counts = np.asarray(counts, dtype=np.float64)
    shares = 1.0 - counts.min() / counts
    return shares if np.any(shares > 0) else None


def effective_size(token_weights, counts, unit) -> float:
    """The number of independent observations tokens stand for, for standard errors.

    Kish's ``(sum w)^2 / sum w^2`` over the rows rather than the tokens
    (a token of ``c`` rows of equal weight ``w_i / c`` adds ``w_i^2 / c``),
    in units of ``unit`` rows (the smallest count of the whole prompt), the
    copies :func:`left_in_shares` takes as one observation: 24 distinct
    points standing for 1,760 rows count as 1,760; data given twice counts
    as given once.
    """
    token_weights = np.asarray(token_weights, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    return float(token_weights.sum() ** 2 / np.sum(token_weights**2 / counts) / unit)


# Tokens on which the linear starts are compared by cross-validation and
# among which the kernel heads' tuning queries are drawn: above it, a
# stratified subset. The comparison's standard errors are then already
# small, and five folds of logistic regression on a million rows would cost
# more than everything else.
MAX_SELECTION_TOKENS = 20_000


def selection_rows(labels, max_rows: int, random_state) -> np.ndarray | None:
    """A stratified random subset of about ``max_rows`` rows (sorted), every class
    with at least 2 of its rows (or all it has), or ``None`` for all rows."""
    n = len(labels)
    if n <= max_rows:
        return None
    chosen = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        size = min(len(members), max(2, round(max_rows * len(members) / n)))
        chosen.append(random_state.choice(members, size, replace=False))
    return np.sort(np.concatenate(chosen))


def equal_weights(weights) -> bool:
    """Whether every weight is the same: then weighted and plain fits coincide."""
    return weights is None or bool(np.all(weights == weights[0]))


def penalty_weights(weights, n_rows: int, n_observations=None) -> np.ndarray | None:
    """``sample_weight`` for a penalised fit of ``n_rows`` tokens of ``weights``
    (``None``: equal): scaled to sum to ``n_observations`` (``None``: one per
    token), so that the penalty weighs against as many observations as the
    tokens stand for (24 distinct points of 1,760 rows: 1,760, where scaled
    to one per token the penalty was 73 times too strong). ``None`` where
    the scaled weights are all 1.
    """
    total = n_rows if n_observations is None else n_observations
    if weights is None:
        weights = np.ones(n_rows)
    scaled = np.asarray(weights, dtype=np.float64) * (total / np.sum(weights))
    return None if np.all(scaled == 1.0) else scaled


def check_class_counts(labels, classes, minimum: int) -> None:
    """A ``ValueError`` unless every class has at least ``minimum`` samples
    (kernel heads: distinct points of positive weight, at least 1; bilinear
    heads: 2, since a training query leaves itself out of the prompt)."""
    counts = np.bincount(labels, minlength=len(classes))
    if counts.min() >= minimum:
        return
    what = "sample" if minimum == 2 else "distinct sample of positive weight"
    raise ValueError(
        f"Every class needs at least {minimum} {what}{'s' if minimum > 1 else ''} "
        f"(a training query leaves itself out of the prompt); class "
        f"{classes.tolist()[counts.argmin()]!r} has {counts.min()}."
    )
