"""Linear when it can: every attention estimator starts on its linear special case
and keeps it unless training beats it on held-out data."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sk_softmix import (
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_gaussian_mixture, make_lda
from sk_softmix.theory.affine_maps import affine_heads, best_affine_map, best_linear_map
from sk_softmix.training._selection import choose_start, validation_split
from sk_softmix.training._stopping import ValidationCheckpoint, significantly_lower


def _with_constant_feature(X):
    return np.c_[X, np.full(len(X), 3.0)]


def _three_classes(n, random_state):
    rng = np.random.default_rng(random_state)
    means = np.array([[0.0, 0.0], [2.0, 0.5], [0.5, 2.0]])
    y = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    return means[y] + rng.normal(size=(n, 2)) @ np.array([[1.0, 0.3], [0.0, 0.8]]), y


@pytest.mark.parametrize("head", ["bilinear", "kernel"])
@pytest.mark.parametrize("prior", [0.5, 0.6])
def test_classifier_linear_start_is_lda_for_two_classes(prior, head):
    X, y = make_lda(600, [[0.0, 1.0], [1.0, 0.0]], prior=prior, random_state=0)
    if prior == 0.5:  # exactly balanced: Lemma B.3's read-out divides by 2 pi - 1 = 0
        y = np.where(np.arange(len(y)) < 300, 1, -1)
    X = _with_constant_feature(X)
    queries = _with_constant_feature(np.random.default_rng(1).normal(size=(200, 2)) * 3)
    clf = SoftmaxAttentionClassifier(head=head, init="lda", max_iter=0, random_state=0)
    clf.fit(X, y)
    lda = LinearDiscriminantAnalysis().fit(X, y)
    np.testing.assert_allclose(
        clf.decision_function(queries), lda.decision_function(queries), rtol=1e-9, atol=1e-9
    )
    # the skip map acts on the model's coordinates (x - feature_mean_) / feature_scale_:
    # kernel heads work at unit root-mean-square, a power of two that rounds nothing
    np.testing.assert_allclose(clf.skip_ / clf.feature_scale_, lda.coef_, rtol=1e-12, atol=1e-12)
    assert clf.init_ == "lda" and clf.linear_start_ == "lda" and clf.n_iter_ == 0
    if head == "bilinear":
        np.testing.assert_array_equal(clf.U11_, 0.0)  # no selection at the start
    else:  # kernel heads that read out nothing
        np.testing.assert_array_equal(clf.v22_, 0.0)


def test_classifier_linear_start_is_lda_for_three_classes():
    X, y = _three_classes(900, 2)
    X = _with_constant_feature(X)
    queries = _with_constant_feature(np.random.default_rng(3).normal(size=(200, 2)) * 3)
    clf = SoftmaxAttentionClassifier(n_heads=2, max_iter=0, random_state=0).fit(X, y)
    lda = LinearDiscriminantAnalysis().fit(X, y)
    np.testing.assert_allclose(
        clf.decision_function(queries), lda.decision_function(queries), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(clf.predict_proba(queries), lda.predict_proba(queries), atol=1e-9)


def test_lda_start_needs_the_skip_map():
    X, y = make_lda(100, [[0.0, 1.0], [1.0, 0.0]], prior=0.5, random_state=0)
    with pytest.raises(ValueError, match="residual=True"):
        SoftmaxAttentionClassifier(residual=False, init="lda").fit(X, y)


def _wiener(Z, noise_variance):
    """The unsupervised Wiener filter written out: shrink each principal axis of Z."""
    mean = Z.mean(axis=0)
    eigenvalues, axes = np.linalg.eigh(np.cov(Z.T, bias=True))
    gains = np.maximum(eigenvalues - noise_variance, 0.0) / eigenvalues
    return lambda queries: mean + ((queries - mean) @ axes) * gains @ axes.T


FIGURE_2 = {"means": [[3.0, 0.0], [0.0, 3.0]], "covariance": 1.0, "noise_variance": 4.0}


@pytest.mark.parametrize("n_heads", [1, 2])
def test_denoiser_linear_start_is_the_best_affine_map(n_heads):
    Z, X, _ = make_gaussian_mixture(800, **FIGURE_2, random_state=0)
    queries = np.random.default_rng(1).normal(size=(300, 2)) * 4
    supervised = SoftmaxAttentionDenoiser(n_heads, max_iter=0, random_state=0).fit(Z, X)
    regression = LinearRegression().fit(Z, X)
    np.testing.assert_allclose(
        supervised.transform(queries), regression.predict(queries), rtol=1e-9, atol=1e-9
    )
    unsupervised = SoftmaxAttentionDenoiser(
        n_heads, noise_variance=4.0, max_iter=0, random_state=0
    ).fit(Z)
    np.testing.assert_allclose(
        unsupervised.transform(queries), _wiener(Z, 4.0)(queries), rtol=1e-9, atol=1e-9
    )
    assert unsupervised.init_ == "linear"
    np.testing.assert_array_equal(unsupervised.U_[0], 0.0)  # the head carrying the constant
    np.testing.assert_array_equal(unsupervised.V_[1:], 0.0)  # any other head adds nothing


def test_plain_heads_reach_the_affine_map_in_the_small_u_limit():
    Z, X, _ = make_gaussian_mixture(800, **FIGURE_2, random_state=0)
    queries = np.random.default_rng(1).normal(size=(300, 2)) * 4
    plain = SoftmaxAttentionDenoiser(2, residual=False, max_iter=0, random_state=0).fit(Z, X)
    expected = LinearRegression().fit(Z, X).predict(queries)
    # the second-order term of softmax(eps z_i^T S^-1 z) is O(eps) = O(1e-3 / p)
    error = np.abs(plain.transform(queries) - expected).max()
    assert error < 2e-3 * np.abs(expected).max()
    with pytest.raises(ValueError, match="n_heads >= 2"):
        SoftmaxAttentionDenoiser(1, residual=False, init="linear").fit(Z, X)


def test_linear_attention_start_is_the_best_linear_map():
    Z, X, _ = make_gaussian_mixture(800, **FIGURE_2, random_state=0)
    queries = np.random.default_rng(1).normal(size=(300, 2)) * 4
    linear = LinearAttentionDenoiser(max_iter=0).fit(Z, X)
    expected = LinearRegression(fit_intercept=False).fit(Z, X).predict(queries)
    np.testing.assert_allclose(linear.transform(queries), expected, rtol=1e-9, atol=1e-9)


def test_wiener_map_shrinks_to_the_mean_when_the_noise_exceeds_the_data():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(5000, 3)) * [3.0, 1.0, 0.5] + [1.0, 2.0, 3.0]
    A, c = best_affine_map(Z, noise_variance=4.0)  # above the variance of two axes
    np.testing.assert_allclose(A, np.diag([1 - 4.0 / Z[:, 0].var(), 0.0, 0.0]), atol=0.02)
    np.testing.assert_allclose(c[1:], Z.mean(axis=0)[1:], atol=0.02)
    M = best_linear_map(Z, noise_variance=1e6)  # all noise: zero map, never negative gains
    np.testing.assert_array_equal(M, 0.0)


def test_affine_heads_put_the_constant_through_the_prompt_mean():
    rng = np.random.default_rng(0)
    prompt = rng.normal(size=(400, 3)) + [2.0, -1.0, 0.5]
    A, c = rng.normal(size=(3, 3)), rng.normal(size=3)
    U, V, skip = affine_heads(A, c, prompt, 3, residual=True, random_state=0)
    np.testing.assert_allclose(V[0] @ prompt.mean(axis=0), c, rtol=1e-12)
    np.testing.assert_array_equal(skip, A)
    assert np.all(U[0] == 0) and np.all(V[1:] == 0) and np.any(U[1:] != 0)


# -- model selection -----------------------------------------------------------


def test_significance_rule_on_paired_differences():
    rng = np.random.default_rng(0)
    reference = torch.as_tensor(rng.exponential(size=400))
    noise = torch.as_tensor(rng.normal(scale=0.1, size=400))
    # a shift of 1 standard error passes one standard error only just, not two
    shift = float((noise).std() / np.sqrt(400))
    better = reference + noise - noise.mean() - 1.5 * shift
    assert significantly_lower(better, reference, 1.0)
    assert not significantly_lower(better, reference, 2.0)
    assert not significantly_lower(reference + 0.01, reference, 0.0)
    assert choose_start(reference, {"a": better, "b": better + 1}, 1.0) == "a"
    assert choose_start(reference, {"a": better}, 2.0) is None  # the reference stays
    assert choose_start(None, {"a": better, "b": better - 1}, 2.0) == "b"
    nan = torch.full((400,), float("nan"), dtype=torch.float64)
    assert choose_start(reference, {"a": nan}, 1.0) is None


def test_a_start_whose_held_out_sure_is_negative_is_not_kept():
    # SURE estimates a squared error: a negative held-out mean says the
    # estimate fails for that start, however far below the reference it is
    rng = np.random.default_rng(1)
    reference = torch.as_tensor(rng.exponential(size=200))
    broken = reference - float(reference.mean()) - 0.05  # mean -0.05
    plausible = reference * 0.5  # a real gain
    assert choose_start(reference, {"a": broken}, 0.0) == "a"  # no floor: kept
    assert choose_start(reference, {"a": broken}, 0.0, floor=0.0) is None
    assert choose_start(reference, {"a": broken, "b": plausible}, 0.0, floor=0.0) == "b"
    assert choose_start(None, {"a": broken}, 0.0, floor=0.0) == "a"  # nothing to fall back on


def test_checkpoint_keeps_the_final_parameters_unless_an_earlier_one_is_clearly_better():
    parameter = {"w": torch.zeros(1)}
    targets = torch.linspace(-1, 1, 200, dtype=torch.float64)

    def losses(limit=None):
        return ((targets - parameter["w"]) ** 2)[:limit]

    checkpoint = ValidationCheckpoint(parameter, losses, None, 3, 1.0)
    for value in (0.0, 0.01, 0.02):  # three nearly equal checks: the last stays
        parameter["w"].fill_(value)
        checkpoint.check()
    checkpoint.finish()
    assert parameter["w"].item() == pytest.approx(0.02)
    for value in (0.0, 5.0, 6.0, 7.0):  # far worse later: the best comes back
        parameter["w"].fill_(value)
        stop = checkpoint.check()
    assert stop  # three checks in a row without improvement
    checkpoint.finish()
    assert parameter["w"].item() == 0.0


def test_validation_split_stratifies_and_falls_back():
    labels = np.repeat([0, 1, 2], [50, 30, 20])
    train, validation = validation_split(100, "auto", 0.1, 0, labels)
    assert len(validation) == 10 and np.all(np.bincount(labels[validation]) >= 2)
    assert np.intersect1d(train, validation).size == 0 and len(train) + len(validation) == 100
    assert validation_split(100, False, 0.1, 0, labels)[1] is None
    tiny = np.array([0, 0, 1, 1])
    assert validation_split(4, "auto", 0.1, 0, tiny)[1] is None
    with pytest.raises(ValueError, match="early_stopping=True"):
        validation_split(4, True, 0.1, 0, tiny)


# -- never worse than linear ------------------------------------------------------


def _not_significantly_worse(losses, reference):
    """The mean paired difference is at most 2 standard errors of it, up to
    float64 rounding (equal models may differ by 1e-17 in their losses)."""
    difference = losses - reference
    return difference.mean() <= 2 * difference.std() / np.sqrt(len(difference)) + 1e-12


@pytest.mark.slow
def test_default_denoiser_is_no_worse_than_its_linear_start_on_noisy_digits():
    clean = load_digits().data / 16.0
    noisy = clean + 0.3 * np.random.default_rng(0).normal(size=clean.shape)
    Z, Z_test, X, X_test = train_test_split(noisy, clean, test_size=0.5, random_state=0)
    for residual, n_heads in [(True, 2), (False, 2)]:
        common = {"n_heads": n_heads, "residual": residual, "n_components": 10}
        default = SoftmaxAttentionDenoiser(random_state=0, **common).fit(Z, X)
        linear = SoftmaxAttentionDenoiser(max_iter=0, **common).fit(Z, X)
        errors = np.mean((default.transform(Z_test) - X_test) ** 2, axis=1)
        reference = np.mean((linear.transform(Z_test) - X_test) ** 2, axis=1)
        # Measured: the construction start trains to 0.04 here against the
        # Wiener map's 0.024, so a fit that kept it would fail by far.
        assert _not_significantly_worse(errors, reference)


@pytest.mark.slow
def test_default_classifier_is_no_worse_than_lda_on_wine():
    X, y = load_wine(return_X_y=True)
    X, X_test, y, y_test = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X)
    X, X_test = scaler.transform(X), scaler.transform(X_test)
    clf = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    lda = LinearDiscriminantAnalysis().fit(X, y)
    rows = np.arange(len(y_test))
    ours = -np.log(clf.predict_proba(X_test)[rows, y_test])
    reference = -np.log(lda.predict_proba(X_test)[rows, y_test])
    assert _not_significantly_worse(ours, reference)
    assert clf.score(X_test, y_test) >= lda.score(X_test, y_test) - 2 / len(y_test)
