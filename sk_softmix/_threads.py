"""How many CPU threads torch may use: by the size of the work, and within limits.

Two rules, both of which only ever lower torch's intra-op thread count.

**By the length of a step.** torch's OpenMP threads spin between parallel
regions, and a step of a small problem is hundreds of short kernels: with
two threads on two cores the CPU time doubles for a faster step of at most
1.4x, and a second busy process turns the spinning into a 2-9x loss
(``benchmarks/threads.py``). Steps of some 30 ms, whose kernels outlast the
spin, gain from a second thread even under load. So torch gets one thread
per ``FORWARD_SECONDS_PER_THREAD`` of a step's forward pass on one thread:
training (:func:`cpu_threads_for_training`) times one; prediction
(:func:`cpu_threads_for_prediction`), too short to time first, estimates
it from the number of scores of a chunk (``forward_seconds``).

**Within limits.** torch's CPU kernels run on an OpenMP pool whose size is a
per-thread setting (``omp_set_num_threads``), read once from
``OMP_NUM_THREADS`` at import. The usual limits therefore already reach
torch without any help:

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
import time
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits

# One intra-op thread per this many seconds of a training step's forward pass
# on one thread (a step with its backward takes about three times as long).
# On 2 cores (benchmarks/threads.py, tests of the estimators' steps): steps
# of 9 ms (the classifier on digits) gained 1.7x wall time for 1.1x the CPU
# time idle but lost under load; steps of 50-290 ms (the Figure 2 denoiser,
# supervised or by SURE) gained 1.5-2x for no extra CPU time.
FORWARD_SECONDS_PER_THREAD = 0.01

# A forward pass costs about this many seconds per score (query-token pair
# and head) on one thread, times 1 + p / 16 for p features (measured on 2
# cores: 2.4 ns at p = 16, 3.7 ns at p = 2 with 10^5 tokens).
SECONDS_PER_SCORE = 3e-9


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


def threads_for_seconds(seconds: float, available: int) -> int:
    """Threads that a training step whose forward pass took ``seconds`` on one
    thread pays for, at most ``available``."""
    return max(1, min(available, int(seconds // FORWARD_SECONDS_PER_THREAD)))


# A second thread is kept only if it makes a timed run this much faster: next
# to a busy process on 2 cores two threads made steps of every size slower or
# at best 1.3x faster, at 2-8x the CPU time (benchmarks/threads.py).
PARALLEL_SPEEDUP = 1.3


def _seconds(run, repeats: int = 2) -> float:
    """Fewest seconds of ``repeats`` runs: one run can lose a time slice to
    another process and look ten times longer than it is."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        with torch.no_grad():
            run()
        times.append(time.perf_counter() - started)
    return min(times)


def _threads_that_pay(wanted: int, single_seconds: float, run) -> int:
    """``wanted``, if ``run()`` on that many threads is now ``PARALLEL_SPEEDUP``
    times faster than the ``single_seconds`` it took on one, else 1: other
    busy processes make more threads cost CPU time for nothing."""
    if wanted == 1:
        return 1
    torch.set_num_threads(wanted)
    return wanted if _seconds(run) * PARALLEL_SPEEDUP <= single_seconds else 1


@contextmanager
def cpu_threads_for_training(device: torch.device, forward):
    """Train on as many threads as timed forward passes say the steps pay for.

    ``forward()`` evaluates the training loss of one step's batch without a
    gradient. It runs on one thread, and, if that took at least
    ``FORWARD_SECONDS_PER_THREAD``, again on ``threads_for_seconds`` threads
    (at most ``available``, torch's current count, never raised), which are
    kept if that run was ``PARALLEL_SPEEDUP`` times faster. Timing beats
    counting products: a step's cost per product varies tenfold with the
    number of features and the loss (Stein's estimate carries a covariance
    per query and token), and only a timed run sees other busy processes.
    The count is restored on exit. A no-op on a GPU.
    """
    if device.type != "cpu":
        yield
        return
    limit_threads_in_dask_worker()
    available = torch.get_num_threads()
    if available == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        single = _seconds(forward)
        wanted = threads_for_seconds(single, available)
        torch.set_num_threads(_threads_that_pay(wanted, single, forward))
        yield
    finally:
        torch.set_num_threads(available)


def forward_seconds(n_scores: float, n_features: int) -> float:
    """Estimated seconds of a forward pass over ``n_scores`` scores, one thread."""
    return n_scores * (1 + n_features / 16) * SECONDS_PER_SCORE


# The prediction's timed runs: a slice of the first chunk's queries taking
# about this long on one thread (their results are discarded), and at least
# this many queries: torch splits a softmax over its rows, so a slice of 5
# queries over 10^5 tokens ran no faster on two threads while whole chunks
# of 83 ran 2x faster.
PROBE_SECONDS = 0.004
PROBE_MIN_QUERIES = 64


@contextmanager
def cpu_threads_for_prediction(
    device: torch.device, n_scores: float, n_features: int, n_queries: int, forward
):
    """Run the enclosed prediction on the threads its chunks pay for.

    ``n_scores`` counts the scores of one chunk of ``n_queries`` queries
    and ``forward(k)`` predicts the first ``k`` of them. Where
    ``forward_seconds`` estimates a chunk at ``FORWARD_SECONDS_PER_THREAD``
    or more on one thread, a slice of about ``PROBE_SECONDS`` is timed on
    one thread and on ``threads_for_seconds`` threads, which are kept if
    ``PARALLEL_SPEEDUP`` times faster (see ``cpu_threads_for_training``);
    otherwise one thread. The count never exceeds torch's current one
    (which already reflects ``OMP_NUM_THREADS``, ``threadpool_limits``,
    joblib's and Dask's limits) and is restored on exit.
    ``torch.set_num_threads`` rather than an OpenMP-only limit: it also
    lowers MKL's count, which a ``torch.set_num_threads`` call of the
    user's pins apart from OpenMP's. A no-op on a GPU.
    """
    if device.type != "cpu":
        yield
        return
    limit_threads_in_dask_worker()
    available = torch.get_num_threads()
    if available == 1:
        yield
        return
    estimate = forward_seconds(n_scores, n_features)
    wanted = threads_for_seconds(estimate, available)
    torch.set_num_threads(1)
    try:
        if wanted > 1:
            k = min(n_queries, max(PROBE_MIN_QUERIES, int(n_queries * PROBE_SECONDS / estimate)))
            probe = lambda: forward(k)  # noqa: E731
            torch.set_num_threads(_threads_that_pay(wanted, _seconds(probe), probe))
        yield
    finally:
        torch.set_num_threads(available)
