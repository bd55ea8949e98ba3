"""Interrupted fits, concurrent predictions and streaming over many queries."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

import sk_softmix.attention._kernels as kernels_module
import sk_softmix.attention._reference as reference_module
import sk_softmix.attention._softmax as softmax_module
from sk_softmix import LinearAttentionDenoiser, SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture, make_lda

FIGURE_2 = {"means": np.array([[3.0, 0.0], [0.0, 3.0]]), "covariance": 1.0, "noise_variance": 4.0}


def _data(estimator):
    if isinstance(estimator, SoftmaxAttentionClassifier):
        return make_lda(200, [[0.0, 1.0], [1.0, 0.0]], prior=0.6, random_state=0)
    Z, X, _ = make_gaussian_mixture(200, **FIGURE_2, random_state=0)
    return Z, X


def _output(estimator, X):
    if isinstance(estimator, SoftmaxAttentionClassifier):
        return estimator.decision_function(X)
    return estimator.transform(X)


class _InterruptAfter:
    """An Adam step that raises KeyboardInterrupt (as Ctrl-C would) on call ``n``."""

    def __init__(self, n, step):
        self.n, self.calls, self.step = n, 0, step

    def __call__(self, optimizer, *args, **kwargs):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.step(optimizer, *args, **kwargs)


ESTIMATORS = [
    SoftmaxAttentionDenoiser(
        head="bilinear", max_iter=10, solver="adam", device="cpu", random_state=0
    ),
    LinearAttentionDenoiser(max_iter=10, solver="adam", device="cpu", random_state=0),
    SoftmaxAttentionClassifier(
        head="bilinear", max_iter=10, solver="adam", device="cpu", random_state=0
    ),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_ctrl_c_during_fit_leaves_the_estimator_as_it_was(estimator, monkeypatch):
    """The documented choice: an interrupted fit is undone, never half-applied.

    A fresh estimator stays unfitted; a fitted one keeps its previous fit.
    """
    X, y = _data(estimator)
    monkeypatch.setattr(torch.optim.Adam, "step", _InterruptAfter(5, torch.optim.Adam.step))
    fresh = estimator.__class__(**estimator.get_params())
    with pytest.raises(KeyboardInterrupt):
        fresh.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(fresh)

    monkeypatch.undo()
    fitted = estimator.__class__(**estimator.get_params()).fit(X, y)
    before = dict(vars(fitted))
    expected = _output(fitted, X)
    monkeypatch.setattr(torch.optim.Adam, "step", _InterruptAfter(3, torch.optim.Adam.step))
    with pytest.raises(KeyboardInterrupt):
        fitted.set_params(max_iter=20).fit(X[::-1], y[::-1])
    # every attribute is the very object it was (max_iter was set by the user)
    assert vars(fitted).keys() == before.keys()
    assert all(vars(fitted)[key] is value for key, value in before.items() if key != "max_iter")
    np.testing.assert_array_equal(_output(fitted, X), expected)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_concurrent_predictions_equal_sequential_ones(estimator):
    X, y = _data(estimator)
    fitted = estimator.__class__(**estimator.get_params()).fit(X, y)
    batches = [np.random.default_rng(seed).normal(size=(300, X.shape[1])) * 3 for seed in range(8)]
    sequential = [_output(fitted, batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(lambda batch: _output(fitted, batch), batches))
    for one, other in zip(sequential, concurrent, strict=True):
        np.testing.assert_array_equal(one, other)


def _record_chunk_sizes(monkeypatch):
    """The number of queries of every chunk the engine scores, as it goes, on
    the matmul kernel (the fused kernel, the CPU default, stores no scores:
    it takes over where that one is not exact)."""
    sizes = []
    scores_of = kernels_module._scores
    monkeypatch.setattr(softmax_module, "_kernel_name", lambda *args: "matmul")

    def recording(transformed, *args, **kwargs):
        sizes.append(transformed.shape[1])  # (H, queries in the chunk, p)
        return scores_of(transformed, *args, **kwargs)

    monkeypatch.setattr(kernels_module, "_scores", recording)
    return sizes


@pytest.mark.slow
def test_a_million_queries_stream_in_chunks(monkeypatch):
    """transform never holds more than transform_batch_size x L scores at once."""
    Z, X, _ = make_gaussian_mixture(500, **FIGURE_2, random_state=0)
    denoiser = SoftmaxAttentionDenoiser(
        head="bilinear", max_iter=0, transform_batch_size=4_096, device="cpu"
    )
    denoiser.fit(Z, X)
    queries = np.random.default_rng(1).normal(size=(1_000_000, 2)).astype(np.float32) * 3
    largest = _record_chunk_sizes(monkeypatch)
    denoised = denoiser.transform(queries)
    assert denoised.shape == queries.shape and np.isfinite(denoised).all()
    assert max(largest) <= 4_096 and sum(largest) == len(queries)
    # the streamed result equals a direct evaluation of a slice, on the fused
    # kernel, which forms no scores at all
    monkeypatch.undo()
    for module in (kernels_module, reference_module):
        monkeypatch.setattr(module, "_scores", lambda *args, **kwargs: pytest.fail())
    # two float32 kernels: a few ulps apart (4.8e-7 at most, measured, on
    # outputs up to about 10), hence atol for the outputs near 0
    np.testing.assert_allclose(
        denoiser.transform(queries[-1_000:]), denoised[-1_000:], rtol=1e-5, atol=1e-6
    )


def test_a_small_training_minibatch_leaves_transform_in_large_chunks(monkeypatch):
    # batch_size is the training minibatch only: transform's chunk is
    # transform_batch_size, by default as many queries as fill 2**24 scores
    Z, X, _ = make_gaussian_mixture(500, **FIGURE_2, random_state=0)
    denoiser = SoftmaxAttentionDenoiser(max_iter=2, batch_size=8, device="cpu", random_state=0)
    denoiser.fit(Z, X)
    queries = np.random.default_rng(1).normal(size=(20_000, 2))
    sizes = _record_chunk_sizes(monkeypatch)
    denoiser.transform(queries)
    per_chunk = 2**24 // (denoiser.n_heads * len(denoiser.prompt_))
    assert sizes == [per_chunk] * (20_000 // per_chunk) + [20_000 % per_chunk]
