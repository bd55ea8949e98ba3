"""Section 6, a huge prompt: 1e5 queries over 1e6 tokens on one machine.

The issue's scale target: ``SoftmaxAttentionDenoiser`` (2 heads, p = 2, the
default ``transform_batch_size``: about 2**24 scores per chunk) denoises
100,000 queries by attending over a prompt of 1,000,000 tokens. It runs in a
fresh subprocess that samples its resident set size while ``transform``
runs, so the peak extra memory can be set against the bound of one chunk of
scores plus the prompt. The reference, timed in the same subprocess, is the
same estimator on 10,000 queries over 10,000 tokens: the ratio of the two
throughputs (query-token pairs per second) shows whether the large shape
runs at the small one's speed.
``--quick`` scales the large shape down to 10,000 queries over 100,000 tokens.
"""

import os
import pickle
import subprocess
import sys
import tempfile

from common import FIGURE2, PEAK_SAMPLER_SOURCE, print_table

from sk_softmix import SoftmaxAttentionDenoiser
from sk_softmix.attention import queries_per_chunk
from sk_softmix.datasets import make_gaussian_mixture

REFERENCE = (10_000, 10_000)

PROBE = (
    PEAK_SAMPLER_SOURCE
    + """
import pickle, sys
import numpy as np
denoiser = pickle.load(open(sys.argv[1], "rb"))
means = np.array([[3.0, 0.0], [0.0, 3.0]], dtype=np.float32)
def draw(n, seed):
    rng = np.random.default_rng(seed)
    centres = means[rng.integers(2, size=n)]
    return (centres + rng.normal(size=(n, 2)) * np.sqrt(5.0)).astype(np.float32)
def pairs_per_second(n, L, repeats):
    queries, prompt = draw(n, 1), draw(L, 2)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        denoiser.transform(queries, prompt=prompt)
        best = min(best, time.perf_counter() - start)
    return n * L / best, best
n_ref, L_ref, n, L = (int(a) for a in sys.argv[2:6])
denoiser.transform(draw(300, 3), prompt=draw(1000, 4))  # kernels and thread pools first
reference_rate, reference_seconds = pairs_per_second(n_ref, L_ref, 3)
queries, prompt = draw(n, 5), draw(L, 6)
start = time.perf_counter()
out, peak = peak_extra_mib(lambda: denoiser.transform(queries, prompt=prompt), interval=0.005)
seconds = time.perf_counter() - start
print(reference_rate, reference_seconds, seconds, peak, int(np.isfinite(out).all()))
"""
)


def run(quick, device):
    """Time and peak extra memory of the large shape, next to the reference shape."""
    n, L = (10_000, 100_000) if quick else (100_000, 1_000_000)
    Z, _, _ = make_gaussian_mixture(2_000, **FIGURE2, random_state=0)
    estimator = SoftmaxAttentionDenoiser(
        n_heads=2, max_iter=0, noise_variance=4.0, device=device, random_state=0
    ).fit(Z)
    with tempfile.TemporaryDirectory() as folder:
        model_path = os.path.join(folder, "model.pkl")
        with open(model_path, "wb") as handle:
            pickle.dump(estimator, handle)
        output = subprocess.run(
            [sys.executable, "-c", PROBE, model_path, *map(str, (*REFERENCE, n, L))],
            capture_output=True,
            text=True,
            check=True,
        )
    reference_rate, reference_seconds, seconds, peak, finite = output.stdout.split()
    chunk = queries_per_chunk(estimator.transform_batch_size, estimator.n_heads, L)
    scores_mib = estimator.n_heads * chunk * L * 4 / 2**20
    # the prompt, its float32 copy and the input and output queries
    bound = scores_mib + (4 * L * 2 * 4 + 4 * n * 2 * 4) / 2**20
    row = {
        "n_queries": n,
        "prompt_length": L,
        "n_features": 2,
        "n_heads": estimator.n_heads,
        "queries_per_chunk": chunk,
        "seconds": float(seconds),
        "pairs_per_second": n * L / float(seconds),
        "reference_shape": list(REFERENCE),
        "reference_seconds": float(reference_seconds),
        "reference_pairs_per_second": float(reference_rate),
        "throughput_vs_reference": n * L / float(seconds) / float(reference_rate),
        "peak_extra_mib": float(peak),
        "bound_mib": bound,
        "finite": bool(int(finite)),
    }
    print_table(
        f"6. Large prompt: SoftmaxAttentionDenoiser (2 heads, p = 2) transform ({device})",
        [
            "n queries",
            "prompt tokens",
            "seconds",
            "pairs/s",
            f"pairs/s at {REFERENCE[0]:,} x {REFERENCE[1]:,}",
            "throughput / reference",
            "peak extra MiB",
            "bound MiB",
            "finite",
        ],
        [
            [
                n,
                L,
                row["seconds"],
                row["pairs_per_second"],
                row["reference_pairs_per_second"],
                row["throughput_vs_reference"],
                row["peak_extra_mib"],
                row["bound_mib"],
                "yes" if row["finite"] else "NO",
            ]
        ],
    )
    return {"rows": [row]}
