"""Token weights: sample_weight, class_weight and repeated rows merged into one token.

A token's weight enters its score as a key bias ``log w_i``, so ``k``
copies of a row and one row of weight ``k`` are the same prompt; the
linear start is the weighted LDA (or shrinkage LDA, or logistic regression)
of the tokens. These tests pin the closed forms (scikit-learn's LDA at equal
weights, weights equal to repetitions) and the behaviour the weights are for.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn import config_context
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.ensemble import AdaBoostClassifier
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import cross_validate
from sklearn.preprocessing import StandardScaler

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._tokens import distinct_tokens
from sk_softmix.classification._weighted_linear import weighted_lda
from sk_softmix.training._stopping import significantly_lower


def _wine():
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _logits(coef, intercept, X):
    scores = X @ coef.T + intercept
    return np.column_stack([np.zeros(len(X)), scores]) if scores.shape[1] == 1 else scores


def _proba(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shrinkage", [False, True])
@pytest.mark.parametrize("binary", [False, True])
def test_weighted_lda_at_equal_weights_is_scikit_learns(shrinkage, binary):
    X, y = _wine()
    if binary:
        X, y = X[y < 2], y[y < 2]
    n_classes = y.max() + 1
    reference = (
        LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
        if shrinkage
        else LinearDiscriminantAnalysis()
    ).fit(X, y)
    coef, intercept = weighted_lda(X, y, np.full(len(y), 3.0), n_classes, shrinkage)
    # the same formulas in another order: float64 rounding of logits of size ~30
    np.testing.assert_allclose(
        _proba(_logits(coef, intercept, X)), reference.predict_proba(X), rtol=0, atol=1e-10
    )


def test_weighted_lda_keeps_the_directions_scikit_learn_keeps():
    # a constant feature and more features than a class resolves
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=(30, 3)), np.ones(30)])
    y = np.repeat([0, 1, 2], 10)
    X[y == 1, 0] += 2.0
    reference = LinearDiscriminantAnalysis().fit(X, y)
    coef, intercept = weighted_lda(X, y, np.ones(30), 3)
    np.testing.assert_allclose(
        _proba(_logits(coef, intercept, X)), reference.predict_proba(X), rtol=0, atol=1e-10
    )


def test_integer_weights_are_repetitions_for_lda():
    # LDA's statistics are weighted means: weights k equal k copies exactly
    X, y = _wine()
    k = np.random.default_rng(1).integers(1, 5, len(y))
    coef, intercept = weighted_lda(X, y, k.astype(float), 3)
    repeated = LinearDiscriminantAnalysis().fit(np.repeat(X, k, axis=0), np.repeat(y, k))
    np.testing.assert_allclose(
        _proba(_logits(coef, intercept, X)), repeated.predict_proba(X), rtol=0, atol=1e-10
    )


def test_classes_without_spread_are_told_apart():
    # scikit-learn's SVD solver raises IndexError here; the limit of LDA as
    # the spread vanishes is the nearest class mean
    X = np.repeat([[0.0, 0.0], [1.0, 1.0], [0.0, 3.0]], 5, axis=0)
    y = np.repeat([0, 1, 2], 5)
    coef, intercept = weighted_lda(X, y, np.ones(15), 3)
    assert np.array_equal(np.argmax(_logits(coef, intercept, X), axis=1), y)
    coef, intercept = weighted_lda(np.zeros((15, 2)), y, np.ones(15), 3)
    assert not np.any(coef)  # nothing tells them apart: the priors alone


def test_distinct_tokens_merge_repeated_rows_in_order():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [-0.0, 1.0], [0.0, 1.0], [2.0, 2.0]])
    labels = np.array([0, 1, 0, 1, 0, 1])
    rows, weights = distinct_tokens(X, labels, np.array([1.0, 2.0, 3.0, 4.0, 5.0, 0.0]))
    # (1, 0, 0) twice; (0, 1, 1) twice (a signed zero is 0); (0, 1, 0) once; the last weighs 0
    assert rows.tolist() == [0, 1, 4]
    assert weights.tolist() == [4.0, 6.0, 5.0]


def test_weighted_test_equals_the_plain_one_at_equal_weights():
    rng = np.random.default_rng(2)
    losses, reference = torch.as_tensor(rng.normal(size=40)), torch.zeros(40, dtype=torch.float64)
    for shift in np.linspace(-0.6, 0.6, 13):
        plain = significantly_lower(losses + shift, reference, 1.0)
        weighted = significantly_lower(losses + shift, reference, 1.0, torch.full((40,), 7.0))
        assert plain == weighted


def _two_gaussian_mixtures(n, random_state):
    """Two classes, each a mixture of two Gaussians in 3-D: kernel heads pay."""
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, 2, n)
    side = rng.choice([-1.0, 1.0], n)
    X = rng.normal(size=(n, 3)) * 0.7
    X[:, 0] += 2.0 * side
    X[:, 1] += np.where(y == 1, side, -side) * 1.5
    return X, y


def test_integer_sample_weight_fits_the_repeated_rows():
    X, y = _two_gaussian_mixtures(240, 0)
    queries, _ = _two_gaussian_mixtures(500, 1)
    k = np.random.default_rng(3).integers(1, 4, len(y))
    weighted = SoftmaxAttentionClassifier(random_state=0).fit(X, y, sample_weight=k)
    repeated = SoftmaxAttentionClassifier(random_state=0).fit(
        np.repeat(X, k, axis=0), np.repeat(y, k)
    )
    assert weighted.init_ == "kernel"  # the heads are in play, not only the linear start
    # the same tokens and weights: the same model, bit for bit on one machine
    np.testing.assert_array_equal(weighted.predict_proba(queries), repeated.predict_proba(queries))
    assert weighted.prompt_weights_.sum() == k.sum()


def test_a_weighted_token_scores_as_its_copies():
    # the key bias log w_i at prediction: a fitted model whose prompt is
    # rewritten with each token repeated w_i times, at weight 1, scores the same
    X, y = _two_gaussian_mixtures(120, 15)
    queries, _ = _two_gaussian_mixtures(300, 16)
    k = np.random.default_rng(17).integers(1, 4, len(y))
    model = SoftmaxAttentionClassifier(random_state=0).fit(X, y, sample_weight=k)
    assert model.init_ == "kernel"
    counts = model.prompt_weights_.astype(int)
    copies = clone_fitted(model)
    copies.prompt_X_ = np.repeat(model.prompt_X_, counts, axis=0)
    copies.prompt_y_ = np.repeat(model.prompt_y_, counts)
    copies.prompt_weights_ = np.ones(counts.sum())
    # float64 softmax sums of ~300 terms in another order
    np.testing.assert_allclose(
        copies.decision_function(queries), model.decision_function(queries), rtol=0, atol=1e-12
    )


def test_the_tuning_votes_weigh_tokens_as_copies():
    # the votes the bandwidth search scores: a token of weight w_i (key bias
    # log w_i) votes as w_i copies of it
    from sk_softmix.classification._heads import classifier_tokens
    from sk_softmix.classification._kernel_head import kernel_votes

    rng = np.random.default_rng(18)
    X = torch.as_tensor(rng.normal(size=(30, 3)))
    labels = torch.as_tensor(rng.integers(0, 3, 30))
    counts = torch.as_tensor(rng.integers(1, 4, 30))
    queries = torch.as_tensor(rng.normal(size=(50, 3)))
    weighted = kernel_votes(
        queries, classifier_tokens(X, labels, 3), 3, 0.8, token_bias=counts.double().log()
    )
    repeated = classifier_tokens(
        X.repeat_interleave(counts, dim=0), labels.repeat_interleave(counts), 3
    )
    np.testing.assert_allclose(
        weighted.numpy(), kernel_votes(queries, repeated, 3, 0.8).numpy(), rtol=0, atol=1e-12
    )


def clone_fitted(model):
    import copy

    return copy.deepcopy(model)


def test_duplicating_every_row_changes_nothing():
    # leave-one-out leaves out a query's copies with it: doubling the data
    # leaves the fit as it was (it used to pick a kernel far too narrow)
    X, y = _two_gaussian_mixtures(200, 4)
    queries, _ = _two_gaussian_mixtures(500, 5)
    once = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    twice = SoftmaxAttentionClassifier(random_state=0).fit(np.vstack([X, X]), np.r_[y, y])
    np.testing.assert_allclose(
        twice.predict_proba(queries), once.predict_proba(queries), rtol=0, atol=1e-12
    )
    assert np.all(twice.prompt_weights_ == 2.0)


def test_equal_weights_and_zero_weights():
    X, y = _two_gaussian_mixtures(150, 6)
    queries, _ = _two_gaussian_mixtures(200, 7)
    plain = SoftmaxAttentionClassifier(random_state=0).fit(X, y).predict_proba(queries)
    threes = SoftmaxAttentionClassifier(random_state=0).fit(X, y, sample_weight=np.full(150, 3.0))
    np.testing.assert_array_equal(threes.predict_proba(queries), plain)
    # rows of weight 0 are left out, as if they were not there
    weights = np.ones(150)
    weights[::4] = 0.0
    without = SoftmaxAttentionClassifier(random_state=0).fit(X[weights > 0], y[weights > 0])
    zeroed = SoftmaxAttentionClassifier(random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(zeroed.predict_proba(queries), without.predict_proba(queries))


def test_balanced_class_weight_raises_balanced_accuracy():
    # 95/5 with overlapping classes: the prior keeps the rare class out of
    # most predictions; "balanced" weighs both classes equally. On 2,000 test
    # points (100 rare ones) the gain is several standard errors.
    rng = np.random.default_rng(8)

    def sample(n):
        y = (rng.random(n) < 0.05).astype(int)
        return rng.normal(size=(n, 2)) + 1.5 * y[:, None], y

    X, y = sample(1000)
    X_test, y_test = sample(2000)
    plain = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    balanced = SoftmaxAttentionClassifier(class_weight="balanced", random_state=0).fit(X, y)
    before = balanced_accuracy_score(y_test, plain.predict(X_test))
    after = balanced_accuracy_score(y_test, balanced.predict(X_test))
    assert after > before + 0.05, (before, after)
    # a dict weighs the classes as given: {0: 1, 1: 19} is "balanced" here up to a constant
    by_dict = SoftmaxAttentionClassifier(class_weight={0: 1.0, 1: 19.0}, random_state=0).fit(X, y)
    assert balanced_accuracy_score(y_test, by_dict.predict(X_test)) > before + 0.05


def test_adaboost_fits_on_the_classifier():
    X, y = _two_gaussian_mixtures(200, 9)
    boost = AdaBoostClassifier(SoftmaxAttentionClassifier(random_state=0), n_estimators=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        boost.fit(X, y)
    assert boost.score(X, y) > 0.9


def test_sample_weight_is_routed_as_metadata():
    X, y = _two_gaussian_mixtures(150, 10)
    weights = np.random.default_rng(11).integers(1, 3, 150).astype(float)
    with config_context(enable_metadata_routing=True):
        classifier = (
            SoftmaxAttentionClassifier(random_state=0)
            .set_fit_request(sample_weight=True)
            .set_score_request(sample_weight=False)
        )
        routed = cross_validate(
            classifier, X, y, cv=3, params={"sample_weight": weights}, return_estimator=True
        )
    # each fold's model saw the weights of its training rows
    for model in routed["estimator"]:
        assert set(np.unique(model.prompt_weights_)) <= {1.0, 2.0}
        assert np.any(model.prompt_weights_ == 2.0)


def test_bilinear_heads_refuse_unequal_weights():
    X, y = _two_gaussian_mixtures(60, 12)
    bilinear = SoftmaxAttentionClassifier(head="bilinear", max_iter=2, random_state=0)
    with pytest.raises(ValueError, match="bilinear heads"):
        bilinear.fit(X, y, sample_weight=np.r_[np.ones(30), 2 * np.ones(30)])
    bilinear.fit(X, y, sample_weight=np.full(60, 2.0))  # equal weights change nothing
    assert np.all(bilinear.prompt_weights_ == 1.0)


@pytest.mark.parametrize(
    "sample_weight, message",
    [
        (-np.ones(40), "Negative values"),
        (np.zeros(40), "at least one non-zero"),
        (np.ones(39), "sample_weight.shape"),
    ],
)
def test_bad_sample_weight_raises(sample_weight, message):
    X, y = _two_gaussian_mixtures(40, 13)
    with pytest.raises(ValueError, match=message):
        SoftmaxAttentionClassifier().fit(X, y, sample_weight=sample_weight)


def test_weights_that_leave_a_class_out_raise():
    X, y = _two_gaussian_mixtures(40, 14)
    with pytest.raises(ValueError, match="at least 1 distinct sample of positive weight"):
        SoftmaxAttentionClassifier().fit(X, y, sample_weight=(y == 0).astype(float))
    with pytest.raises(ValueError, match="zero for every sample"):
        SoftmaxAttentionClassifier(class_weight={0: 0.0, 1: 0.0}).fit(X, y)
