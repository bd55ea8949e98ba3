"""Fitted estimators survive pickle, joblib and skops round trips unchanged.

The fitted state is NumPy on the CPU (no torch objects), so every format
restores an estimator whose outputs are bitwise those of the original.
"""

import pickle

import joblib
import numpy as np
import pytest
import torch

from sk_softmix import (
    BayesDenoiser,
    GaussianMixtureDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.datasets import make_gaussian_mixture, make_lda

MEANS = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])


def _denoising_data():
    X, Z, _ = make_gaussian_mixture(60, MEANS, noise_variance=1.0, random_state=0)
    return Z, X


def _classification_data():
    return make_lda(60, np.array([[1.0, 0.0], [-1.0, 0.0]]), random_state=0)


def _fit(name):
    """A small fitted estimator, its data and the names of its output methods."""
    attention = dict(max_iter=3, batch_size=16, device="cpu", random_state=0)
    Z, X = _denoising_data()
    if name == "softmax_denoiser":
        return SoftmaxAttentionDenoiser(noise_variance=1.0, **attention).fit(Z, X), Z
    if name == "softmax_denoiser_partial":  # carries Adam moments in optimizer_state_
        est = SoftmaxAttentionDenoiser(noise_variance=1.0, **attention)
        return est.partial_fit(Z, X).partial_fit(Z, X), Z
    if name == "linear_denoiser":
        return LinearAttentionDenoiser(noise_variance=1.0, **attention).fit(Z, X), Z
    if name == "linear_denoiser_partial":
        return LinearAttentionDenoiser(noise_variance=1.0, **attention).partial_fit(Z, X), Z
    if name == "gmm_denoiser":
        return GaussianMixtureDenoiser(noise_variance=1.0, random_state=0).fit(Z), Z
    if name == "bayes_denoiser":
        return BayesDenoiser(MEANS, noise_variance=1.0).fit(Z), Z
    X, y = _classification_data()
    return SoftmaxAttentionClassifier(**attention).fit(X, y), X


NAMES = [
    "softmax_denoiser",
    "softmax_denoiser_partial",
    "linear_denoiser",
    "linear_denoiser_partial",
    "gmm_denoiser",
    "bayes_denoiser",
    "classifier",
]
DENOISER_METHODS = ("transform", "predict")
CLASSIFIER_METHODS = ("predict", "predict_proba", "decision_function")


@pytest.fixture(scope="module", params=NAMES)
def fitted(request):
    return _fit(request.param)


def _assert_same_outputs(original, restored, X):
    assert type(restored) is type(original)
    methods = CLASSIFIER_METHODS if hasattr(original, "classes_") else DENOISER_METHODS
    for method in methods:
        expected = getattr(original, method)(X)
        got = getattr(restored, method)(X)
        assert got.dtype == expected.dtype, method
        assert np.array_equal(got, expected), method


def _torch_objects(value, path="est", seen=None):
    """Paths to every torch object reachable through attributes, dicts and sequences."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor | torch.nn.Module | torch.optim.Optimizer):
        return [path]
    if type(value).__module__.split(".")[0] == "torch":
        return [path]
    if isinstance(value, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
        items += [(f"{path}.keys()", k) for k in value]
    elif isinstance(value, list | tuple | set | frozenset):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif isinstance(value, np.ndarray):
        items = [(f"{path}.flat", v) for v in value.flat] if value.dtype == object else []
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        items = [(f"{path}.{k}", v) for k, v in vars(value).items()]
    else:
        items = []
    return [found for p, v in items for found in _torch_objects(v, p, seen)]


def test_fitted_state_holds_no_torch_objects(fitted):
    est, _ = fitted
    assert _torch_objects(est) == []


def test_pickle_round_trip(fitted):
    est, X = fitted
    _assert_same_outputs(est, pickle.loads(pickle.dumps(est)), X)


def test_joblib_round_trip(fitted, tmp_path):
    est, X = fitted
    path = tmp_path / "estimator.joblib"
    joblib.dump(est, path)
    _assert_same_outputs(est, joblib.load(path), X)


def _is_reviewable(name):
    """Types we accept after review: our estimators, NumPy and scikit-learn names."""
    return name.split(".")[0] in {"sk_softmix", "numpy", "sklearn"}


def test_skops_round_trip(fitted, tmp_path):
    sio = pytest.importorskip("skops.io")
    est, X = fitted
    path = tmp_path / "estimator.skops"
    sio.dump(est, path)
    untrusted = sio.get_untrusted_types(file=path)
    # The only type to review is the estimator's own class: its state is NumPy
    # arrays, builtins and (GaussianMixtureDenoiser) a scikit-learn
    # GaussianMixture, which skops trusts by default.
    assert untrusted == [f"{type(est).__module__}.{type(est).__qualname__}"]
    assert all(_is_reviewable(name) for name in untrusted)
    with pytest.raises(sio.exceptions.UntrustedTypesFoundException):
        sio.load(path)
    _assert_same_outputs(est, sio.load(path, trusted=untrusted), X)
