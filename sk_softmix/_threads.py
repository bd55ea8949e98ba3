"""Keeping torch's intra-op threads within a Dask worker thread's share of the CPUs.

torch's CPU kernels run on an OpenMP pool whose size is a per-thread setting
(``omp_set_num_threads``), read once from ``OMP_NUM_THREADS`` at import. The
usual limits therefore already reach torch without any help:

- joblib's loky workers are fresh processes started with ``OMP_NUM_THREADS``
  set to ``cpu_count() // n_jobs`` (or ``inner_max_num_threads``);
- a Dask nanny starts its worker process with ``OMP_NUM_THREADS=1``
  (``distributed.nanny.pre-spawn-environ``);
- ``threadpoolctl.threadpool_limits`` finds torch's OpenMP runtime and limits
  the calling thread.

The one case nothing covers is a Dask worker living in an already-started
process (``LocalCluster(processes=False)``, ``Client(processes=False)``,
``dask worker --no-nanny``): every worker thread then runs torch on all the
cores, and ``k`` concurrent tasks oversubscribe the machine ``k`` times.
:func:`limit_threads_in_dask_worker` caps the calling worker thread at its
share, ``cpu_count() // (threads of all Dask workers in this process)``, and
never raises the current count.
"""

import os
import sys

import torch
from threadpoolctl import threadpool_limits


def _dask_worker_thread_budget() -> int | None:
    """CPUs per Dask worker thread in this process, or None outside a Dask task."""
    if "distributed" not in sys.modules:  # never import distributed ourselves
        return None
    from distributed import Worker, get_worker

    try:
        worker = get_worker()
    except ValueError:  # not running inside a Dask task
        return None
    # In-process clusters hold several workers in one process; count them all.
    workers = list(getattr(Worker, "_instances", ())) or [worker]
    n_threads = sum(w.state.nthreads for w in workers if w.status.name == "running")
    n_threads = max(n_threads, worker.state.nthreads, 1)
    return max(1, (os.cpu_count() or 1) // n_threads)


def limit_threads_in_dask_worker() -> None:
    """Cap torch's threads in the calling Dask worker thread at its CPU share.

    A no-op outside a Dask task, and never raises the thread count: a tighter
    ``OMP_NUM_THREADS`` or ``threadpool_limits`` stays in force. The cap is
    the per-thread OpenMP setting that ``threadpool_limits`` also uses, so it
    stays in the worker thread and leaves the rest of the process alone.
    """
    budget = _dask_worker_thread_budget()
    if budget is None:
        return
    # get_num_threads first: torch initialises a new thread's pool lazily and
    # would otherwise overwrite the cap on its first parallel kernel.
    if torch.get_num_threads() > budget:
        threadpool_limits(limits=budget, user_api="openmp")
    if torch.get_num_threads() > budget:  # a torch built without OpenMP
        torch.set_num_threads(budget)
