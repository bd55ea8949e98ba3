"""Softmax heads over a prompt (the paper's eq. 1): the outputs, the attention-weighted
mean and covariance of the values, and the trace a divergence needs."""

import torch

from ._heads import _as_heads, _check_prompt
from ._kernels import (
    CLOSED_FORM_MAX_FEATURES,
    _kernel_name,
    _matmul_mean,
    _moments,
    _sdpa_mean,
)
from ._key_terms import with_key_terms
from ._reference import softmax_average

METHODS = ("auto", "sdpa", "matmul", "reference")


def softmax_attention(
    queries: torch.Tensor,
    prompt: torch.Tensor,
    U: torch.Tensor,
    V: torch.Tensor,
    *,
    exclude: torch.Tensor | None = None,
    batch_size: int | None = None,
    method: str = "auto",
    key_offset: torch.Tensor | None = None,
    key_norm: torch.Tensor | None = None,
    key_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Outputs of softmax-attention heads for each query.

    Parameters
    ----------
    queries : Tensor of shape (n, p)
        The query tokens ``z``.
    prompt : Tensor of shape (L, p)
        The prompt tokens ``z_i``: keys and values at once.
    U : Tensor of shape (H, p, p) or (p, p)
        Interaction (key-query) matrices, one per head.
    V : Tensor of shape (H, q, p) or (q, p)
        Value matrices, one per head.
    exclude : Tensor of shape (n,), dtype int64, default=None
        Index of a prompt token each query must not attend to, ``-1`` for none.
    batch_size : int, default=None
        Queries whose scores the ``"matmul"`` kernel holds at once
        (``H * batch_size * L`` of them). ``None`` picks about 2**24 scores
        per chunk. The fused kernel holds no scores and ignores it.
    method : {"auto", "sdpa", "matmul", "reference"}, default="auto"
        ``"sdpa"``: torch's fused kernel
        (:func:`torch.nn.functional.scaled_dot_product_attention`'s flash
        kernel on the CPU, its memory-efficient kernel on CUDA), called on
        contiguous 4-D tensors without a mask; ``"matmul"``: scores in chunks,
        exponentiated in place; ``"reference"``: the plain formula in one
        block, for tests. ``"auto"`` and ``"sdpa"`` use the fused kernel
        wherever it is exact (leave-one-out by subtracting each query's own
        token, on the CPU) and ``"matmul"`` elsewhere: scores that could
        overflow the dtype, CUDA with ``exclude``, a prompt that requires
        grad, other devices. The result is differentiable with respect to
        ``queries`` and ``U``, ``V`` (and ``key_bias``) for every method.
    key_offset : Tensor of shape (H, p) or (p,), default=None
        ``b_h`` in the scores ``z_i^T (U_h z + b_h)``: a term ``b_h^T z_i``
        of the token alone, carried by the query's image, so that every
        kernel keeps its speed. This package's extension, not the paper's.
    key_norm : Tensor of shape (H, p, p) or (p, p), default=None
        ``W_h`` in the scores ``z_i^T U_h z - 1/2 z_i^T W_h z_i``: a key norm
        (this package's extension). Where it requires grad and ``p = 2``, its
        terms are carried by the query's image as weights of the tokens'
        products ``z_ia z_ib``, so that training keeps the fused kernel;
        elsewhere they are computed per token, as a ``key_bias``.
    key_bias : Tensor of shape (H, L) or (L,), default=None
        A per-token term ``c_{h,i}`` added to head ``h``'s scores,
        ``z_i^T U_h z + c_{h,i}``, such as a key norm ``-1/2 z_i^T W_h z_i``
        (:func:`key_bias`): this package's extension. ``None``: the paper's
        scores. A ``key_bias`` that requires grad trains on the ``"matmul"``
        kernel with the weights stored.

    Returns
    -------
    Tensor of shape (H, n, q), or (n, q) when ``U`` is 2-D
        ``T_{U_h, V_h}(z)`` for each head and query.

    See Also
    --------
    linear_attention : The linear head, ``(1/L) sum_i (z_i^T U z) V z_i``.
    combine_heads : Sum the heads, add residual or skip terms.
    sk_softmix.theory.population.population_softmax_attention : The limit of this
        head as the prompt length grows, for a Gaussian-mixture prompt.

    Notes
    -----
    ``T(z) = sum_i softmax_i(z_i^T U z) V z_i`` (eq. 1 of
    Gabet, Boursier & Boyer, 2026, on the prompt's empirical measure). Time
    ``O(n L p H)``; memory ``O(n p H)`` for the fused kernel, which never
    writes the scores, plus ``H * batch_size * L`` scores at a time for
    ``"matmul"``.

    Scores are shifted by their maximum before exponentiation, and computed in
    float64 when their a-priori bound ``max ||U z|| max ||z_i||`` would
    overflow the input dtype, so finite inputs never give NaN or inf.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import softmax_attention
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> out = softmax_attention(torch.zeros(1, 2), prompt, torch.eye(2), torch.eye(2))
    >>> out  # a zero query weighs every token equally
    tensor([[0.5000, 0.5000]])

    A query aligned with a token weighs it more; leaving that token out
    (``exclude``) leaves only the other one:

    >>> query = torch.tensor([[3.0, 0.0]])
    >>> softmax_attention(query, prompt, torch.eye(2), torch.eye(2)).round(decimals=4)
    tensor([[0.9526, 0.0474]])
    >>> softmax_attention(query, prompt, torch.eye(2), torch.eye(2), exclude=torch.tensor([0]))
    tensor([[0., 1.]])
    """
    single_head = U.dim() == 2
    U, V = _as_heads(U, V, queries.shape[-1])
    _check_prompt(queries, prompt, exclude)
    n_heads, p = U.shape[0], queries.shape[-1]
    # T_h(z) = V_h sum_i softmax_i(z_i^T U_h z) z_i: U_h z for every head in one
    # (n, p) @ (p, H p) product -> (H, n, p), then the softmax average over the
    # prompt (attention_mean), then V_h
    transformed = (queries @ U.flatten(0, 1).mT).view(-1, n_heads, p).transpose(0, 1)
    # this package's extension: score terms of the token alone, as wider tokens
    transformed, prompt = with_key_terms(transformed, prompt, key_offset, key_norm, key_bias)
    mean = attention_mean(transformed, prompt, exclude, method=method, batch_size=batch_size)
    out = mean[..., :p] @ V.mT  # (H, n, p) @ (H, p, q): V_h applied per head
    return out[0] if single_head else out


def attention_mean(
    transformed: torch.Tensor,
    prompt: torch.Tensor,
    exclude: torch.Tensor | None = None,
    *,
    method: str = "auto",
    batch_size: int | None = None,
) -> torch.Tensor:
    """Softmax-weighted average of the prompt tokens for pre-transformed queries.

    Parameters
    ----------
    transformed : Tensor of shape (H, n, p)
        ``U_h z`` for each head and query: the weights are
        ``softmax_i(z_i . transformed)``.
    prompt : Tensor of shape (L, p)
        The prompt tokens ``z_i``.
    exclude : Tensor of shape (n,), dtype int64, default=None
        Index of a prompt token each query must not attend to, ``-1`` for none.
    method : {"auto", "sdpa", "matmul", "reference"}, default="auto"
        As in :func:`softmax_attention`.
    batch_size : int, default=None
        Queries whose scores the ``"matmul"`` kernel holds at once, as in
        :func:`softmax_attention`.

    Returns
    -------
    Tensor of shape (H, n, p)
        ``sum_i a_i z_i``, differentiable with respect to ``transformed``.

    See Also
    --------
    softmax_attention : Applies ``U`` before and ``V`` after this average.
    attention_covariance : The same weights' mean and covariance.

    Notes
    -----
    The Jacobian of the average with respect to the transformed query is the
    attention-weighted covariance of the prompt, ``Cov_a = sum_i a_i z_i z_i^T
    - mean mean^T`` (Section 4 of the paper). For ``p <= 8`` the fast kernels
    compute it in the forward pass and use it as the backward, which costs
    far less than storing the ``(H, n, L)`` weights for autograd.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import attention_mean
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> transformed = torch.tensor([[[0.0, 0.0], [2.0, 0.0]]])  # one head, two queries
    >>> attention_mean(transformed, prompt).round(decimals=4)
    tensor([[[0.5000, 0.5000],
             [0.8808, 0.1192]]])

    The fast path and the plain ``softmax(scores) @ prompt`` agree:

    >>> torch.allclose(
    ...     attention_mean(transformed, prompt),
    ...     attention_mean(transformed, prompt, method="reference"),
    ... )
    True
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
    if transformed.shape[1] == 0:  # nothing to attend from
        return transformed.new_zeros(transformed.shape)
    kernel = _KERNELS[_kernel_name(method, transformed, prompt, exclude)]
    return kernel(transformed, prompt, exclude, batch_size)


# -- the kernels: one average, three ways -------------------------------------


def _reference_mean(transformed, prompt, exclude, batch_size=None):
    """The paper's eq. 1 as written: every score ``z_i . (U z)``, their softmax
    ``a_i`` over the prompt, then ``sum_i a_i z_i`` (``softmax_average``)."""
    return softmax_average(transformed, prompt, exclude)


# The formula first; then the same average fast, in ``_kernels``:
# chunks of scores exponentiated in place, and torch's fused kernel.
_KERNELS = {"reference": _reference_mean, "matmul": _matmul_mean, "sdpa": _sdpa_mean}


def attention_covariance(
    transformed: torch.Tensor,
    prompt: torch.Tensor,
    exclude: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention-weighted mean and covariance of the prompt for each query.

    Parameters
    ----------
    transformed : Tensor of shape (H, n, p)
        ``U_h z`` for each head and query, as in :func:`attention_mean`.
    prompt : Tensor of shape (L, p)
        The prompt tokens ``z_i``.
    exclude : Tensor of shape (n,), dtype int64, default=None
        Index of a prompt token each query must not attend to, ``-1`` for none.

    Returns
    -------
    mean : Tensor of shape (H, n, p)
        ``sum_i a_i z_i``, with ``a_i = softmax_i(z_i . transformed)``.
    covariance : Tensor of shape (H, n, p, p)
        ``sum_i a_i (z_i - mean)(z_i - mean)^T``, the Jacobian of ``mean`` with
        respect to ``transformed``.

    See Also
    --------
    attention_mean : The mean alone, with a cheaper backward pass.

    Notes
    -----
    Both outputs are differentiable (autograd stores the ``(H, n, L)``
    weights): Stein's unbiased risk estimate trains through the covariance,
    since the divergence of a softmax head is ``tr(V Cov_a U)``. Without
    gradients the in-place path of :func:`attention_mean` is used.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import attention_covariance
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> mean, covariance = attention_covariance(torch.zeros(1, 1, 2), prompt)
    >>> mean
    tensor([[[0.5000, 0.5000]]])
    >>> covariance  # two equally weighted tokens
    tensor([[[[ 0.2500, -0.2500],
              [-0.2500,  0.2500]]]])

    The covariance is the Jacobian of the mean:

    >>> transformed = torch.tensor([[[0.3, -0.2]]], dtype=torch.float64)
    >>> jacobian = torch.autograd.functional.jacobian(
    ...     lambda t: attention_covariance(t, prompt.double())[0], transformed
    ... )
    >>> covariance = attention_covariance(transformed, prompt.double())[1]
    >>> torch.allclose(jacobian.reshape(2, 2), covariance[0, 0])
    True
    """
    return _moments(
        transformed, prompt, exclude, fused=_fused_moments_apply(transformed, prompt, exclude)
    )


def attention_trace(
    transformed: torch.Tensor,
    prompt: torch.Tensor,
    matrices: torch.Tensor,
    exclude: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention-weighted mean and ``tr(M_h Cov_a)`` per head and query, without ``Cov_a``.

    Parameters
    ----------
    transformed : Tensor of shape (H, n, r)
        Transformed queries, as in :func:`attention_mean`; only the first
        ``p`` columns of the prompt are averaged and traced, so wider tokens
        (key-bias columns) may follow them.
    prompt : Tensor of shape (L, r)
        The prompt tokens, their first ``p`` columns the ``z_i``.
    matrices : Tensor of shape (H, p, p)
        ``M_h``.
    exclude : Tensor of shape (n,), dtype int64, default=None
        Index of a prompt token each query must not attend to, ``-1`` for none.

    Returns
    -------
    mean : Tensor of shape (H, n, p)
        ``sum_i a_i z_i``.
    trace : Tensor of shape (H, n)
        ``tr(M_h Cov_a) = sum_i a_i (z_i - c)^T M_h (z_i - c) - (mean - c)^T
        M_h (mean - c)``, ``c`` the prompt's mean.

    See Also
    --------
    attention_covariance : The whole covariance, ``p x p`` per query.

    Notes
    -----
    Stein's unbiased risk estimate needs only ``tr(V Cov_a U) = tr(U V
    Cov_a)``. Each token's quadratic form is computed once, ``O(L p^2)`` per
    call, and averaged as one more column of the tokens: ``O(L)`` per query
    on top of the scores, where the covariance costs ``O(L p^2)`` per
    query. Centring on ``c`` keeps the difference free of cancellation when
    the data sit far from the origin. Differentiable with respect to
    ``transformed`` and ``matrices`` (autograd stores the weights).

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import attention_covariance, attention_trace
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], dtype=torch.float64)
    >>> transformed = torch.tensor([[[0.3, -0.2]]], dtype=torch.float64)
    >>> M = torch.tensor([[[2.0, 1.0], [0.0, 1.0]]], dtype=torch.float64)
    >>> mean, trace = attention_trace(transformed, prompt, M)
    >>> covariance = attention_covariance(transformed, prompt)[1]
    >>> bool(torch.allclose(trace[0, 0], torch.trace(M[0] @ covariance[0, 0])))
    True
    """
    n_heads, n_queries, width = transformed.shape
    p = matrices.shape[-1]
    centre = prompt[:, :p].mean(dim=0).detach()
    centred = prompt[:, :p] - centre
    quadratic = torch.einsum("li,hij,lj->hl", centred, matrices, centred)  # (H, L)
    # One more token column per head, read by no score (0 in every query):
    # the average of column p_h is sum_i a_i (z_i - c)^T M_h (z_i - c).
    tokens = torch.cat([prompt, quadratic.mT.to(prompt.dtype)], dim=-1)
    queries = torch.cat([transformed, transformed.new_zeros((n_heads, n_queries, n_heads))], -1)
    averages = attention_mean(queries, tokens, exclude)
    mean = averages[..., :p]
    own_column = averages[..., width:].diagonal(dim1=0, dim2=2).T  # (H, n): head h's column
    offset = mean - centre.to(mean.dtype)
    trace = own_column - torch.einsum("hni,hij,hnj->hn", offset, matrices, offset)
    return mean, trace


def _fused_moments_apply(transformed, prompt, exclude):
    """Whether the fused kernel computes the two moments: small ``p`` (the
    values are ``p + p^2`` wide), and the conditions of ``_kernel_name``."""
    return (
        prompt.shape[-1] <= CLOSED_FORM_MAX_FEATURES
        and transformed.shape[1] > 0
        and _kernel_name("auto", transformed, prompt, exclude) == "sdpa"
    )
