"""The quadratic start: logistic regression on the features and their products.

Closed forms: its score is scikit-learn's pipeline written as
``x^T Q x + b^T x + c``; on two Gaussian classes of unequal covariances,
whose Bayes score is quadratic (QDA's), the classifier picks it and reaches
the Bayes accuracy, where every linear score is at chance; on the LDA model
it is not picked; it is not tried where its columns would be too many.
"""

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._linear_starts import (
    QUADRATIC_C,
    best_linear_start,
    candidate_starts,
    linear_scores,
    quadratic_rows,
    quadratic_scores,
    quadratic_tried,
    start_maps,
)
from sk_softmix.classification._weighted_linear import (
    QDA_RIDGE,
    _ledoit_wolf,
    weighted_class_statistics,
)
from sk_softmix.datasets import make_lda


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_quadratic_start_is_its_scikit_learn_pipeline(n_classes):
    rng = np.random.default_rng(0)
    labels = rng.integers(n_classes, size=200)
    X = rng.normal(size=(200, 4)) * (1.0 + labels[:, None]) + 100.0  # offset: the centring
    coef, intercept, quadratic = start_maps("quadratic", X, labels)
    assert coef.shape == (1 if n_classes == 2 else n_classes, 4)
    np.testing.assert_allclose(quadratic, np.swapaxes(quadratic, 1, 2))  # symmetric
    reference = make_pipeline(
        StandardScaler(with_std=False),  # centred first
        PolynomialFeatures(2, include_bias=False),
        StandardScaler(),
        LogisticRegression(C=QUADRATIC_C, max_iter=1000),
    ).fit(X, labels)
    queries = rng.normal(size=(50, 4)) * 2.0 + 100.0
    scores = linear_scores(coef, intercept, queries) + quadratic_scores(quadratic, queries)
    expected = reference.decision_function(queries).reshape(len(queries), -1)
    # the same problem on the same standardised columns (the power-of-two
    # scale rounds nothing): equal up to rounding (4e-15 measured)
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_qda_start_is_gaussian_classes_of_shrunk_covariances(n_classes):
    # each class's score is log pi_c + log N(x; mu_c, Sigma_c) with its
    # weighted mean and Ledoit-Wolf covariance (plus the ridge), up to a
    # constant shared by the classes: scipy's densities are the reference
    rng = np.random.default_rng(n_classes)
    labels = np.repeat(np.arange(n_classes), 40)
    X = rng.normal(size=(len(labels), 4)) * [1.0, 2.0, 0.5, 1.0] * (1.0 + 0.5 * labels[:, None])
    X += labels[:, None] + 50.0  # offset: the power-of-two scale and the means
    weights = rng.uniform(0.5, 2.0, size=len(labels))
    coef, intercept, quadratic = start_maps("qda", X, labels, weights)
    width = 1 if n_classes == 2 else n_classes
    assert coef.shape == (width, 4) and quadratic.shape == (width, 4, 4)
    np.testing.assert_allclose(quadratic, np.swapaxes(quadratic, 1, 2))
    p = weights / weights.sum()
    priors, means, centred = weighted_class_statistics(X, labels, weights, n_classes)
    ridge = QDA_RIDGE * (p @ np.square(X - priors @ means))
    log_posterior = np.stack(
        [
            np.log(priors[c])
            + multivariate_normal(
                means[c], _ledoit_wolf(centred[labels == c], p[labels == c]) + np.diag(ridge)
            ).logpdf(X)
            for c in range(n_classes)
        ],
        axis=1,
    )
    scores = linear_scores(coef, intercept, X) + quadratic_scores(quadratic, X)
    if n_classes == 2:
        expected = log_posterior[:, 1:] - log_posterior[:, :1]
    else:  # logits: equal up to a shift per row
        expected, scores = log_posterior - log_posterior[:, :1], scores - scores[:, :1]
    np.testing.assert_allclose(scores, expected, rtol=1e-7, atol=1e-7)


def test_the_qda_start_of_a_class_without_spread_is_finite():
    # a class of one point repeated: its covariance is the ridge alone
    X = np.r_[np.random.default_rng(0).normal(size=(20, 3)), np.ones((5, 3))]
    labels = np.r_[np.zeros(20, dtype=int), np.ones(5, dtype=int)]
    coef, intercept, quadratic = start_maps("qda", X, labels)
    scores = linear_scores(coef, intercept, X) + quadratic_scores(quadratic, X)
    assert np.all(np.isfinite(scores)) and np.all((scores[:, 0] > 0) == (labels == 1))


def _unequal_covariances(n, rng, d=3):
    """Two centred Gaussian classes, covariances I and 4 I in d dimensions:
    the means agree, so every linear score is at chance; the Bayes score is
    quadratic."""
    y = rng.integers(2, size=n)
    X = rng.normal(size=(n, d)) * np.where(y == 1, 2.0, 1.0)[:, None]
    return X, y


def test_unequal_covariances_reach_the_bayes_accuracy():
    rng = np.random.default_rng(1)
    X, y = _unequal_covariances(600, rng)
    X_test, y_test = _unequal_covariances(5000, rng)
    clf = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    # Gaussian classes: QDA is the model, the quadratic start its
    # discriminative fit; either draws the Bayes boundary
    assert clf.linear_start_ in ("quadratic", "qda")
    # the Bayes classifier of the known densities on the same test points
    narrow = multivariate_normal(np.zeros(3), np.eye(3)).logpdf(X_test)
    wide = multivariate_normal(np.zeros(3), 4.0 * np.eye(3)).logpdf(X_test)
    bayes = np.mean((wide > narrow) == y_test)
    # 5,000 test points: the paired accuracy difference has a standard error
    # under 0.004; 0.015 is about four of them
    assert clf.score(X_test, y_test) > bayes - 0.015
    lda = LinearDiscriminantAnalysis().fit(X, y).score(X_test, y_test)
    assert lda < 0.56 < bayes - 0.15  # chance, where the Bayes accuracy is about 0.77


def test_qda_beats_the_quadratic_start_on_gaussian_classes_in_many_dimensions():
    # 20 features, 600 points: 230 products for the discriminative fit, a
    # shrunk covariance per class for QDA, which the choice keeps
    rng = np.random.default_rng(6)
    X, y = _unequal_covariances(600, rng, d=20)
    X_test, y_test = _unequal_covariances(5000, rng, d=20)
    clf = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    assert clf.linear_start_ == "qda"
    narrow = multivariate_normal(np.zeros(20), np.eye(20)).logpdf(X_test)
    wide = multivariate_normal(np.zeros(20), 4.0 * np.eye(20)).logpdf(X_test)
    bayes = np.mean((wide > narrow) == y_test)
    quadratic = make_pipeline(
        PolynomialFeatures(2, include_bias=False),
        StandardScaler(),
        LogisticRegression(C=QUADRATIC_C, max_iter=1000),
    ).fit(X, y)
    # 5,000 test points: a standard error of the accuracy under 0.004
    accuracy = clf.score(X_test, y_test)
    assert accuracy > bayes - 0.015
    assert accuracy > quadratic.score(X_test, y_test) + 0.01


def test_the_lda_model_keeps_lda():
    X, y = make_lda(400, [[0.0, 1.0, 0.5], [1.0, 0.0, -0.5]], prior=0.5, random_state=0)
    name, _, _ = best_linear_start(X, (y > 0).astype(int), random_state=0)
    assert name == "lda"


def test_the_quadratic_start_is_not_tried_with_too_many_products():
    # 44 features: 44 + 990 columns, over the 1,000 allowed
    assert quadratic_tried(100, 43) and not quadratic_tried(100, 44)
    # nor where rows times columns exceed the budget (8 features: 44 columns),
    # times the scores' width beyond two classes (its cost per iteration)
    assert quadratic_tried(90_000, 8) and not quadratic_tried(100_000, 8)
    assert quadratic_tried(90_000, 8, 2) and not quadratic_tried(90_000, 8, 3)
    assert quadratic_tried(30_000, 8, 3) and not quadratic_tried(5_000, 36, 6)
    assert quadratic_rows(8, 3) == 4_000_000 // (44 * 3)
    # QDA wants as many points in the smallest class as a covariance has entries
    assert "qda" in candidate_starts(1000, 13, 3, smallest_class=91)
    assert "qda" not in candidate_starts(1000, 13, 3, smallest_class=90)
    assert "qda" not in candidate_starts(1000, 44, 3, smallest_class=10_000)
    assert "quadratic" not in candidate_starts(100, 44)
    assert "quadratic" in candidate_starts(100, 3)
    rng = np.random.default_rng(2)
    labels = rng.integers(2, size=60)
    X = np.c_[labels + 0.3 * rng.normal(size=60), rng.normal(size=(60, 50))]
    clf = SoftmaxAttentionClassifier(random_state=0).fit(X, labels)
    assert clf.linear_start_ != "quadratic" and clf.quadratic_ is None


def _separated_clusters(n, rng, centres):
    """Each of three classes a mixture of four unit Gaussians."""
    component = rng.integers(len(centres), size=n)
    X = centres[component] + rng.normal(size=(n, centres.shape[1]))
    log_density = -0.5 * np.sum((X[:, None] - centres[None]) ** 2, axis=-1)
    bayes = log_density.reshape(n, 3, 4).max(axis=2).argmax(axis=1)
    return X, component // 4, bayes


def test_the_heads_sit_on_a_linear_start_where_that_beats_the_quadratic_one():
    # the quadratic start wins among the starts alone, but the heads on top of
    # a linear start beat it: the heads are kept there, and the quadratic
    # score's growth far from the data never meets the vote
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, 6)) * 4
    X, y, _ = _separated_clusters(1200, rng, centres)
    X_test, y_test, bayes = _separated_clusters(3000, rng, centres)
    standardised = StandardScaler().fit_transform(X)
    assert best_linear_start(standardised, y, random_state=0)[0] == "quadratic"
    clf = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    assert clf.init_ == "kernel" and clf.linear_start_ != "quadratic"
    assert clf.quadratic_ is None
    # the Bayes rule's (max-component) accuracy on 3,000 points, SE about 0.002
    assert clf.score(X_test, y_test) > np.mean(bayes == y_test) - 0.01
