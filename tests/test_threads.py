"""torch's CPU threads: one thread for small steps, never above the caller's limit.

Timing is measured in ``benchmarks/threads.py``; these tests check the
mechanism: which count the package picks, that it is in force while the
estimators compute, and that the caller's count comes back afterwards.
"""

import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from threadpoolctl import threadpool_limits

import sk_softmix._classifier as classifier_module
import sk_softmix._denoiser_base as denoiser_module
from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix._threads import (
    FORWARD_SECONDS_PER_THREAD,
    cpu_threads_for_prediction,
    forward_seconds,
    threads_for_seconds,
)

CPU = torch.device("cpu")


@pytest.fixture
def two_threads():
    """torch on two threads for the test (the default on a 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    if torch.get_num_threads() != 2:
        pytest.skip("this torch cannot run two intra-op threads")
    yield
    torch.set_num_threads(before)


def scores_for(seconds, n_features=16):
    """Scores of a chunk whose forward pass is estimated at ``seconds``."""
    return seconds / forward_seconds(1, n_features)


def test_threads_grow_with_the_step_and_stop_at_the_available_count():
    assert threads_for_seconds(0.0, 8) == 1
    assert threads_for_seconds(0.99 * FORWARD_SECONDS_PER_THREAD, 8) == 1
    assert threads_for_seconds(2 * FORWARD_SECONDS_PER_THREAD, 8) == 2
    assert threads_for_seconds(100 * FORWARD_SECONDS_PER_THREAD, 8) == 8
    assert threads_for_seconds(100 * FORWARD_SECONDS_PER_THREAD, 1) == 1
    # more features, more work per score
    assert forward_seconds(1000, 64) > forward_seconds(1000, 2) > 0


def sleeping(seconds, parallel):
    """A fake forward pass of ``seconds`` on one thread, which more threads
    shorten (``parallel``) or not (a machine whose other cores are busy)."""

    def forward(k=None):
        share = torch.get_num_threads() if parallel else 1
        time.sleep(seconds / share)

    return forward


def never_called(k=None):
    raise AssertionError("a prediction this small is not timed")


def test_small_prediction_runs_on_one_thread_and_restores_the_count(two_threads):
    with cpu_threads_for_prediction(CPU, 1000, 4, 10, never_called):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    # a long chunk: a slice is timed on one thread and on two
    long_chunk = scores_for(10 * FORWARD_SECONDS_PER_THREAD)
    with cpu_threads_for_prediction(CPU, long_chunk, 16, 1000, sleeping(0.02, True)):
        assert torch.get_num_threads() == 2
    # ... and two threads are dropped when they do not make it faster
    with cpu_threads_for_prediction(CPU, long_chunk, 16, 1000, sleeping(0.02, False)):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    # the same scores over more features take longer: they may pay for two threads
    n_scores = scores_for(1.5 * FORWARD_SECONDS_PER_THREAD, n_features=16)
    with cpu_threads_for_prediction(CPU, n_scores, 2, 1000, never_called):
        assert torch.get_num_threads() == 1
    with cpu_threads_for_prediction(CPU, n_scores, 64, 1000, sleeping(0.02, True)):
        assert torch.get_num_threads() == 2


def test_count_restored_when_the_step_raises(two_threads):
    with pytest.raises(RuntimeError), cpu_threads_for_prediction(CPU, 1000, 2, 10, never_called):
        raise RuntimeError("interrupted")
    assert torch.get_num_threads() == 2


def test_caller_limit_is_never_raised(two_threads):
    with threadpool_limits(limits=1, user_api="openmp"):
        with cpu_threads_for_prediction(CPU, scores_for(1.0), 16, 10, sleeping(0.02, True)):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1


def _record_threads(monkeypatch, module, name):
    """Wrap ``module.name`` so that each call records torch's thread count."""
    seen = []
    original = getattr(module, name)

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return seen


def test_classifier_trains_and_predicts_iris_on_one_thread(two_threads, monkeypatch):
    X, y = load_iris(return_X_y=True)
    seen = _record_threads(monkeypatch, classifier_module, "classifier_scores")
    model = SoftmaxAttentionClassifier(random_state=0, max_iter=5).fit(X, y)
    n_fit = len(seen)
    model.predict(X)
    assert n_fit > 0 and len(seen) > n_fit
    assert set(seen) == {1}
    assert torch.get_num_threads() == 2


def test_denoiser_trains_and_transforms_small_data_on_one_thread(two_threads, monkeypatch):
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3))
    seen = _record_threads(monkeypatch, denoiser_module, "stein_risk")
    model = SoftmaxAttentionDenoiser(noise_variance=0.5, max_iter=5, init="linear")
    model.fit(Z)
    n_fit = len(seen)
    model.sure(Z)
    assert n_fit > 0 and len(seen) > n_fit
    assert set(seen) == {1}
    assert torch.get_num_threads() == 2


def test_import_keeps_plotting_the_study_and_dataframes_off_the_path():
    # tqdm is not checked: torch.hub imports it whenever it is installed
    modules = ("matplotlib", "sk_softmix.study", "pandas", "polars", "dask", "distributed")
    code = f"import sys, sk_softmix; print([m for m in {modules!r} if m in sys.modules])"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert loaded == "[]"
