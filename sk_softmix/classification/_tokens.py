"""The kernel heads' prompt: distinct labelled points, each a token with a weight.

A token's weight enters its score as a key bias ``log w_i``: the softmax
over tokens then weighs token ``i`` as ``w_i`` copies of it would be
weighed. So repeated rows become one token whose weight is their summed
``sample_weight`` (times their ``class_weight``), and ``sample_weight=k``
on a row fits the same model as ``k`` copies of it.

Merging matters most for leave-one-out. A training query leaves out its
own token, and with it every copy of itself: a copy left in the prompt would
vote for the query's own label at distance 0, so the bandwidth search would
pick a kernel far too narrow (200 rows given twice raised the held-out
log-loss from 0.16 to 2.9). Copies of a point are taken as one observation
of where the classes lie, not independent ones. That costs data whose
repeated rows are real observations (discrete features): on KEEL's
hayes-roth, 160 rows of 93 distinct points, accuracy fell from 0.73 (copies
as separate tokens) to 0.56 (benchmarks/README.md, section 10).
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


def distinct_tokens(X, labels, weights=None):
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
    return kept[first[order]], token_weights


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
