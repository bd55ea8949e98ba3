"""How many CPU threads torch may use: by the size of the work, and within limits.

Two rules, both of which only ever lower torch's intra-op thread count.

**By the length of a step.** torch's OpenMP threads spin between parallel
regions, and a step of a small problem is hundreds of short kernels: with
two threads on two cores the CPU time doubles for a faster step of at most
1.4x, and a second busy process turns the spinning into a 2-9x loss
(``benchmarks/threads.py``). Steps of some 30 ms, whose kernels outlast the
spin, gain from a second thread even under load. So torch gets one thread
per ``FORWARD_SECONDS_PER_THREAD`` of a step's forward pass on one thread,
kept only if a timed run on them is faster now (other busy processes make
them slower): training (:func:`cpu_threads_for_training`) times forward
passes of one step's batch, prediction (:func:`predict_in_parts`) its first
two chunks of queries.

**By the size of one fused call.** torch's fused attention kernel is a
single parallel region over independent blocks of queries, with no spinning
between kernels: on 2 cores it ran 1.9-2x faster on two threads from about
10 ms of work on one, and next to a busy process it still lost no wall time
for 1.2x the CPU time (``benchmarks/README.md``, section 1). Below that size
a second thread costs more than it brings (0.1 ms calls took 7 ms under
load). :func:`threads_for_fused_call` therefore sizes the pool by the number
of scores the call computes, ``FUSED_SCORES_PER_THREAD`` per thread, with no
timed probe: a probe on one thread costs a third of a short prediction.

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

import contextvars
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

# One intra-op thread per this many scores of a fused-kernel call: about 8 ms
# of one 2026 CPU core at p = 2, 13 ms at p = 64 (1.9-3.3 ns per score).
FUSED_SCORES_PER_THREAD = 4_000_000


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
    """Threads that a training step whose forward pass (or a chunk of
    predictions) took ``seconds`` on one thread pays for, at most ``available``."""
    return max(1, min(available, int(seconds // FORWARD_SECONDS_PER_THREAD)))


# A second thread is kept only if it makes a timed run this much faster: next
# to a busy process on 2 cores two threads made steps of every size slower or
# at best 1.3x faster, at 2-8x the CPU time (benchmarks/threads.py).
PARALLEL_SPEEDUP = 1.3


_PROBING = contextvars.ContextVar("sk_softmix_thread_probe", default=False)


def in_timing_probe() -> bool:
    """Whether the running forward pass is a thread-count probe rather than a
    training step: a loss that records its steps must skip it."""
    return _PROBING.get()


def _seconds(run, repeats: int = 2) -> float:
    """Fewest seconds of ``repeats`` runs: one run can lose a time slice to
    another process and look ten times longer than it is."""
    times = []
    token = _PROBING.set(True)
    try:
        for _ in range(repeats):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
    finally:
        _PROBING.reset(token)
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

    ``forward()`` evaluates the training loss of one step's batch with
    gradients enabled, as the step does (the attention kernel differs with
    and without them), but runs no backward pass. It runs on one thread, and, if that took at least
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


def predict_in_parts(device: torch.device, n_queries: int, chunk: int, predict) -> list:
    """``predict(start, stop)`` over every query, on the threads that pay.

    ``predict`` evaluates queries ``start:stop`` (in chunks of ``chunk``
    where it needs to) and returns a tensor. With at least three chunks of
    queries, the first chunk runs on one thread and is timed; if it took
    ``FORWARD_SECONDS_PER_THREAD`` or more, the second runs on
    ``threads_for_seconds`` threads, kept for the rest if that chunk was
    ``PARALLEL_SPEEDUP`` times faster (see ``cpu_threads_for_training``).
    Fewer queries run on one thread: a prediction of one or two chunks is
    too short for a second thread to pay, on digits (one chunk of 40 ms) two
    threads took 1.4-2x the wall time and 1.7-2.3x the CPU time. Timing whole
    chunks rather than slices matters: torch splits a softmax over its rows,
    and a slice of 5 queries over 10^5 tokens ran no faster on two threads
    where chunks of 83 ran 2x faster. The count never exceeds torch's
    current one and is restored on exit. Returns the parts in order.
    """
    if device.type != "cpu":
        return [predict(0, n_queries)]
    limit_threads_in_dask_worker()
    available = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if available == 1 or n_queries < 3 * chunk:
            return [predict(0, n_queries)]
        started = time.perf_counter()
        parts = [predict(0, chunk)]
        single = time.perf_counter() - started
        wanted = threads_for_seconds(single, available)
        if wanted > 1:
            torch.set_num_threads(wanted)
            started = time.perf_counter()
            parts.append(predict(chunk, 2 * chunk))
            if (time.perf_counter() - started) * PARALLEL_SPEEDUP > single:
                torch.set_num_threads(1)
        else:
            parts.append(predict(chunk, 2 * chunk))
        parts.append(predict(2 * chunk, n_queries))
        return parts
    finally:
        torch.set_num_threads(available)


def predict_on_threads(device, n_queries: int, chunk: int, predict, fused_scores=None):
    """``predict(start, stop)`` over every query, as one tensor.

    On the fused kernel (``fused_scores``, the scores of the whole call, not
    None) in one call on :func:`threads_for_fused_call`'s threads; otherwise
    in parts on the threads :func:`predict_in_parts` times.
    """
    if fused_scores is None:
        return torch.cat(predict_in_parts(device, n_queries, chunk, predict))
    with threads_for_fused_call(device, fused_scores):
        return predict(0, n_queries)


@contextmanager
def threads_for_fused_call(device: torch.device, n_scores: int):
    """torch on one thread per ``FUSED_SCORES_PER_THREAD`` scores, at most its
    current count, for one call of the fused kernel (a no-op on a GPU)."""
    if device.type != "cpu":
        yield
        return
    limit_threads_in_dask_worker()
    with _at_most_threads(n_scores // FUSED_SCORES_PER_THREAD):
        yield


# Below this many products (n_samples x n_features**2, a covariance's cost)
# NumPy's BLAS runs a fit's linear algebra on one thread.
BLAS_PRODUCTS_FOR_THREADS = 10**8


@contextmanager
def numpy_blas_threads_for(X):
    """NumPy's BLAS on one thread while fitting a small ``X``.

    A fit's starts (LDA, the best affine map, a tied mixture) are NumPy and
    SciPy linear algebra, on OpenBLAS's own thread pool, which torch's count
    does not reach. On a few hundred points a second BLAS thread saves
    nothing and spins on after every call: the breast-cancer fit (455 x 30)
    took 0.58-0.68 s of CPU for 0.37-0.48 s of wall time with two, and
    0.32-0.43 s for as much wall time with one. Larger problems keep the
    pool (and any limit already set).
    """
    shape = getattr(X, "shape", None)
    if (
        shape is not None
        and len(shape) == 2
        and shape[0] * shape[1] ** 2 >= BLAS_PRODUCTS_FOR_THREADS
    ):
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextmanager
def one_cpu_thread(device: torch.device):
    """torch on one thread for the enclosed set-up work (a no-op on a GPU):
    a kernel on the full pool would leave its threads spinning afterwards."""
    if device.type != "cpu":
        yield
        return
    with _at_most_threads(1):
        yield


@contextmanager
def _at_most_threads(count: int):
    """torch on ``count`` threads (at least 1, at most its current count) for
    the enclosed work; the current count is restored after."""
    available = torch.get_num_threads()
    torch.set_num_threads(max(1, min(available, count)))
    try:
        yield
    finally:
        torch.set_num_threads(available)
