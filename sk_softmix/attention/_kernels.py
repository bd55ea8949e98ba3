"""The softmax-attention average, fast: the same ``sum_i softmax_i(z_i . t) v_i``
as ``_reference.softmax_average``, computed without holding all
``(H, n, L)`` weights at once.

- ``_sdpa_mean``: torch's fused kernel (``_fused``), no scores at all;
- ``_matmul_mean``: scores in chunks of queries, exponentiated in place in
  one reused buffer;
- ``_ClosedFormMean``: for ``p <= 8``, a backward pass from the attention-
  weighted covariance (the Jacobian of the average) instead of stored weights.

``_kernel_name`` is the rule that picks among them; ``_softmax.attention_mean``
is the one place that applies it.
"""

import torch

from ._fused import fused_average, fused_kernel_available
from ._reference import (
    _largest_magnitude,
    _may_overflow,
    _scores,
    _Workspace,
    softmax_average,
    softmax_weights,
)

# Above this many features the closed-form backward (which carries the
# p x p attention-weighted covariance through the forward pass) costs more than
# letting autograd store the attention weights.
CLOSED_FORM_MAX_FEATURES = 8


# Default query chunk: about 2**24 score entries (64 MiB in float32) at a time.
_DEFAULT_CHUNK_ENTRIES = 2**24


def queries_per_chunk(batch_size, n_heads, prompt_length):
    """``batch_size``, or the queries whose scores fill about 2**24 entries.

    With ``batch_size=None`` a chunk holds ``n_heads * chunk * prompt_length``
    scores of at most ``_DEFAULT_CHUNK_ENTRIES`` (64 MiB in float32),
    whatever the prompt's length.
    """
    if batch_size is not None:
        return max(1, int(batch_size))
    return max(1, _DEFAULT_CHUNK_ENTRIES // (n_heads * prompt_length))


def _matmul_mean(transformed, prompt, exclude, batch_size=None):
    """Queries in chunks of about 2**24 scores (or ``batch_size``).

    Without gradients each chunk's scores are exponentiated in place in one
    reused buffer; with them, small ``p`` uses the closed-form backward and
    larger ``p`` lets autograd store the weights.
    """
    step = queries_per_chunk(batch_size, transformed.shape[0], prompt.shape[0])
    # Every chunk writes its scores into the same buffer: a fresh (H, step, L)
    # block per chunk let glibc keep the freed ones resident (its mmap
    # threshold rises after the first free), so memory grew with the number of
    # queries instead of staying one chunk.
    workspace = _Workspace(prompt)
    needs_grad = _needs_grad(transformed, prompt)
    means = []
    for start in range(0, transformed.shape[1], step):
        chunk = transformed[:, start : start + step]
        chunk_exclude = None if exclude is None else exclude[start : start + step]
        if not needs_grad:
            with torch.no_grad():
                means.append(
                    _weighted_moments(
                        chunk, prompt, chunk_exclude, second=False, workspace=workspace
                    )[0]
                )
        elif prompt.requires_grad or prompt.shape[-1] > CLOSED_FORM_MAX_FEATURES:
            means.append(softmax_average(chunk, prompt, chunk_exclude))
        else:
            means.append(_ClosedFormMean.apply(chunk, prompt, chunk_exclude, False))
    return torch.cat(means, dim=1)


def _sdpa_mean(transformed, prompt, exclude, batch_size=None):
    """torch's fused kernel (see ``_fused``): no scores block at all.

    Queries whose left-out token dominates their weights are redone by the
    matmul kernel, exactly.
    """
    if _needs_grad(transformed, prompt) and prompt.shape[-1] <= CLOSED_FORM_MAX_FEATURES:
        return _ClosedFormMean.apply(transformed, prompt, exclude, True)
    mean, unstable = fused_average(transformed, prompt, exclude=exclude)
    return _redo_rows(
        mean,
        unstable,
        lambda rows: _matmul_mean(transformed[:, rows], prompt, exclude[rows], batch_size),
    )


def _kernel_name(method, transformed, prompt, exclude):
    """The one place that picks a kernel.

    ``"auto"`` and ``"sdpa"`` take the fused kernel wherever it gives the
    exact answer: a CPU or CUDA device (leave-one-out on the CPU only), a
    prompt that needs no gradient, and scores that cannot overflow the dtype
    (checked without gradients only: the estimators train on data scaled to
    unit RMS, and the check is a host sync). Elsewhere ``"matmul"``.
    """
    if method in ("reference", "matmul"):
        return method
    p = transformed.shape[-1]
    if (
        _needs_grad(transformed, prompt)
        and p > CLOSED_FORM_MAX_FEATURES
        and (transformed.device.type == "cpu")
    ):
        # On the CPU the fused backward (which recomputes the weights block by
        # block) lost to autograd through stored weights in the training
        # batch's chunks of 256 queries: it took 1.2-1.9x as long at p = 12-74,
        # L = 1,500-20,000 (the classifier's L-BFGS fit on C2: 4.5 s, not 2.9 s).
        return "matmul"
    fused = (
        fused_kernel_available(transformed.device, exclude is not None, transformed.dtype, p)
        and not prompt.requires_grad
        and (
            _needs_grad(transformed, prompt)
            # |z_i . t| <= p max|z_i| max|t|: looser than Cauchy-Schwarz, cheaper
            or not _may_overflow(
                _largest_magnitude(transformed) * transformed.shape[-1],
                _largest_magnitude(prompt),
                transformed.dtype,
            )
        )
    )
    return "sdpa" if fused else "matmul"


def _needs_grad(transformed, prompt):
    """Whether the caller will differentiate: the one definition every kernel uses."""
    return torch.is_grad_enabled() and (transformed.requires_grad or prompt.requires_grad)


def _redo_rows(result, unstable, recompute):
    """``result`` with the rows flagged ``unstable`` (on axis 1) replaced by ``recompute(rows)``."""
    if unstable is None or not bool(unstable.any()):
        return result
    rows = unstable.nonzero().squeeze(1)
    return result.index_copy(1, rows, recompute(rows).to(result.dtype))


def _moments(transformed, prompt, exclude, *, fused, training=None):
    """Attention-weighted mean and covariance, by the fused kernel or by matmul;
    differentiable with respect to ``transformed`` when it requires grad."""
    if not fused:
        if not _needs_grad(transformed, prompt):
            with torch.no_grad():
                return _weighted_moments(
                    transformed, prompt, exclude, second=True, training=training
                )
        weights = softmax_weights(transformed, prompt, exclude)  # (H, n, L)
        return _mean_and_covariance(weights, 1.0, prompt, transformed.dtype)
    centre, values = _moment_values(prompt, transformed.dtype)
    moments, unstable = fused_average(transformed, prompt, values, exclude, centre)

    def exact_rows(rows):  # the same averages under weights computed exactly
        return softmax_average(
            transformed[:, rows], prompt, exclude[rows], values, training=training
        ).to(moments.dtype)

    moments = _redo_rows(moments, unstable, exact_rows)
    return _mean_and_covariance_of(moments, centre, transformed.dtype)


class _ClosedFormMean(torch.autograd.Function):
    """Softmax-weighted mean whose backward is ``Cov_a @ grad``: no weights stored."""

    @staticmethod
    def forward(ctx, transformed, prompt, exclude, fused):
        # grad mode is off in here, but this is a training step (see _scores)
        mean, covariance = _moments(transformed, prompt, exclude, fused=fused, training=True)
        ctx.save_for_backward(covariance)
        return mean

    @staticmethod
    def backward(ctx, grad_mean):
        (covariance,) = ctx.saved_tensors
        # (H, n, p, p) @ (H, n, p, 1): the covariance is symmetric, so J^T g = J g
        return (covariance @ grad_mean.unsqueeze(-1)).squeeze(-1), None, None, None


def _weighted_moments(transformed, prompt, exclude, *, second, workspace=None, training=None):
    """Softmax weights exponentiated in place, then one matmul for the moments."""
    scores = _scores(transformed, prompt, exclude, workspace, training)  # (H, n, L)
    scores -= scores.amax(dim=-1, keepdim=True)
    weights = scores.exp_()  # unnormalised, in (0, 1]
    total = weights.sum(dim=-1, keepdim=True)  # (H, n, 1), >= 1
    if not second:
        mean = (weights @ prompt.to(weights.dtype)) / total  # (H, n, L) @ (L, p) -> (H, n, p)
        return mean.to(transformed.dtype), None
    return _mean_and_covariance(weights, total, prompt, transformed.dtype)


def _mean_and_covariance(weights, total, prompt, dtype):
    """Mean and covariance of the prompt under the weights ``weights / total``."""
    centre, values = _moment_values(prompt, weights.dtype)
    return _mean_and_covariance_of((weights @ values) / total, centre, dtype)


def _moment_values(prompt, dtype):
    """The prompt's centre ``c`` and, per token, ``[z - c, (z - c)(z - c)^T]``
    flattened, (L, p + p^2) in ``dtype``. Averaged under attention weights
    they give the first two moments about ``c``, so the covariance does not
    suffer cancellation when the data sit far from the origin."""
    centre = prompt.mean(dim=0)
    centred = (prompt - centre).to(dtype)
    p = prompt.shape[-1]
    products = (centred.unsqueeze(-1) * centred.unsqueeze(-2)).reshape(-1, p * p)
    return centre, torch.cat([centred, products], dim=-1)


def _mean_and_covariance_of(moments, centre, dtype):
    """Mean and covariance from the averaged ``_moment_values``, (H, n, p + p^2)."""
    p = centre.shape[-1]
    mean = moments[..., :p]
    covariance = moments[..., p:].unflatten(-1, (p, p)) - mean.unsqueeze(-1) * mean.unsqueeze(-2)
    return mean.to(dtype) + centre.to(dtype), covariance.to(dtype)
