"""Fit time, transform throughput and transform memory of the attention denoisers.

Every number is printed next to a reference measured in the same run:

- fit: seconds for the paper's Figure 2 task with default settings (20,000
  noisy points with clean targets), next to GaussianMixtureDenoiser's fit;
- transform: queries per second for 20,000 queries over a 20,000-token prompt,
  next to ``torch.nn.functional.scaled_dot_product_attention`` on the same
  shapes (2 heads, head dimension 2, no 1/sqrt(p) scale);
- memory: peak resident memory added by transform, measured in a fresh
  subprocess, for growing numbers of queries (it should not grow).

Usage: ``python benchmarks/bench_denoisers.py [--quick]``.
"""

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

from sk_softmix import GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture

MEANS = np.array([[3.0, 0.0], [0.0, 3.0]])
TASK = {"means": MEANS, "covariance": 1.0, "noise_variance": 4.0}


def best_of(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def fit_times(n_samples):
    Z, X, _ = make_gaussian_mixture(n_samples, **TASK, random_state=0)
    softmax = best_of(lambda: SoftmaxAttentionDenoiser(random_state=0).fit(Z, X), 1)
    mixture = best_of(lambda: GaussianMixtureDenoiser(noise_variance=4.0, random_state=0).fit(Z), 3)
    return softmax, mixture


def transform_throughput(n_queries, prompt_length, dtype, repeats):
    Z, X, _ = make_gaussian_mixture(prompt_length, **TASK, random_state=0)
    queries, _, _ = make_gaussian_mixture(n_queries, **TASK, random_state=1)
    denoiser = SoftmaxAttentionDenoiser(
        max_iter=0, noise_variance=4.0, device="cpu", random_state=0
    ).fit(Z)
    queries = queries.astype(dtype)
    ours = best_of(lambda: denoiser.transform(queries), repeats)

    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    prompt = torch.tensor(Z, dtype=torch_dtype).expand(2, prompt_length, 2)
    transformed = torch.tensor(queries, dtype=torch_dtype).expand(2, n_queries, 2)

    def sdpa():
        for start in range(0, n_queries, denoiser.batch_size):
            F.scaled_dot_product_attention(
                transformed[:, start : start + denoiser.batch_size],
                prompt,
                prompt,
                scale=1.0,
            )

    reference = best_of(sdpa, repeats)
    return n_queries / ours, n_queries / reference


# The probe loads a fitted model (small) and its queries, then samples its own
# resident memory every millisecond while transform runs: the peak minus the
# level just before is what transform added. (The getrusage high-water mark
# cannot be used: importing torch already raised it above any transform.)
MEMORY_PROBE = """
import os, pickle, sys, threading, time
import numpy as np
page = os.sysconf("SC_PAGE_SIZE")
def resident():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * page
denoiser = pickle.load(open(sys.argv[1], "rb"))
queries = np.random.default_rng(1).normal(size=(int(sys.argv[2]), 2)) * 3
denoiser.transform(queries[:1])  # load kernels and thread pools first
peak, running = [resident()], [True]
def sample():
    while running[0]:
        peak[0] = max(peak[0], resident())
        time.sleep(0.001)
before = resident()
sampler = threading.Thread(target=sample)
sampler.start()
denoiser.transform(queries)
running[0] = False
sampler.join()
print((peak[0] - before) / 2**20)
"""


def transform_peak_memory_mib(model_path, n_queries):
    output = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, model_path, str(n_queries)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(output.stdout.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    n = 5_000 if args.quick else 20_000
    repeats = 1 if args.quick else 3
    results = {"threads": torch.get_num_threads(), "n": n}

    softmax_fit, mixture_fit = fit_times(n)
    results["fit"] = {"softmax_s": softmax_fit, "gmm_s": mixture_fit}
    print(f"torch threads: {results['threads']}; Figure 2 task, n = {n}")
    print()
    print("| fit (default settings) | seconds | ratio to GaussianMixtureDenoiser |")
    print("|---|---:|---:|")
    print(f"| SoftmaxAttentionDenoiser | {softmax_fit:.2f} | {softmax_fit / mixture_fit:.1f} |")
    print(f"| GaussianMixtureDenoiser | {mixture_fit:.2f} | 1.0 |")
    print()

    print(
        f"| transform, {n} queries x {n}-token prompt, 2 heads | queries/s | sdpa queries/s "
        "| ours / sdpa |"
    )
    print("|---|---:|---:|---:|")
    results["transform"] = {}
    for dtype in (np.float32, np.float64):
        ours, sdpa = transform_throughput(n, n, dtype, repeats)
        results["transform"][dtype.__name__] = {"ours": ours, "sdpa": sdpa}
        print(f"| {dtype.__name__} | {ours:,.0f} | {sdpa:,.0f} | {ours / sdpa:.2f} |")
    print()

    sizes = [2_000, 8_000, 32_000] if args.quick else [5_000, 20_000, 80_000]
    print(
        "| transform peak extra memory (prompt 20,000, batch_size 256) | MiB | ratio to smallest |"
    )
    print("|---|---:|---:|")
    Z, _, _ = make_gaussian_mixture(20_000, **TASK, random_state=0)
    denoiser = SoftmaxAttentionDenoiser(
        max_iter=0, noise_variance=4.0, device="cpu", random_state=0
    ).fit(Z)
    with tempfile.TemporaryDirectory() as folder:
        model_path = os.path.join(folder, "denoiser.pkl")
        with open(model_path, "wb") as handle:
            pickle.dump(denoiser, handle)
        memory = {size: transform_peak_memory_mib(model_path, size) for size in sizes}
    results["memory_mib"] = memory
    for size, mib in memory.items():
        print(f"| {size:,} queries | {mib:.1f} | {mib / max(memory[sizes[0]], 1e-3):.2f} |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
