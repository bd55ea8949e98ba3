"""What the benchmark sections share: the Figure 2 task, timing and tables."""

import os
import time

import numpy as np
import torch

from sk_softmix import BayesDenoiser
from sk_softmix.datasets import make_gaussian_mixture

# The paper's Figure 2 task: p = 2, means (3, 0) and (0, 3), covariance I,
# noise variance 4.
FIGURE2_MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])
FIGURE2 = {"means": FIGURE2_MEANS, "covariance": 1.0, "noise_variance": 4.0}


# Prepended to the subprocess probes of sections 2 and 6:
# ``peak_extra_mib(call)`` runs ``call()`` while a thread samples the resident
# set size (/proc/self/statm) and returns its result and the peak added, MiB.
PEAK_SAMPLER_SOURCE = """
import os, threading, time
def _resident():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def peak_extra_mib(call, interval=0.001):
    before = _resident()
    peak, running = [before], [True]
    def sample():
        while running[0]:
            peak[0] = max(peak[0], _resident())
            time.sleep(interval)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = call()
    finally:
        running[0] = False
        sampler.join()
    return result, (peak[0] - before) / 2**20
"""


def synchronize(device: str) -> None:
    """Wait for queued CUDA work, so that wall-clock times are complete."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def best_of(function, repeats: int = 1, device: str = "cpu") -> float:
    """Fewest seconds ``function()`` took over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        function()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def timed(function, device: str = "cpu"):
    """``function()``'s result and the seconds it took."""
    synchronize(device)
    start = time.perf_counter()
    result = function()
    synchronize(device)
    return result, time.perf_counter() - start


def excess_ratio(denoised: np.ndarray, clean: np.ndarray, bayes: np.ndarray) -> float:
    """MSE of ``denoised`` over the Bayes MSE, on the same points."""
    return float(np.mean((denoised - clean) ** 2) / np.mean((bayes - clean) ** 2))


def figure2_test_set(n_samples: int, means=FIGURE2_MEANS, random_state: int = 123):
    """Fresh noisy points, their clean versions and the Bayes denoiser's output."""
    Z, X, _ = make_gaussian_mixture(
        n_samples, means, covariance=1.0, noise_variance=4.0, random_state=random_state
    )
    bayes = BayesDenoiser(means, covariance=1.0, noise_variance=4.0).fit(Z).transform(Z)
    return Z, X, bayes


def print_table(title: str, headers: list[str], rows: list[list]) -> None:
    """A Markdown table; floats get 3 significant digits, None prints as '-'."""

    def cell(value):
        if value is None:
            return "-"
        if isinstance(value, float):
            if value != value:
                return "nan"
            return f"{value:,.3g}" if abs(value) < 1e3 else f"{value:,.0f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    print(f"\n### {title}\n")
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|")
    for row in rows:
        print("| " + " | ".join(cell(value) for value in row) + " |")
    print(flush=True)


def psnr(denoised, clean):
    """``10 log10(1 / MSE)`` in dB, for images in [0, 1]."""
    return 10 * np.log10(1.0 / np.mean((np.asarray(denoised, dtype=np.float64) - clean) ** 2))


def target_row(image, sigma, ours, reference, psnr_target, time_target):
    """A row of an image section's targets: ours minus the reference's PSNR,
    our time over its; ``ours`` and ``reference`` are ``(PSNR, seconds)``."""
    return [
        image,
        f"{sigma}",
        f"{ours[0] - reference[0]:+.2f} >= {psnr_target:+.2f}",
        f"{ours[1] / reference[1]:.2f} <= {time_target}",
    ]


def print_image_results(rows, targets, title):
    """An image section's two tables (every method's PSNR and seconds, then
    the targets), and the load at the end."""
    print_table("PSNR (dB) and seconds, one run", ["image", "sigma", "method", "PSNR", "s"], rows)
    print_table(title, ["image", "sigma", "PSNR difference", "time ratio"], targets)
    print(f"load average at the end: {os.getloadavg()}")
