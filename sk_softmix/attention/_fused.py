"""torch's fused attention kernel, called the way it is fastest.

``torch.nn.functional.scaled_dot_product_attention`` has fused kernels (flash
attention on the CPU, the memory-efficient kernel on CUDA) that compute
``softmax(q k^T) v`` block by block and never write the ``(n, L)`` scores.
They are fastest on contiguous 4-D inputs with the heads batched and no mask:
a boolean mask, stride-0 3-D inputs or query chunks of a thousand rows made
the CPU kernel 3-8x slower (benchmarks/README.md, section 1).

The package needs two things the plain kernel does not give:

- **Leaving one token out** (a training query must not attend to its own copy
  in the prompt). Instead of a mask, the CPU kernel's log-sum-exp gives each
  query's weight on its own token, ``a_j = exp(s_j - lse)``, and removing
  that token is ``(out - a_j v_j) / (1 - a_j)``. The division loses the
  precision of ``1 - a_j``, so rows where ``a_j > 1/2`` are reported back for
  an exact recomputation; elsewhere the error is at most twice the kernel's.
- **The weighted covariance** (the Jacobian of the average). Values
  ``[z_i, z_i z_i^T]`` give the first two moments in one pass; the queries
  and keys are padded with zero columns to the values' width, which the
  kernel requires and which leaves every score unchanged.

The same zero columns make the CPU kernel faster where its head size is
small: in float32 it ran 1.3-1.6x faster on 16 columns than on 2 to 15
(``_fastest_width``), so narrow inputs are padded to 16.
"""

import torch
import torch.nn.functional as F

# A query whose own token holds more than this share of its weight is
# recomputed exactly: the removal divides by 1 - a_j <= 1/2 at worst.
_LARGEST_REMOVABLE_WEIGHT = 0.5


# CUDA's memory-efficient kernel takes these dtypes and head sizes; outside
# them SDPA falls back to its unfused math path, which would hold every
# (n, L) score of the call at once.
_CUDA_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_CUDA_MAX_WIDTH = 256

# The CPU flash kernel with its log-sum-exp, an ATen operator since torch 2.2
# (the oldest torch the package supports); without it the matmul path runs.
_CPU_KERNEL_EXISTS = hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")

# The CPU kernel in float32 on 2 threads, n = 1,000 queries over L = 10,000
# tokens (torch 2.13, AVX-512 AMD EPYC): 9.2-12 ms for head sizes 2 to 15,
# 6.4 ms for 16, 7.9-9.8 ms for 17 to 32; the same order at n = 100 to
# 10,000 and L = 10^5, and on one thread. Padding copies the prompt once per
# call, 16 floats a token, which the saving (about 0.3 ns a score) repays
# from some 50 queries on.
_CPU_FAST_WIDTH = 16
_CPU_PADDING_MIN_QUERIES = 256
# The padded prompt copy stays within one chunk of the matmul kernel's scores
# (2**24 floats, 64 MiB in float32): prompts beyond 2**20 tokens keep their width.
_CPU_PADDED_PROMPT_MAX_ENTRIES = 2**24
# Padded queries per kernel call (per head): 1 MiB of padded float32 queries
# and as much output, whatever the number of queries; at n = 10,000 chunks
# of 2,000 already ran within 3% of one call.
_PADDED_QUERIES_PER_CALL = 16_384


def fused_kernel_available(
    device: torch.device, leave_one_out: bool, dtype=torch.float32, width: int = 0
) -> bool:
    """Whether :func:`fused_average` runs on ``device`` for values ``width`` wide.

    CUDA's kernels return no log-sum-exp through a public call, so leaving a
    token out there goes through the chunked matmul path instead, as do
    float64 and wide values.
    """
    if device.type == "cpu":
        return _CPU_KERNEL_EXISTS
    return (
        device.type == "cuda"
        and not leave_one_out
        and dtype in _CUDA_DTYPES
        and width <= _CUDA_MAX_WIDTH
    )


def fused_average(transformed, keys, values=None, exclude=None, centre=None):
    """Softmax-weighted average of ``values`` with weights ``softmax_i(k_i . t)``.

    Parameters
    ----------
    transformed : Tensor of shape (H, n, p)
        ``U_h z`` per head and query; ``n >= 1``.
    keys : Tensor of shape (L, p)
        The prompt tokens.
    values : Tensor of shape (L, w), default=None
        What is averaged; ``None`` means the keys. Other values must begin
        with the ``p`` columns ``keys - centre``.
    exclude : Tensor of shape (n,), default=None
        A token index per query to leave out, ``-1`` for none.
    centre : Tensor of shape (p,), default=None
        What ``values`` subtract from the keys in their first columns.

    Returns
    -------
    average : Tensor of shape (H, n, w)
    unstable : Tensor of shape (n,), dtype bool, or None
        Queries whose left-out token held more than half of their weight in
        some head: their ``average`` rows are not exact and must be
        recomputed. ``None`` without ``exclude``.
    """
    n_heads, n_queries, p = transformed.shape
    values = keys if values is None else values
    width = values.shape[-1]
    if n_queries == 0:  # the CPU kernel dies on an empty query block (SIGFPE)
        empty = transformed.new_zeros((n_heads, 0, width))
        return empty, None if exclude is None else exclude.new_zeros(0, dtype=torch.bool)
    on_cuda = transformed.device.type == "cuda"
    # The kernels take one head size for queries, keys and values. Zero
    # columns pad to it: the scores stay those of the first p columns, the
    # extra outputs are 0.
    size = _fastest_width(
        width, transformed.device, transformed.dtype, n_heads * n_queries, keys.shape[0]
    )
    grid = (1, n_heads, keys.shape[0], size)
    keys_padded = _zero_columns_to(keys, size)
    values_padded = keys_padded if values is keys else _zero_columns_to(values, size)
    if on_cuda:
        average = F.scaled_dot_product_attention(
            _zero_columns_to(transformed, size).unsqueeze(0).contiguous(),
            keys_padded.expand(grid).contiguous(),
            values_padded.expand(grid).contiguous(),
            scale=1.0,
        )
        return average[0, ..., :width], None

    def flash(queries):  # (H, m, p) -> average (H, m, w), log-sum-exp (H, m)
        average, log_total = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            _zero_columns_to(queries, size).unsqueeze(0).contiguous(),
            keys_padded.expand(grid),
            values_padded.expand(grid),
            0.0,  # dropout
            False,  # causal
            scale=1.0,  # no 1/sqrt(p) temperature: U carries the scale
        )
        return average[0, ..., :width], log_total[0]

    if size == width:
        average, log_total = flash(transformed)
    else:
        # Padded queries and their padded outputs would add O(n) memory beyond
        # the result: they go in chunks, each output cut to its width and
        # copied into the result at once (holding the cut chunks in a list let
        # the C allocator keep every chunk's freed buffers: 1.3 MiB a chunk).
        average = transformed.new_empty((n_heads, n_queries, width))
        log_total = transformed.new_empty((n_heads, n_queries))
        for start in range(0, n_queries, _PADDED_QUERIES_PER_CALL):
            rows = slice(start, start + _PADDED_QUERIES_PER_CALL)
            average[:, rows], log_total[:, rows] = flash(transformed[:, rows])
    if exclude is None:
        return average, None
    if torch.is_grad_enabled() and transformed.requires_grad:
        # The kernel's log-sum-exp carries no gradient; d lse / d t is the
        # weighted mean of the keys: the average's first p columns.
        key_mean = average[..., :p].detach()
        if centre is not None:
            key_mean = key_mean + centre
        log_total = log_total.detach() + ((transformed - transformed.detach()) * key_mean).sum(-1)
    left_out = exclude >= 0
    token = exclude.clamp(min=0)
    own_score = (transformed * keys[token]).sum(-1)  # (H, n): s_j = z_j . U z
    own_weight = torch.exp(own_score - log_total) * left_out  # (H, n): a_j, 0 if none
    # clamp only matters for unstable rows, which the caller replaces
    kept = (1 - own_weight).clamp(min=1 - _LARGEST_REMOVABLE_WEIGHT).unsqueeze(-1)
    average = (average - own_weight.unsqueeze(-1) * values[token]) / kept
    unstable = (own_weight > _LARGEST_REMOVABLE_WEIGHT).any(dim=0)
    return average, unstable


def _fastest_width(width, device, dtype, n_queries, prompt_length=0):
    """The head size to pad ``width`` columns to: a multiple of 8 on CUDA
    (which its memory-efficient kernel wants), 16 for narrow float32 inputs
    of enough queries and a prompt of at most 2**20 tokens on the CPU (see
    ``_CPU_FAST_WIDTH``), else ``width``."""
    if device.type == "cuda":
        return -(-width // 8) * 8
    if (
        dtype == torch.float32
        and 1 < width < _CPU_FAST_WIDTH
        and n_queries >= _CPU_PADDING_MIN_QUERIES
        and prompt_length * _CPU_FAST_WIDTH <= _CPU_PADDED_PROMPT_MAX_ENTRIES
    ):
        return _CPU_FAST_WIDTH
    return width


def _zero_columns_to(tensor, size):
    """``tensor`` widened to ``size`` columns with zeros; itself, uncopied, if
    already that wide (a prompt at its own width is not copied per call)."""
    extra = size - tensor.shape[-1]
    return F.pad(tensor, (0, extra)) if extra else tensor
