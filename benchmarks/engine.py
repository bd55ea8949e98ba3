"""Section 1, engine throughput: ``transform`` next to SDPA and a dense matmul.

For each shape (n queries, a prompt of L tokens, p features) it times
``transform(queries, prompt=P)`` of SoftmaxAttentionDenoiser (1 and 2 heads)
and LinearAttentionDenoiser, the engine function
:func:`sk_softmix.attention.softmax_attention` (1 and 2 heads, and 1 head on
the ``"matmul"`` kernel, the CPU default before the fused one), and
``torch.nn.functional.scaled_dot_product_attention`` on the same shapes,
called at its best (contiguous 4-D queries (1, H, n, p) and keys = values
(1, H, L, p), no mask, ``scale=1.0``: the package's head has no 1/sqrt(p)
temperature; the whole block or chunks of 16,384 queries, whichever is
faster). Effective GFLOP/s count ``4 n L p`` per head
(``Q K^T`` and ``A V``) for every entry, the linear head included (its real
cost is ``O((n + L) p^2)``, so its "effective" rate is the speed-up its
algebra buys). The matmul reference is a square float32 product of the same
FLOP count (side capped at 4,096), i.e. the machine's dense rate.
"""

import numpy as np
import torch
import torch.nn.functional as F
from common import best_of, print_table

from sk_softmix import LinearAttentionDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.attention import softmax_attention
from sk_softmix.datasets import make_gaussian_mixture

QUICK_SHAPES = [
    (1_000, 10_000, 2),
    (1_000, 10_000, 16),
    (1_000, 10_000, 64),
    (10_000, 10_000, 2),
]
FULL_SHAPES = [
    (n, L, p)
    for n in (1_000, 10_000, 100_000)
    for L in (10_000, 100_000, 1_000_000)
    for p in (2, 16, 64)
]
# The shape timed on both devices with --device cuda (the CUDA speed-up target);
# it is in both grids.
CROSS_DEVICE_SHAPE = (10_000, 10_000, 2)
# Queries of every entry's untimed first call: the CPU flash kernel switches to
# larger query blocks (and buffers) from 768 queries on, so 64 did not warm it.
WARM_UP = 1_024
SDPA_CHUNK = 16_384  # the baseline also tries query chunks of this size, keeping the faster


def _task(p):
    """A two-component mixture in p dimensions, like Figure 2's: means 3 e1, 3 e2."""
    means = np.zeros((2, p))
    means[0, 0], means[1, 1] = 3.0, 3.0
    return means


def _fitted(estimator, p):
    """A denoiser fitted (closed-form start, no training) on a small sample."""
    Z, _, _ = make_gaussian_mixture(
        2_000, _task(p), covariance=1.0, noise_variance=4.0, random_state=0
    )
    return estimator.fit(Z)


def _inputs(n, L, p):
    means = _task(p)
    prompt, _, _ = make_gaussian_mixture(L, means, noise_variance=4.0, random_state=1)
    queries, _, _ = make_gaussian_mixture(n, means, noise_variance=4.0, random_state=2)
    return queries.astype(np.float32), prompt.astype(np.float32)


def _matmul_gflops(flops, device, repeats):
    side = int(min(4_096, max(64, round((flops / 2) ** (1 / 3)))))
    a = torch.randn(side, side, device=device)
    b = torch.randn(side, side, device=device)
    seconds = best_of(lambda: a @ b, repeats, device)
    return 2 * side**3 / seconds / 1e9


def _sdpa_call(queries, prompt, n_heads):
    """The fused kernel at its best: ``F.scaled_dot_product_attention`` on
    contiguous 4-D tensors, queries ``(1, H, n, p)`` and keys = values
    ``(1, H, L, p)``, no mask, ``scale=1.0``; the whole query block in one
    call, or chunks of ``SDPA_CHUNK`` queries, whichever is faster (both are
    timed when there is more than one chunk)."""
    heads_q = queries.expand(n_heads, *queries.shape).unsqueeze(0).contiguous()
    keys = prompt.expand(n_heads, *prompt.shape).unsqueeze(0).contiguous()

    def whole():
        F.scaled_dot_product_attention(heads_q, keys, keys, scale=1.0)

    def chunked():
        for start in range(0, queries.shape[0], SDPA_CHUNK):
            F.scaled_dot_product_attention(
                heads_q[:, :, start : start + SDPA_CHUNK], keys, keys, scale=1.0
            )

    return [whole, chunked] if queries.shape[0] > SDPA_CHUNK else [whole]


def _rounds(n, L):
    """Timing rounds: every entry once per round, interleaved, best kept
    (15 for calls of about 10 ms, whose spread on a shared machine is 10%)."""
    return 15 if n * L <= 10_000_000 else 3 if n * L <= 1_000_000_000 else 1


def measure_shape(n, L, p, device):
    """Seconds and effective GFLOP/s of every entry for one shape.

    Entries are timed in interleaved rounds (each entry once per round, the
    best of the rounds kept), so that a slow spell of a shared machine hits
    an entry and its reference alike.
    """
    queries, prompt = _inputs(n, L, p)
    flops_per_head = 4.0 * n * L * p
    q_t = torch.from_numpy(queries).to(device)
    p_t = torch.from_numpy(prompt).to(device)
    estimators = {
        name: _fitted(
            kind(n_heads=heads, max_iter=0, noise_variance=4.0, device=device, random_state=0), p
        )
        for name, kind, heads in (
            ("softmax H=1", SoftmaxAttentionDenoiser, 1),
            ("softmax H=2", SoftmaxAttentionDenoiser, 2),
            ("linear H=1", LinearAttentionDenoiser, 1),
        )
    }
    entries = {}  # name -> (heads, [callables of which the fastest counts])
    for heads in (1, 2):
        entries[f"SDPA H={heads}"] = (heads, _sdpa_call(q_t, p_t, heads))
    # The same call as a second entry: its ratio to the first is what the
    # timing itself varies on this machine, the floor under every other ratio.
    entries["SDPA H=1 again"] = (1, _sdpa_call(q_t, p_t, 1))
    for name, estimator in estimators.items():
        heads = 2 if "H=2" in name else 1
        entries[name] = (heads, [lambda e=estimator: e.transform(queries, prompt=prompt)])
    # the engine function alone (no validation, no host copies), on its
    # default kernel and on the matmul kernel that was the CPU default before
    for heads in (1, 2):
        estimator = estimators[f"softmax H={heads}"]
        U = torch.as_tensor(estimator.U_, dtype=torch.float32, device=device)
        V = torch.as_tensor(estimator.V_, dtype=torch.float32, device=device)
        entries[f"softmax_attention() H={heads}"] = (
            heads,
            [lambda U=U, V=V: softmax_attention(q_t, p_t, U, V)],
        )
        if heads == 1:
            entries["matmul kernel H=1"] = (
                heads,
                [lambda U=U, V=V: softmax_attention(q_t, p_t, U, V, method="matmul")],
            )
            # issue 17's key norm -1/2 z_i^T U z_i (W = U), its per-token terms
            # computed in the call: one more token column for the kernel
            entries["key norm H=1"] = (
                heads,
                [lambda U=U, V=V: softmax_attention(q_t, p_t, U, V, key_norm=U)],
            )
    warm_q, warm_np = q_t[:WARM_UP], queries[:WARM_UP]
    with torch.no_grad():
        for heads in (1, 2):  # warm-ups: first calls allocate buffers and pools
            for call in _sdpa_call(warm_q, p_t, heads):
                call()
            softmax_attention(warm_q, p_t, *[torch.eye(p, device=device)] * 2)
        for estimator in estimators.values():
            estimator.transform(warm_np, prompt=prompt)
        best = {name: float("inf") for name in entries}
        for _ in range(_rounds(n, L)):
            for name, (_, calls) in entries.items():
                for call in calls:
                    best[name] = min(best[name], best_of(call, 1, device))
    matmul = _matmul_gflops(flops_per_head, device, 3)
    return [
        _row(name, n, L, p, heads, best[name], best[f"SDPA H={heads}"], matmul)
        for name, (heads, _) in entries.items()
    ]


def _row(name, n, L, p, heads, seconds, sdpa_seconds, matmul_gflops):
    gflops = 4.0 * n * L * p * heads / seconds / 1e9
    return {
        "entry": name,
        "n_queries": n,
        "prompt_length": L,
        "n_features": p,
        "n_heads": heads,
        "seconds": seconds,
        "gflops": gflops,
        "speed_vs_sdpa": sdpa_seconds / seconds,
        "fraction_of_matmul": gflops / matmul_gflops,
        "matmul_gflops": matmul_gflops,
    }


def run(quick, device, max_gflop=None):
    """Measure every shape of the grid; shapes above ``max_gflop`` (per head) are skipped."""
    shapes = QUICK_SHAPES if quick else FULL_SHAPES
    rows, skipped = [], []
    for n, L, p in shapes:
        if max_gflop is not None and 4.0 * n * L * p / 1e9 > max_gflop:
            skipped.append([n, L, p])
            continue
        rows.extend(measure_shape(n, L, p, device))
    print_table(
        f"1. Engine throughput ({device}, float32)",
        ["entry", "n", "L", "p", "seconds", "GFLOP/s", "speed / SDPA", "/ matmul rate"],
        [
            [
                r["entry"],
                r["n_queries"],
                r["prompt_length"],
                r["n_features"],
                r["seconds"],
                r["gflops"],
                r["speed_vs_sdpa"],
                r["fraction_of_matmul"],
            ]
            for r in rows
        ],
    )
    if skipped:
        print(f"skipped (over --max-gflop {max_gflop} per head): {skipped}")
    result = {"rows": rows, "skipped_shapes": skipped}
    if str(device).startswith("cuda"):
        result["cross_device"] = cross_device(device)
    return result


def cross_device(device):
    """transform seconds of the 2-head softmax denoiser on the CPU and on ``device``."""
    n, L, p = CROSS_DEVICE_SHAPE
    queries, prompt = _inputs(n, L, p)
    seconds = {}
    for where in ("cpu", device):
        estimator = _fitted(
            SoftmaxAttentionDenoiser(
                n_heads=2, max_iter=0, noise_variance=4.0, device=where, random_state=0
            ),
            p,
        )
        estimator.transform(queries[:64], prompt=prompt)
        seconds[where] = best_of(lambda e=estimator: e.transform(queries, prompt=prompt), 1, where)
    speedup = seconds["cpu"] / seconds[device]
    print(
        f"softmax H=2 transform, n={n:,} L={L:,} p={p}: cpu {seconds['cpu']:.3f} s, "
        f"{device} {seconds[device]:.4f} s, speed-up {speedup:.1f}x"
    )
    return {"shape": [n, L, p], "seconds": seconds, "speedup": speedup}
