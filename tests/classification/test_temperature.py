"""The read-out temperature: scores scaled to be calibrated, no label changed."""

import copy

import numpy as np
import pytest
from sklearn.metrics import log_loss

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.classification._temperature import TEMPERATURES, best_temperature


def _logistic_labels(scores, rng):
    return (rng.random(len(scores)) < 1 / (1 + np.exp(-scores[:, 0]))).astype(int)


def test_the_temperature_undoes_a_known_overconfidence():
    # labels drawn from sigmoid(s): scores 2 s are overconfident by 2, s / 2
    # under by 2; 20,000 samples fix the minimiser to well within a quarter
    # octave (its standard error is about 2% of t here)
    rng = np.random.default_rng(0)
    scores = rng.normal(0, 2.0, (20_000, 1))
    labels = _logistic_labels(scores, rng)
    assert best_temperature(2.0 * scores, labels) == 0.5
    assert best_temperature(0.5 * scores, labels) == 2.0
    assert best_temperature(scores, labels) == 1.0
    # weights: the labels of the rows that count decide
    weights = np.where(np.arange(20_000) < 10_000, 1.0, 0.0)
    mixed = np.where(np.arange(20_000)[:, None] < 10_000, 4.0 * scores, scores)
    assert best_temperature(mixed, labels, weights) == 0.25


def test_multiclass_temperature_and_ties():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2.0, (20_000, 3))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    labels = (rng.random((20_000, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    assert best_temperature(4.0 * logits, labels) == 0.25
    # scores that carry no information: every temperature ties at 0 -> keep 1
    assert best_temperature(np.zeros((10, 3)), np.arange(10) % 3) == 1.0
    assert 1.0 in TEMPERATURES


def _rings_and_noise(n, rng):
    """A band of radii in two features (no quadratic score draws it), a shift
    in a third, one of noise: the heads pay, and the start's score fitted
    to its own training points is overconfident."""
    X = rng.normal(size=(n, 4))
    radius = np.sqrt(np.square(X[:, :2]).sum(axis=1)) + rng.normal(0, 0.2, n)
    y = ((radius > 0.8) & (radius < 1.8)).astype(int)
    X[:, 2] += 0.8 * y
    return X, y


def test_the_fitted_temperature_changes_no_label_and_lowers_the_log_loss():
    rng = np.random.default_rng(0)
    X, y = _rings_and_noise(400, rng)
    X_test, y_test = _rings_and_noise(5000, rng)
    model = SoftmaxAttentionClassifier(metric="isotropic", random_state=0).fit(X, y)
    assert model.init_ == "kernel"
    assert model.temperature_ < 1.0
    # the same model at temperature 1
    plain = copy.deepcopy(model)
    for name in ("skip_", "intercept_", "v22_", "quadratic_"):
        if getattr(model, name) is not None:
            setattr(plain, name, getattr(model, name) / model.temperature_)
    np.testing.assert_array_equal(model.predict(X_test), plain.predict(X_test))
    np.testing.assert_allclose(
        model.decision_function(X_test),
        model.temperature_ * plain.decision_function(X_test),
        rtol=1e-5,
        atol=1e-6,
    )
    # fitted on 400 held-out scores, it lowers the log-loss of 5,000 new points
    # (0.548 against 0.555: the paired difference -0.0067 has a standard error
    # of 0.0014)
    assert (
        log_loss(y_test, model.predict_proba(X_test))
        < log_loss(y_test, plain.predict_proba(X_test)) - 0.003
    )


def test_the_linear_start_kept_alone_keeps_its_scale():
    # two Gaussian classes: the linear start (LDA, the Bayes score) is kept,
    # exactly as scikit-learn fits it
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 600)
    X = rng.normal(size=(600, 3)) + 1.0 * y[:, None]
    model = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    assert model.init_ == "linear" and model.linear_start_ == "lda"
    assert model.temperature_ == 1.0
    lda = LinearDiscriminantAnalysis().fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), lda.decision_function(X), rtol=1e-10)


def test_heads_that_only_recalibrate_the_start_are_not_kept():
    # the features carry nothing the start's score lacks, and the score is
    # right but three times overconfident: heads at a wide bandwidth times a
    # temperature of 1/3 lower its raw log-loss by a quarter, no more than the
    # start at its own best temperature does
    import torch

    from sk_softmix.classification._kernel_head import fit_kernel_heads, heads_beat_linear
    from sk_softmix.classification._linear_starts import score_losses

    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 4))
    logits = rng.normal(0, 1.5, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(int)
    linear = 3.0 * logits[:, None]
    fit = fit_kernel_heads(
        X, y, 2, np.arange(n), linear, 1, np.random.RandomState(0), torch.device("cpu")
    )
    raw = score_losses(linear, y).mean()
    # 600 samples: the two calibrated losses agree to 0.001, the raw one is 0.19 above
    assert fit.kernel_losses.mean() < raw - 0.1
    assert fit.linear_losses.mean() == pytest.approx(
        score_losses(best_temperature(linear, y) * linear, y).mean()
    )
    assert fit.linear_losses.mean() < fit.kernel_losses.mean() + 0.01
    assert not heads_beat_linear(
        fit.kernel_losses, fit.linear_losses, None, None, fit.kernel_errors, fit.linear_errors
    )


def test_a_start_kept_alone_takes_a_temperature_only_where_it_clearly_pays():
    from sk_softmix.classification._temperature import start_temperature

    rng = np.random.default_rng(2)
    scores = rng.normal(0, 2.0, (2000, 1))
    labels = _logistic_labels(scores, rng)
    # calibrated: whatever the grid's minimiser, the gain is within the noise
    assert start_temperature(scores, labels) == 1.0
    # twice overconfident on 2,000 samples: the gain is many standard errors
    assert start_temperature(2.0 * scores, labels) == 0.5
    # the same, on 40 samples: too few to tell, the scale is kept
    assert start_temperature(1.3 * scores[:40], labels[:40]) == 1.0
