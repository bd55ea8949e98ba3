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

import sk_softmix.classification._objective as classifier_objective_module
import sk_softmix.classification._prediction as classifier_prediction_module
import sk_softmix.denoising._base as denoiser_module
import sk_softmix.denoising._objective as denoiser_objective_module
from sk_softmix import SoftmaxAttentionClassifier, SoftmaxAttentionDenoiser
from sk_softmix.attention._threads import (
    FORWARD_SECONDS_PER_THREAD,
    cpu_threads_for_training,
    in_timing_probe,
    one_cpu_thread,
    predict_in_parts,
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


def test_threads_grow_with_the_step_and_stop_at_the_available_count():
    assert threads_for_seconds(0.0, 8) == 1
    assert threads_for_seconds(0.99 * FORWARD_SECONDS_PER_THREAD, 8) == 1
    assert threads_for_seconds(2 * FORWARD_SECONDS_PER_THREAD, 8) == 2
    assert threads_for_seconds(100 * FORWARD_SECONDS_PER_THREAD, 8) == 8
    assert threads_for_seconds(100 * FORWARD_SECONDS_PER_THREAD, 1) == 1


def sleeping(seconds, parallel):
    """A fake forward pass of ``seconds`` on one thread, which more threads
    shorten (``parallel``) or not (a machine whose other cores are busy)."""

    def forward(*rows):
        share = torch.get_num_threads() if parallel else 1
        time.sleep(seconds / share)
        return torch.zeros(rows[1] - rows[0] if rows else 0)

    return forward


def recording(forward, calls):
    def predict(start, stop):
        calls.append((start, stop, torch.get_num_threads()))
        return forward(start, stop)

    return predict


def test_training_threads_follow_the_timed_forward_pass(two_threads):
    seen = []

    def forward():
        seen.append(torch.get_num_threads())  # timed on one thread
        # with gradients, as a step runs (the attention kernel differs), and
        # flagged so that a loss recording its steps skips it
        assert torch.is_grad_enabled() and in_timing_probe()

    with cpu_threads_for_training(CPU, forward):
        assert torch.get_num_threads() == 1  # a forward pass of no time
    assert set(seen) == {1}
    assert not in_timing_probe()
    long_step = 2.5 * FORWARD_SECONDS_PER_THREAD
    with cpu_threads_for_training(CPU, sleeping(long_step, parallel=True)):
        assert torch.get_num_threads() == 2
    # a busy machine: two threads are no faster, so one is kept
    with cpu_threads_for_training(CPU, sleeping(long_step, parallel=False)):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_short_predictions_run_on_one_thread_and_long_ones_time_two_chunks(two_threads):
    calls = []
    parts = predict_in_parts(CPU, 25, 10, recording(sleeping(0.0, True), calls))
    assert calls == [(0, 25, 1)] and sum(len(part) for part in parts) == 25
    calls.clear()
    long_chunk = 2.5 * FORWARD_SECONDS_PER_THREAD
    parts = predict_in_parts(CPU, 45, 10, recording(sleeping(long_chunk, True), calls))
    assert calls == [(0, 10, 1), (10, 20, 2), (20, 45, 2)]
    assert sum(len(part) for part in parts) == 45
    # a busy machine: the second chunk was no faster on two threads
    calls.clear()
    predict_in_parts(CPU, 45, 10, recording(sleeping(long_chunk, False), calls))
    assert calls == [(0, 10, 1), (10, 20, 2), (20, 45, 1)]
    # quick chunks never try a second thread
    calls.clear()
    predict_in_parts(CPU, 45, 10, recording(sleeping(0.0, True), calls))
    assert [threads for *_, threads in calls] == [1, 1, 1]
    assert torch.get_num_threads() == 2


def test_count_restored_when_interrupted(two_threads):
    with pytest.raises(RuntimeError), one_cpu_thread(CPU):
        raise RuntimeError("interrupted")
    assert torch.get_num_threads() == 2

    def failing(*rows):
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        predict_in_parts(CPU, 45, 10, failing)
    with pytest.raises(RuntimeError), cpu_threads_for_training(CPU, failing):
        pass
    assert torch.get_num_threads() == 2


def test_caller_limit_is_never_raised(two_threads):
    with threadpool_limits(limits=1, user_api="openmp"):
        calls = []
        predict_in_parts(CPU, 45, 10, recording(sleeping(0.05, True), calls))
        assert [threads for *_, threads in calls] == [1]
        with cpu_threads_for_training(CPU, sleeping(0.05, True)):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1


def _record_threads(monkeypatch, modules, name):
    """Wrap ``name`` in each of ``modules`` (where it is called) so that each
    call records torch's thread count."""
    seen = []
    for module in modules:
        original = getattr(module, name)

        def recording(*args, original=original, **kwargs):
            seen.append(torch.get_num_threads())
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
    return seen


def test_classifier_trains_and_predicts_iris_on_one_thread(two_threads, monkeypatch):
    X, y = load_iris(return_X_y=True)
    modules = (classifier_objective_module, classifier_prediction_module)
    seen = _record_threads(monkeypatch, modules, "classifier_scores")
    model = SoftmaxAttentionClassifier(head="bilinear", random_state=0, max_iter=5).fit(X, y)
    n_fit = len(seen)
    model.predict(X)
    assert n_fit > 0 and len(seen) > n_fit
    assert set(seen) == {1}
    assert not in_timing_probe()
    assert torch.get_num_threads() == 2


def test_denoiser_trains_and_transforms_small_data_on_one_thread(two_threads, monkeypatch):
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3))
    seen = _record_threads(monkeypatch, (denoiser_objective_module, denoiser_module), "stein_risk")
    model = SoftmaxAttentionDenoiser(noise_variance=0.5, max_iter=5, init="linear")
    model.fit(Z)
    n_fit = len(seen)
    model.sure(Z)
    assert n_fit > 0 and len(seen) > n_fit
    assert set(seen) == {1}
    assert not in_timing_probe()
    assert torch.get_num_threads() == 2


def test_import_keeps_plotting_the_study_and_dataframes_off_the_path():
    # tqdm is not checked: torch.hub imports it whenever it is installed.
    # scikit-learn itself imports pandas where it is installed (sklearn.utils.fixes),
    # so only what importing sk_softmix adds to what its dependencies load counts.
    modules = ("matplotlib", "sk_softmix.study", "pandas", "polars", "dask", "distributed")
    code = (
        "import sys, sklearn.utils.validation, scipy.special, torch; before = set(sys.modules); "
        f"import sk_softmix; print([m for m in {modules!r} if m in set(sys.modules) - before])"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert loaded == "[]"


def test_small_fits_run_numpy_blas_on_one_thread():
    from threadpoolctl import threadpool_info

    from sk_softmix.attention._threads import BLAS_PRODUCTS_FOR_THREADS, numpy_blas_threads_for

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    with numpy_blas_threads_for(np.zeros((455, 30))):
        assert set(blas_threads()) == {1}
    assert blas_threads() == before
    n_features = 100
    large = np.broadcast_to(0.0, (BLAS_PRODUCTS_FOR_THREADS // n_features**2, n_features))
    with numpy_blas_threads_for(large):
        assert blas_threads() == before  # a large problem keeps the pool
