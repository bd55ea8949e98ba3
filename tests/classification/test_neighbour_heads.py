"""Kernel heads over each query's nearest tokens, against the exact heads.

The restricted vote is the exact one where the tokens left out weigh
nothing, and within twice the bound it reports elsewhere: every token
beyond the k-th neighbour lies at least as far as it.
"""

import numpy as np
import pytest
import torch

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._heads import classifier_tokens, label_blocks
from sk_softmix.classification._kernel_head import kernel_votes
from sk_softmix.classification._neighbours import (
    AUTO_NEIGHBOURS,
    EXACT_MAX_TOKENS,
    left_out_bound,
    left_out_exactly,
    nearest_tokens,
    resolve_n_neighbors,
    token_index,
    truncated_votes,
)
from sk_softmix.classification._tokens import selection_rows


def _prompt(rng, n=400, d=3, n_classes=3):
    X = rng.normal(size=(n, d))
    labels = rng.integers(0, n_classes, n)
    weights = rng.integers(1, 4, n).astype(float)
    return X, labels, weights


def _xor(rng, n):
    """Four clusters at the corners (+-2, +-2), the class the sign of x1 x2."""
    corners = rng.choice([-2.0, 2.0], size=(n, 2))
    return corners + rng.normal(size=(n, 2)) * 0.7, (corners[:, 0] * corners[:, 1] > 0).astype(int)


def _exact(X, labels, weights, queries, n_classes, bandwidth, exclude=None):
    prompt = classifier_tokens(torch.as_tensor(X), torch.as_tensor(labels), n_classes)
    exclude = None if exclude is None else torch.as_tensor(exclude)
    votes = kernel_votes(
        torch.as_tensor(queries),
        prompt,
        n_classes,
        bandwidth,
        exclude,
        token_bias=torch.as_tensor(np.log(weights)),
    )
    return votes.numpy()


@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_token_listed_is_the_exact_vote(n_classes):
    rng = np.random.default_rng(0)
    X, labels, weights = _prompt(rng, n_classes=n_classes)
    queries = rng.normal(size=(50, 3))
    distances, indices = nearest_tokens(token_index(X), queries, len(X))
    blocks = np.asarray(label_blocks(labels, n_classes), dtype=np.float64)
    votes = truncated_votes(distances, indices, blocks, np.log(weights), 0.7)
    exact = _exact(X, labels, weights, queries, n_classes, 0.7)
    np.testing.assert_allclose(votes, exact, rtol=0, atol=1e-12)
    assert np.all(left_out_bound(distances, indices, np.log(weights), 0.7, weights.sum()) == 0)


@pytest.mark.parametrize("bandwidth", [0.1, 0.5, 1.5])
def test_the_restricted_vote_is_within_twice_its_bound(bandwidth):
    rng = np.random.default_rng(1)
    X, labels, weights = _prompt(rng)
    # leave-one-out queries: the prompt's own points, each without its token
    own = np.arange(len(X))
    distances, indices = nearest_tokens(token_index(X), X, 20, exclude=own)
    assert not np.any(indices == own[:, None])
    blocks = np.asarray(label_blocks(labels, 3), dtype=np.float64)
    votes = truncated_votes(distances, indices, blocks, np.log(weights), bandwidth)
    left_out = left_out_bound(
        distances, indices, np.log(weights), bandwidth, weights.sum() - weights
    )
    exact = _exact(X, labels, weights, X, 3, bandwidth, exclude=own)
    error = np.abs(votes - exact).max(axis=1)
    assert np.all(error <= 2 * left_out + 1e-12)
    # the share measured over the whole prompt is below the bound, and bounds
    # the error the same way
    measured = left_out_exactly(X, X, distances, indices, weights, bandwidth, own)
    assert np.all(measured <= left_out + 1e-12)
    assert np.all(error <= 2 * measured + 1e-12)
    # neither is vacuous where the kernel is narrow: 20 neighbours hold it
    if bandwidth == 0.1:
        assert np.median(left_out) < 1e-3


def test_auto_is_exact_up_to_its_threshold():
    assert resolve_n_neighbors("auto", EXACT_MAX_TOKENS) is None
    assert resolve_n_neighbors("auto", EXACT_MAX_TOKENS + 1) == AUTO_NEIGHBOURS
    assert resolve_n_neighbors(10, 10) is None  # every token anyway
    assert resolve_n_neighbors(None, 10**7) is None


# kernel heads on LDA's start: XOR's clusters are also the quadratic start's
# x1 x2, which the default may keep alone
ON_LDA = {"head": "kernel", "init": "lda", "random_state": 0}


def test_the_classifier_on_neighbours_is_within_its_share_of_the_exact_heads():
    # the fitted heads scored over each query's 30 nearest tokens and over the
    # whole prompt (the exact path, same parameters) differ by at most twice
    # each head's read-out times the share of its mass left out
    rng = np.random.default_rng(3)
    X, y = _xor(rng, 1500)
    # the isotropic metric, whose bandwidth U11 = I / h^2 gives (the learned
    # one's neighbour path: test_learned_metric)
    model = SoftmaxAttentionClassifier(
        n_neighbors=30, metric="isotropic", head="kernel", init="lda", random_state=0
    )
    model.fit(X, y)
    assert model.init_ == "kernel" and model.n_neighbors_ == 30
    assert 0 <= model.neighbour_mass_left_out_ <= 1
    queries = rng.normal(size=(300, 2)) * 2.5
    restricted = model.decision_function(queries)
    features = (queries - model.feature_mean_) / model.feature_scale_
    distances, indices = nearest_tokens(token_index(model.prompt_X_), features, 30)
    allowed = np.zeros(len(queries))
    for U11, readout in zip(model.U11_, model.v22_, strict=True):
        h = 1 / np.sqrt(U11[0, 0])
        share = left_out_exactly(
            model.prompt_X_, features, distances, indices, model.prompt_weights_, h
        )
        allowed += 2 * abs(readout) * share
    model.n_neighbors_ = None  # the exact heads, same parameters
    exact = model.decision_function(queries)
    assert np.all(np.abs(restricted - exact) <= allowed + 1e-9)
    assert np.any(np.abs(restricted - exact) > 1e-6)  # the restriction did something


def test_neighbour_heads_are_tuned_on_the_restricted_vote():
    # the restricted fit's leave-one-out log-loss beats the linear start on
    # clusters no linear score separates, as the exact fit's does
    rng = np.random.default_rng(3)
    X, y = _xor(rng, 1500)
    restricted = SoftmaxAttentionClassifier(n_neighbors=30, **ON_LDA).fit(X, y)
    exact = SoftmaxAttentionClassifier(n_neighbors=None, **ON_LDA).fit(X, y)
    assert restricted.init_ == exact.init_ == "kernel"
    assert restricted.n_neighbors_ == 30 and exact.n_neighbors_ is None
    assert exact.neighbour_mass_left_out_ == 0.0
    X_test, y_test = _xor(rng, 1000)
    # the same data, two models of the vote: within two standard errors (0.014)
    assert abs(restricted.score(X_test, y_test) - exact.score(X_test, y_test)) < 0.03


def test_selection_rows_are_a_stratified_subset():
    labels = np.r_[np.zeros(9000, int), np.ones(900, int), np.full(3, 2)]
    rows = selection_rows(labels, 1000, np.random.RandomState(0))
    assert np.all(np.diff(rows) > 0)
    counts = np.bincount(labels[rows])
    assert abs(counts[0] - 1000 * 9000 / 9903) <= 1 and abs(counts[1] - 1000 * 900 / 9903) <= 1
    assert counts[2] == 2  # at least 2 of every class
    assert selection_rows(labels[:500], 1000, np.random.RandomState(0)) is None


def test_the_large_data_path_on_small_data(monkeypatch):
    # above the thresholds "auto" takes 64 neighbours and compares the linear
    # starts on a subset: lowered here, so that the path runs on 1,500 points
    from sk_softmix.classification import _kernel_fit, _neighbours

    monkeypatch.setattr(_neighbours, "EXACT_MAX_TOKENS", 500)
    monkeypatch.setattr(_kernel_fit, "MAX_SELECTION_TOKENS", 400)
    rng = np.random.default_rng(4)
    X, y = _xor(rng, 2500)
    model = SoftmaxAttentionClassifier(**ON_LDA).fit(X[:1500], y[:1500])
    assert model.n_neighbors_ == AUTO_NEIGHBOURS and model.init_ == "kernel"
    exact = SoftmaxAttentionClassifier(n_neighbors=None, **ON_LDA).fit(X[:1500], y[:1500])
    # two models of the same vote on 1,000 test points: within 0.03 (two
    # standard errors of the difference of accuracies near 0.9)
    assert abs(model.score(X[1500:], y[1500:]) - exact.score(X[1500:], y[1500:])) < 0.03


def test_a_neighbour_model_saves_as_numpy():
    # the neighbour index is rebuilt at prediction: skops finds no type to
    # review but the estimator's own, and the loaded model predicts the same
    sio = pytest.importorskip("skops.io")
    rng = np.random.default_rng(5)
    X, y = _xor(rng, 600)
    model = SoftmaxAttentionClassifier(n_neighbors=30, **ON_LDA).fit(X, y)
    assert model.init_ == "kernel"
    data = sio.dumps(model)
    untrusted = sio.get_untrusted_types(data=data)
    assert untrusted == ["sk_softmix.classification._classifier.SoftmaxAttentionClassifier"]
    loaded = sio.loads(data, trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
