"""Repeated rows: copies of a measurement, or observations of a discrete point.

Leave-one-out over merged tokens leaves out a query's whole token where a
feature tells every point apart (copies), and ``min(counts)`` rows of it
where the features are discrete: then the tuning is the one of the rows as
separate tokens, each query leaving out only itself, and data given twice
tunes as given once.
"""

import numpy as np
import pytest
from sklearn.base import clone

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._kernel_head import fit_kernel_heads
from sk_softmix.classification._tokens import (
    distinct_tokens,
    effective_size,
    left_in_shares,
    repeats_are_observations,
)


def _discrete(n, random_state):
    """Three classes on a 6 x 6 x 2 grid, rings around the centre of two features,
    with noise (nearby points share a label, no linear score separates them,
    exact repeats are common: 300 rows take about 70 distinct points)."""
    rng = np.random.default_rng(random_state)
    X = np.column_stack([rng.integers(0, 6, n), rng.integers(0, 6, n), rng.integers(0, 2, n)])
    radius = np.square(X[:, :2] - 2.5).sum(axis=1)
    y = np.digitize(radius + rng.normal(0, 1.0, n), [3.0, 7.0])
    return X.astype(np.float64), y


def test_which_repeats_are_observations():
    rng = np.random.default_rng(0)
    measured = rng.normal(size=(50, 3))
    assert not repeats_are_observations(measured)
    # one continuous feature tells the points apart, whatever the others are
    assert not repeats_are_observations(np.column_stack([measured[:, 0], np.zeros(50)]))
    X, _ = _discrete(120, 0)
    assert repeats_are_observations(np.unique(X, axis=0))


def test_left_in_shares_and_effective_size():
    np.testing.assert_array_equal(left_in_shares([1, 2, 4]), [0.0, 0.5, 0.75])
    np.testing.assert_allclose(left_in_shares([2, 4, 6]), [0.0, 0.5, 2 / 3], rtol=1e-15)
    assert left_in_shares([3, 3, 3]) is None  # every token left out whole
    # rows of equal weight: Kish's count of the rows, in units of the smallest count
    assert effective_size(np.array([1.0, 2.0, 4.0]), np.array([1, 2, 4]), 1) == 7.0
    assert effective_size(np.array([2.0, 4.0, 8.0]), np.array([2, 4, 8]), 2) == 7.0


@pytest.mark.parametrize("n_neighbors", [None, "all but one"])
def test_merged_tuning_is_the_tuning_of_the_rows(n_neighbors):
    # tokens of c rows at weight c, each query keeping c - 1 of its own rows,
    # give the leave-one-out losses of the rows as separate tokens, row for row
    X, labels = _discrete(300, 1)
    coef = np.array([[0.3, -0.2, 0.1], [-0.1, 0.2, 0.0], [0.0, 0.1, -0.3]])
    rows_fit = fit_kernel_heads(
        X, labels, 3, np.arange(len(X)), X @ coef.T, 2, np.random.RandomState(0), "cpu"
    )
    rows, weights, counts = distinct_tokens(X, labels, return_counts=True)
    assert counts.min() == 1 and counts.max() > 2
    k = None if n_neighbors is None else len(rows) - 1
    tokens_fit = fit_kernel_heads(
        X[rows], labels[rows], 3, np.arange(len(rows)), X[rows] @ coef.T, 2,
        np.random.RandomState(0), "cpu", weights, k, left_in=left_in_shares(counts),
    )  # fmt: skip
    for name in ("U11", "v22"):
        np.testing.assert_allclose(tokens_fit.heads[name], rows_fit.heads[name], rtol=1e-12)
    assert rows_fit.heads["U11"][0, 0, 0] < 4.0  # a kernel wider than the grid's step / 2
    # the exact rows' votes are float32 on the engine, the tokens' float64
    np.testing.assert_allclose(
        np.average(tokens_fit.kernel_losses, weights=weights),
        rows_fit.kernel_losses.mean(),
        rtol=1e-5,
    )
    assert tokens_fit.heads["v22"].any()  # a head in play


def test_discrete_data_given_twice_fits_as_given_once():
    X, y = _discrete(150, 2)
    queries, _ = _discrete(300, 3)
    # LDA's start under the heads (the quadratic start alone draws these rings,
    # identically from both: its weights are the tokens' counts)
    model = SoftmaxAttentionClassifier(head="kernel", init="lda", random_state=0)
    once = clone(model).fit(X, y)
    twice = clone(model).fit(np.vstack([X, X]), np.r_[y, y])
    assert once.init_ == "kernel"
    np.testing.assert_allclose(
        twice.predict_proba(queries), once.predict_proba(queries), rtol=0, atol=1e-9
    )


def test_repeated_observations_are_kept_for_leave_one_out():
    # on discrete data a new point equals a training point; leaving out only
    # the query's own row lets the tuning see that (a narrower kernel than
    # where every copy is left out, and a better held-out log-loss)
    from sklearn.metrics import log_loss

    X, y = _discrete(240, 4)
    X_test, y_test = _discrete(2000, 5)
    # LDA's start under the heads (the quadratic start alone draws these rings:
    # held-out log-loss 0.553 with either treatment of the repeats)
    model = SoftmaxAttentionClassifier(head="kernel", init="lda", random_state=0).fit(X, y)
    # the same points with no repeats, weighted by their counts: whole tokens left out
    rows, weights = distinct_tokens(X, np.searchsorted(np.unique(y), y))
    copies = SoftmaxAttentionClassifier(head="kernel", init="lda", random_state=0).fit(
        X[rows], y[rows], sample_weight=weights
    )
    assert model.init_ == "kernel"
    # 2,000 test points: the gap is several standard errors of the difference
    assert (
        log_loss(y_test, model.predict_proba(X_test))
        < log_loss(y_test, copies.predict_proba(X_test)) - 0.02
    )


def test_the_starts_are_held_out_by_rows_where_repeats_are_observations():
    # the starts' cross-validation splits rows, as the heads' leave-one-out
    # leaves out one row: a point seen in training keeps its other rows
    from sklearn.metrics import log_loss

    from sk_softmix.classification._linear_starts import (
        cross_validated_scores,
        quadratic_scores,
        score_losses,
        start_maps,
    )

    X, y = _discrete(240, 4)
    X_test, y_test = _discrete(2000, 5)
    rows, weights, counts = distinct_tokens(X, y, return_counts=True)
    tokens, labels = X[rows], y[rows]
    names = ("lda", "quadratic")
    by_rows = cross_validated_scores(tokens, labels, 0, names, weights, counts)
    by_tokens = cross_validated_scores(tokens, labels, 0, names, weights)
    # the start as the classifier fits it, its penalty against the rows
    n_observations = counts.sum() / counts.min()
    coef, intercept, quadratic = start_maps("quadratic", tokens, labels, weights, n_observations)
    test_scores = X_test @ coef.T + intercept + quadratic_scores(quadratic, X_test)
    on_new_points = log_loss(y_test, np.exp(test_scores) / np.exp(test_scores).sum(axis=1)[:, None])
    held_out_by_rows = np.average(score_losses(by_rows["quadratic"], labels), weights=weights)
    held_out_by_tokens = np.average(score_losses(by_tokens["quadratic"], labels), weights=weights)
    # 240 rows: the held-out estimate's standard error is about 0.03; here
    # 0.467 by rows, 0.666 by tokens, 0.477 on 2,000 new points (0.550 with
    # the penalty weighed against the 91 tokens instead of the 240 rows)
    assert abs(held_out_by_rows - on_new_points) < 0.06
    assert held_out_by_tokens > on_new_points + 0.08
    # a token of one row gets its fold's score; with every count 1 the
    # row-wise folds are the token-wise ones, bit for bit
    ones = np.ones(len(tokens), dtype=int)
    once = cross_validated_scores(tokens, labels, 0, names, weights, ones)
    for name in names:
        np.testing.assert_array_equal(once[name], by_tokens[name])


@pytest.mark.parametrize("name", ["logistic", "quadratic"])
def test_a_penalised_start_on_tokens_is_the_start_on_their_rows(name):
    # weights = counts and the rows' number of observations: the penalty
    # weighs against the 240 rows, as on the rows themselves (scaled to one
    # per token it would weigh against 91, a C 2.6 times smaller)
    from sk_softmix.classification._linear_starts import start_maps

    X, y = _discrete(240, 4)
    rows, weights, counts = distinct_tokens(X, y, return_counts=True)
    on_rows = start_maps(name, X, y)
    on_tokens = start_maps(name, X[rows], y[rows], weights, float(counts.sum()))
    per_token = start_maps(name, X[rows], y[rows], weights)
    probe = _discrete(500, 6)[0]

    def scores(maps):
        coef, intercept, quadratic = maps
        extra = 0.0 if quadratic is None else np.einsum("nj,cjk,nk->nc", probe, quadratic, probe)
        return probe @ coef.T + intercept + extra

    # the same optimum up to L-BFGS's tolerance
    np.testing.assert_allclose(scores(on_tokens), scores(on_rows), atol=2e-3)
    assert np.abs(scores(per_token) - scores(on_rows)).max() > 10 * 2e-3
