"""The attention average as the paper writes it (eq. 1), on every token.

``softmax_average`` forms every score ``z_i . (U z)``, their softmax over the
prompt and the weighted sum of the values: the reference that every faster
kernel (``_kernels``) is tested against, and the one that stores
the weights where autograd needs them. The rest of this module keeps the
scores finite: they are computed in float64 when their a-priori bound could
overflow the input dtype, and rescaled by powers of two beyond float64.
"""

import math

import torch


def softmax_average(transformed, prompt, exclude=None, values=None, training=None):
    """``sum_i softmax_i(z_i . t) v_i`` for every head and query, in one block.

    ``transformed`` is ``t = U_h z`` (H, n, p); ``values`` (L, w) default to
    the prompt tokens; a query's ``exclude`` token gets weight 0. Returns
    (H, n, w) in the dtype of ``transformed``.
    """
    values = prompt if values is None else values
    weights = softmax_weights(transformed, prompt, exclude, training=training)  # (H, n, L)
    return (weights @ values.to(weights.dtype)).to(transformed.dtype)


def softmax_weights(transformed, prompt, exclude=None, training=None):
    """``a_i = softmax_i(z_i . t)`` over the prompt, (H, n, L), overflow-safe."""
    return torch.softmax(_scores(transformed, prompt, exclude, training=training), dim=-1)


def _largest_magnitude(tensor):
    """``max |tensor|`` as a 0-d tensor, from its extremes: ``tensor.abs()``
    would allocate a prompt-sized temporary per call, which cost 0.1-0.2 ms
    a call (fresh pages) next to a 6 ms kernel."""
    if tensor.numel() == 0:
        return tensor.new_zeros(())
    smallest, largest = torch.aminmax(tensor)
    return torch.maximum(largest, -smallest)


def _may_overflow(transformed_norm_bound, prompt_norm_bound, dtype):
    """Whether a score ``z_i . (U z)`` can leave ``dtype``'s range (Cauchy-Schwarz)."""
    return bool(transformed_norm_bound * prompt_norm_bound > torch.finfo(dtype).max / 4)


def _scores(transformed, prompt, exclude, workspace=None, training=None):
    """Scores ``z_i . (U z)`` with excluded tokens at ``-inf``; (H, n, L).

    With a ``workspace`` the scores are written into its buffer, which the
    caller must not need again until it is done with these scores.
    """
    dtype = transformed.dtype
    # Not while training: the estimators train on data scaled to unit RMS, and
    # the check is a host sync (a GPU stall per step). The closed-form
    # backward's forward runs with grad mode off and says so itself.
    if training is None:
        training = torch.is_grad_enabled() and transformed.requires_grad
    # the workspace's prompt norm: an O(L) temporary per chunk fragments the heap
    prompt_norm = prompt.norm(dim=-1).amax() if workspace is None else workspace.prompt_norm
    if not training and _may_overflow(transformed.norm(dim=-1).amax(), prompt_norm, dtype):
        dtype = torch.float64  # overflow-prone magnitudes: score in double precision
        if _beyond_float64(transformed, prompt):
            return _far_scores(transformed, prompt, exclude)
    n_heads, n_queries, p = transformed.shape
    if workspace is None:
        scores = transformed.to(dtype) @ prompt.to(dtype).mT  # (H, n, p) @ (p, L) -> (H, n, L)
    else:
        scores = workspace.take((n_heads, n_queries, prompt.shape[0]), dtype, prompt.device)
        # one (H n, p) @ (p, L) product straight into the buffer
        torch.mm(
            transformed.to(dtype).reshape(-1, p),
            prompt.to(dtype).mT,
            out=scores.view(-1, prompt.shape[0]),
        )
    if exclude is not None:
        _exclude_in_place(scores, exclude)
    return scores


def _exclude_in_place(scores, exclude):
    """Set each query's excluded score to ``-inf`` (``exclude = -1``: none)."""
    # a gather and a scatter, no nonzero(): selecting rows on the host would
    # cost a GPU sync per chunk
    rows, columns = torch.arange(scores.shape[1], device=scores.device), exclude.clamp(min=0)
    kept = scores[:, rows, columns]
    scores[:, rows, columns] = torch.where(exclude >= 0, -math.inf, kept)


def _power_of_two_above(tensor) -> int:
    """The exponent ``e`` with ``max |tensor| < 2**e`` (0 for an empty or zero tensor)."""
    largest = float(tensor.abs().amax()) if tensor.numel() else 0.0
    if not math.isfinite(largest):
        raise ValueError(
            "softmax_attention: U z or the prompt overflows its dtype; the scores "
            "z_i^T U z cannot be formed. Rescale the inputs."
        )
    return math.frexp(largest)[1]


def _beyond_float64(transformed, prompt):
    """Whether a score ``z_i . (U z)`` can leave float64's range (max-norm bound)."""
    bound = _power_of_two_above(transformed) + _power_of_two_above(prompt)
    return bound + math.ceil(math.log2(prompt.shape[-1])) + 2 > 1023


def _far_scores(transformed, prompt, exclude):
    """Scores shifted to a maximum of 0 per query, for magnitudes past float64.

    Both factors are divided by powers of two (exact) so that the products
    fit, the row maximum is subtracted, and only then is the scale put back:
    the gaps may overflow to ``-inf`` (weight 0), the maximum stays 0, so the
    softmax of the result is that of the true scores.
    """
    exponent_t, exponent_p = _power_of_two_above(transformed), _power_of_two_above(prompt)
    scaled_t = transformed.to(torch.float64) * 2.0 ** -max(exponent_t, -1000)
    scaled_p = prompt.to(torch.float64) * 2.0 ** -max(exponent_p, -1000)
    scores = scaled_t @ scaled_p.mT  # (H, n, p) @ (p, L) -> (H, n, L), |.| <= p
    if exclude is not None:
        _exclude_in_place(scores, exclude)
    scores -= scores.amax(dim=-1, keepdim=True)
    exponent = max(exponent_t, -1000) + max(exponent_p, -1000)
    while exponent > 0:  # in steps float64 holds: 0 * finite stays 0
        step = min(exponent, 1000)
        scores *= 2.0**step
        exponent -= step
    return scores


class _Workspace:
    """What every chunk of one call over ``prompt`` reuses: a scores buffer
    (grown when too small) and the prompt's largest token norm."""

    def __init__(self, prompt):
        self.buffer = None
        self.prompt_norm = prompt.norm(dim=-1).amax()

    def take(self, shape, dtype, device):
        size = math.prod(shape)
        buffer = self.buffer
        if buffer is None or buffer.numel() < size or buffer.dtype != dtype:
            buffer = self.buffer = torch.empty(size, dtype=dtype, device=device)
        return buffer[:size].view(shape)
