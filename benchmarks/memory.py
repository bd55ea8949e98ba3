"""Section 2, memory: peak resident memory that ``transform`` adds, per query count.

Each measurement runs in a fresh subprocess: it loads a fitted denoiser and a
prompt of L float32 tokens, draws its queries, warms the kernels up, then
samples its own resident set size (``/proc/self/statm``) every millisecond
while ``transform(queries, prompt=P)`` runs; the peak minus the level just
before is what transform added. The ``ru_maxrss`` high-water mark's
difference is also recorded, but it has read 0 even where sampling saw
hundreds of MiB added, so sampling is the measure.

The bound is one chunk of scores, ``n_heads x chunk x L x 4`` bytes (``chunk``
queries: ``transform_batch_size``, by default about ``2**24 / (n_heads L)``),
plus ``O(L p)`` for copies of the prompt and ``O(n p)`` for the queries and
the output: per-head outputs, their concatenation, the combined heads and a
tensor view of the input, counted as ``IO_COPIES`` float32 copies of
``n x p``. Only the ``O(n p)`` term may grow with the query count.
"""

import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
from common import PEAK_SAMPLER_SOURCE, print_table

from sk_softmix import LinearAttentionDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.attention import queries_per_chunk
from sk_softmix.datasets import make_gaussian_mixture

IO_COPIES = 6

PROBE = (
    PEAK_SAMPLER_SOURCE
    + """
import pickle, resource, sys
import numpy as np
denoiser = pickle.load(open(sys.argv[1], "rb"))
prompt = np.load(sys.argv[2])
n, p = int(sys.argv[3]), prompt.shape[1]
queries = (np.random.default_rng(1).normal(size=(n, p)) * 3).astype(np.float32)
denoiser.transform(queries[:300], prompt=prompt)  # kernels and thread pools first
maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
_, peak = peak_extra_mib(lambda: denoiser.transform(queries, prompt=prompt))
maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(peak, (maxrss_after - maxrss_before) / 2**10)
"""
)


def _probe(model_path, prompt_path, n_queries, fixed_mmap_threshold=False):
    env = dict(os.environ)
    if fixed_mmap_threshold:
        # glibc otherwise raises its mmap threshold (up to 32 MiB) after freeing
        # a large block, so later score chunks come from the heap and freed ones
        # stay resident; a fixed threshold returns each chunk to the system
        env["MALLOC_MMAP_THRESHOLD_"] = str(2**20)
    output = subprocess.run(
        [sys.executable, "-c", PROBE, model_path, prompt_path, str(n_queries)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    sampled, maxrss = output.stdout.split()
    return float(sampled), float(maxrss)


def run(quick, device):
    """Peak extra MiB of each transform for growing query counts (CPU resident memory)."""
    prompt_length = 20_000 if quick else 100_000
    sizes = [1_000, 4_000, 16_000] if quick else [10_000, 40_000, 160_000]
    p = 2
    means = np.array([[3.0, 0.0], [0.0, 3.0]])
    Z, _, _ = make_gaussian_mixture(2_000, means, noise_variance=4.0, random_state=0)
    prompt, _, _ = make_gaussian_mixture(prompt_length, means, noise_variance=4.0, random_state=1)
    common = {"max_iter": 0, "noise_variance": 4.0, "device": "cpu", "random_state": 0}
    estimators = {
        "softmax H=1": SoftmaxAttentionDenoiser(n_heads=1, **common),
        "softmax H=2": SoftmaxAttentionDenoiser(n_heads=2, **common),
        "linear H=1": LinearAttentionDenoiser(n_heads=1, **common),
    }
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        prompt_path = os.path.join(folder, "prompt.npy")
        np.save(prompt_path, prompt.astype(np.float32))
        for name, estimator in estimators.items():
            model_path = os.path.join(folder, "model.pkl")
            with open(model_path, "wb") as handle:
                pickle.dump(estimator.fit(Z), handle)
            heads = estimator.n_heads if name.startswith("softmax") else 0
            chunk = queries_per_chunk(estimator.transform_batch_size, max(heads, 1), prompt_length)
            scores = heads * chunk * prompt_length * 4
            bound = (scores + 4 * prompt_length * p * 4) / 2**20
            for size in sizes:
                sampled, maxrss = _probe(model_path, prompt_path, size)
                fixed = None
                if heads:
                    fixed = _probe(model_path, prompt_path, size, fixed_mmap_threshold=True)[0]
                output = IO_COPIES * size * p * 4 / 2**20
                rows.append(
                    {
                        "entry": name,
                        "n_queries": size,
                        "prompt_length": prompt_length,
                        "queries_per_chunk": chunk,
                        "peak_extra_mib": sampled,
                        "maxrss_delta_mib": maxrss,
                        "peak_extra_mib_fixed_mmap_threshold": fixed,
                        "bound_mib": bound + output,
                    }
                )
    first = {}
    for row in rows:
        first.setdefault(row["entry"], max(row["peak_extra_mib"], 1e-3))
        row["ratio_to_smallest_n"] = row["peak_extra_mib"] / first[row["entry"]]
        fixed = row["peak_extra_mib_fixed_mmap_threshold"]
        row["within_bound"] = row["peak_extra_mib"] <= 1.1 * row["bound_mib"] + 2.0
        row["within_bound_fixed_mmap_threshold"] = (
            None if fixed is None else fixed <= 1.1 * row["bound_mib"] + 2.0
        )
    print_table(
        f"2. transform peak extra memory (CPU, float32, prompt {prompt_length:,} tokens)",
        [
            "entry",
            "n_queries",
            "peak extra MiB",
            "ratio to smallest n",
            "MiB, MALLOC_MMAP_THRESHOLD_=1MiB",
            "bound MiB",
            "ru_maxrss delta MiB",
        ],
        [
            [
                r["entry"],
                r["n_queries"],
                r["peak_extra_mib"],
                r["ratio_to_smallest_n"],
                r["peak_extra_mib_fixed_mmap_threshold"],
                r["bound_mib"],
                r["maxrss_delta_mib"],
            ]
            for r in rows
        ],
    )
    if str(device).startswith("cuda"):
        print("(memory is measured on the CPU path; GPU memory is not measured here)")
    return {"rows": rows}
