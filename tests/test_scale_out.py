"""Grid search over a Dask cluster through joblib, and torch's threads in its workers."""

import os

import joblib
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV
from threadpoolctl import threadpool_limits

from sk_softmix import SoftmaxAttentionDenoiser
from sk_softmix.attention._device import resolve_device
from sk_softmix.attention._threads import limit_threads_in_dask_worker
from sk_softmix.datasets import make_gaussian_mixture

distributed = pytest.importorskip("distributed")

N_WORKERS = 2


@pytest.fixture(scope="module")
def client():
    # Workers in this process (processes=False): starts in about a second, and
    # is the set-up where torch is not limited by OMP_NUM_THREADS at start-up.
    with (
        distributed.LocalCluster(
            n_workers=N_WORKERS,
            threads_per_worker=1,
            processes=False,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


def _search():
    return GridSearchCV(
        # init="random": the default Bayes initialisation fits a mixture first,
        # which is most of the run time at this size.
        SoftmaxAttentionDenoiser(max_iter=20, init="random", device="cpu", random_state=0),
        {"n_heads": [1, 2]},
        cv=3,
    )


def test_grid_search_over_dask_matches_default_backend(client):
    Z, X, _ = make_gaussian_mixture(
        300, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    )
    local = _search().fit(Z, X)
    with (
        distributed.get_task_stream(client) as stream,
        joblib.parallel_config(backend="dask"),
    ):
        remote = _search().fit(Z, X)
    assert len(stream.data) > 0  # the fits did run on the Dask workers
    assert remote.best_params_ == local.best_params_
    # Same fits on the same splits from the same seeds; only the number of
    # torch threads differs, which reorders float sums (float64 here).
    np.testing.assert_allclose(
        remote.cv_results_["mean_test_score"],
        local.cv_results_["mean_test_score"],
        rtol=1e-6,
        atol=1e-9,
    )


def _threads_before_and_after(_):
    before = torch.get_num_threads()
    resolve_device("cpu")  # what every fit and transform calls first
    return before, torch.get_num_threads()


def test_torch_threads_capped_in_dask_worker_threads(client):
    cpus = os.cpu_count() or 1
    budget = max(1, cpus // N_WORKERS)
    futures = client.map(_threads_before_and_after, range(N_WORKERS), pure=False)
    for before, after in client.gather(futures):
        assert after == min(before, budget)
    # tighter limits in force stay in force: the cap never raises the count
    futures = client.map(_limited_then_capped, range(N_WORKERS), pure=False)
    assert client.gather(futures) == [1] * N_WORKERS


def _limited_then_capped(_):
    with threadpool_limits(limits=1, user_api="openmp"):
        resolve_device("cpu")
        return torch.get_num_threads()


def test_no_cap_outside_dask_and_threadpool_limits_reach_torch():
    before = torch.get_num_threads()
    limit_threads_in_dask_worker()
    assert torch.get_num_threads() == before
    # torch's OpenMP runtime is found by threadpoolctl, so the usual
    # threadpool_limits (and sklearn/joblib nesting) reaches it directly.
    with threadpool_limits(limits=1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
