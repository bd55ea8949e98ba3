"""Parameters that cannot act at the other settings say so (issue 41).

Kernel heads are tuned on a grid in closed form: the training parameters of
the paper's bilinear heads change nothing there. Each test checks both
halves: the result is bit-identical (so the parameter truly does nothing)
and ``fit`` names it in a warning; where the parameter does act, no warning.
"""

import warnings

import numpy as np
import pytest

from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix.training._inactive import changed_from_default

CLASSIFIER_TRAINING = {"alpha": 100.0, "max_iter": 1, "learning_rate": 5.0, "solver": "gd"}
DENOISER_TRAINING = {"n_components": 4, "max_iter": 7, "learning_rate": 5.0, "solver": "adam"}


@pytest.fixture(scope="module")
def xor():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    return X, (X[:, 0] * X[:, 1] > 0).astype(int)


@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(1)
    clean = rng.normal(size=(150, 2)) + 3 * rng.integers(0, 2, size=(150, 1))
    return clean + 0.5 * rng.normal(size=clean.shape), clean


def _inactive_warnings(caught):
    return [str(w.message) for w in caught if "change nothing here" in str(w.message)]


def _fit(estimator, *data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(*data)
    return _inactive_warnings(caught)


def test_classifier_training_parameters_warn_and_change_nothing_with_kernel_heads(xor):
    X, y = xor
    default = SoftmaxAttentionClassifier(random_state=0)
    assert _fit(default, X, y) == []
    changed = SoftmaxAttentionClassifier(random_state=0, **CLASSIFIER_TRAINING)
    (message,) = _fit(changed, X, y)
    for name, value in CLASSIFIER_TRAINING.items():
        assert f"{name}={value!r}" in message
    np.testing.assert_array_equal(changed.predict_proba(X), default.predict_proba(X))


def test_classifier_parameters_that_act_do_not_warn(xor):
    X, y = xor
    # max_iter=0 turns the kernel heads off; the bilinear heads train on all of them
    assert _fit(SoftmaxAttentionClassifier(max_iter=0), X, y) == []
    bilinear = SoftmaxAttentionClassifier(head="bilinear", random_state=0, alpha=1.0, max_iter=5)
    assert _fit(bilinear, X, y) == []


def test_denoiser_training_parameters_warn_and_change_nothing_with_clean_targets(pairs):
    noisy, clean = pairs
    default = SoftmaxAttentionDenoiser(random_state=0)
    assert _fit(default, noisy, clean) == []
    changed = SoftmaxAttentionDenoiser(random_state=0, **DENOISER_TRAINING)
    (message,) = _fit(changed, noisy, clean)
    for name in DENOISER_TRAINING:
        assert f"{name}=" in message
    np.testing.assert_array_equal(changed.transform(noisy), default.transform(noisy))


def test_denoiser_without_clean_targets_trains_so_does_not_warn(pairs):
    noisy, _ = pairs
    denoiser = SoftmaxAttentionDenoiser(noise_variance=0.25, random_state=0, max_iter=5)
    assert _fit(denoiser, noisy) == []


def test_changed_from_default_compares_values_and_arrays():
    estimator = SoftmaxAttentionClassifier(
        early_stopping=True, max_iter=300, tol=np.array(0.1), batch_size=np.array([256, 256])
    )
    names = ["early_stopping", "max_iter", "tol", "batch_size", "alpha"]
    # max_iter and alpha at their defaults; an array compared with a default is a change
    assert set(changed_from_default(estimator, names)) == {"early_stopping", "tol", "batch_size"}
