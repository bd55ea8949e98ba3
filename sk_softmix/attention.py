"""Attention heads over a prompt of tokens (the paper's eq. 1).

A prompt is a set of tokens ``z_1..z_L`` in ``R^p``. A head has an interaction
matrix ``U`` (p x p) and a value matrix ``V`` (q x p). For a query ``z``::

    softmax head   T(z) = sum_i softmax_i(z_i^T U z) V z_i
    linear head    T(z) = (1/L) sum_i (z_i^T U z) V z_i

There is no ``1/sqrt(p)`` temperature: ``U`` carries the scale. Keys and values
are the prompt tokens themselves, as in the paper.

Every function takes torch tensors and returns tensors of the queries' dtype on
their device. Heads are stacked along a leading axis: ``U`` is ``(H, p, p)``
and ``V`` is ``(H, q, p)``; the output is ``(H, n_queries, q)``.

``exclude`` lets each query ignore one prompt token: the training set is the
prompt, and a training query must not attend to its own copy. It holds, for
each query, the index of the token to leave out, or ``-1``.
"""

import torch

from . import _key_terms
from ._attention_kernels import (
    _CLOSED_FORM_MAX_FEATURES,
    _kernel_name,
    _matmul_mean,
    _moments,
    _sdpa_mean,
    queries_per_chunk,  # noqa: F401  (the estimators' chunk sizes)
)
from ._key_terms import _with_key_terms
from ._reference_attention import softmax_average

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
    sk_softmix.population.population_softmax_attention : The limit of this
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
    transformed, prompt = _with_key_terms(transformed, prompt, key_offset, key_norm, key_bias)
    mean = attention_mean(transformed, prompt, exclude, method=method, batch_size=batch_size)
    out = mean[..., :p] @ V.mT  # (H, n, p) @ (H, p, q): V_h applied per head
    return out[0] if single_head else out


# b^T z_i - 1/2 z_i^T W z_i per token, public here beside the engine it feeds
key_bias = _key_terms.key_bias


def linear_attention(
    queries: torch.Tensor,
    prompt: torch.Tensor,
    U: torch.Tensor,
    V: torch.Tensor,
    *,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """Outputs of linear-attention heads for each query.

    ``T(z) = (1/L) sum_i (z_i^T U z) V z_i = V G U z / L`` with ``G`` the
    prompt's Gram matrix ``sum_i z_i z_i^T``: linear in the query, so it costs
    ``O((n + L) p^2)`` and needs no chunking.

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
        Index of a prompt token each query leaves out (``-1``: none); the
        average then runs over the other ``L - 1`` tokens.

    Returns
    -------
    Tensor of shape (H, n, q), or (n, q) when ``U`` is 2-D
        ``T(z)`` for each head and query.

    See Also
    --------
    softmax_attention : The softmax head, whose weights depend on the query.
    stacked_linear_attention : Several linear layers, still linear in the query.

    Notes
    -----
    On a mixture prompt law linear attention weighs the components by their
    fixed proportions: ``T_lin[sum_k pi_k mu_k] = sum_k pi_k T_lin[mu_k]``,
    blind to the query (Section 2 of Gabet, Boursier & Boyer, 2026).

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import linear_attention
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> linear_attention(torch.tensor([[2.0, 0.0]]), prompt, torch.eye(2), torch.eye(2))
    tensor([[1., 0.]])

    It is the linear map ``V G U / L``, ``G`` the prompt's Gram matrix:

    >>> generator = torch.Generator().manual_seed(0)
    >>> prompt, queries, U, V = (
    ...     torch.randn(*shape, generator=generator) for shape in [(50, 3), (4, 3), (3, 3), (3, 3)]
    ... )
    >>> out = linear_attention(queries, prompt, U, V)
    >>> torch.allclose(out, queries @ (V @ prompt.T @ prompt @ U / 50).T, atol=1e-5)
    True
    """
    single_head = U.dim() == 2
    U, V = _as_heads(U, V, queries.shape[-1])
    _check_prompt(queries, prompt, exclude)
    transformed = torch.einsum("hij,nj->hni", U, queries)  # (H, n, p): U_h z
    # sum_i (z_i . U z) z_i = G (U z), with G the Gram matrix of the prompt
    gram = prompt.mT @ prompt  # (p, L) @ (L, p) -> (p, p)
    pooled = transformed @ gram  # (H, n, p); G is symmetric
    count = prompt.shape[0]
    if exclude is None:
        mean = pooled / count
    else:
        own, kept = _left_out_tokens(prompt, exclude)
        # drop the left-out token's term (z_j . U z) z_j from the sum
        own_score = (transformed * own).sum(-1, keepdim=True)  # (H, n, 1)
        mean = (pooled - own_score * own) / kept.unsqueeze(-1)
    out = torch.einsum("hqp,hnp->hnq", V, mean)
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


# The formula first; then the same average fast, in ``_attention_kernels``:
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
        prompt.shape[-1] <= _CLOSED_FORM_MAX_FEATURES
        and transformed.shape[1] > 0
        and _kernel_name("auto", transformed, prompt, exclude) == "sdpa"
    )


def _as_heads(U, V, n_features):
    if U.dim() == 2:
        U = U.unsqueeze(0)
    if V.dim() == 2:
        V = V.unsqueeze(0)
    if U.dim() != 3 or U.shape[1:] != (n_features, n_features):
        raise ValueError(
            f"U must have shape (H, {n_features}, {n_features}) or "
            f"({n_features}, {n_features}); got {tuple(U.shape)}."
        )
    if V.dim() != 3 or V.shape[0] != U.shape[0] or V.shape[2] != n_features:
        raise ValueError(
            f"V must have shape ({U.shape[0]}, q, {n_features}); got {tuple(V.shape)}."
        )
    return U, V


def _left_out_tokens(prompt, exclude):
    """Each query's left-out token ``o`` (zero where ``exclude`` is -1) and
    how many tokens it keeps (``L - 1`` or ``L``): a linear layer's prompt
    sums without ``o`` are the full sums minus ``o``'s term, over that count."""
    left_out = (exclude >= 0).to(prompt.dtype)
    own = prompt[exclude.clamp(min=0)] * left_out.unsqueeze(-1)  # (n, p)
    return own, prompt.shape[0] - left_out


def _check_prompt(queries, prompt, exclude):
    if queries.dim() != 2 or prompt.dim() != 2 or prompt.shape[1] != queries.shape[1]:
        raise ValueError(
            "queries and prompt must have shapes (n, p) and (L, p); got "
            f"{tuple(queries.shape)} and {tuple(prompt.shape)}."
        )
    if prompt.shape[0] == 0:
        raise ValueError("The prompt must hold at least one token.")
    if exclude is not None:
        if exclude.shape != (queries.shape[0],):
            raise ValueError(
                f"exclude must have shape ({queries.shape[0]},); got {tuple(exclude.shape)}."
            )
        if prompt.shape[0] < 2 and bool((exclude >= 0).any()):
            raise ValueError("A query cannot leave out the only token of its prompt.")


def stacked_linear_attention(
    queries: torch.Tensor,
    prompt: torch.Tensor,
    U: torch.Tensor,
    V: torch.Tensor,
    *,
    residual: bool = True,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """Output of a stack of linear-attention layers for each query.

    Every layer updates the prompt tokens and the query alike: token ``h``
    becomes ``h + sum_heads T_lin(h)`` (``residual=True``) or
    ``sum_heads T_lin(h)``, each prompt token attending over the whole current
    prompt, the query over the prompt only. A linear layer multiplies every
    token by the same matrix ``M = [I +] sum_h V_h Sigma U_h``, with ``Sigma``
    the prompt's second-moment matrix, so the stack only needs to carry
    ``Sigma -> M Sigma M^T`` from layer to layer: ``O(layers p^3)`` work,
    whatever the prompt length. The result is linear in the query.

    Parameters
    ----------
    queries : Tensor of shape (n, p)
        The query tokens.
    prompt : Tensor of shape (L, p)
        The prompt tokens at the first layer.
    U : Tensor of shape (n_layers, H, p, p)
        Interaction matrices, per layer and head.
    V : Tensor of shape (n_layers, H, p, p)
        Value matrices, per layer and head.
    residual : bool, default=True
        Whether each layer adds its input back.
    exclude : Tensor of shape (n,), dtype int64, default=None
        Index of a prompt token each query leaves out of its prompt (``-1``:
        none); such a query gets its own ``Sigma``, so the work is then
        ``O(n layers p^3)``.

    Returns
    -------
    Tensor of shape (n, p)
        The queries after the last layer.

    See Also
    --------
    stacked_linear_maps : The matrix the stack applies to every query.
    sk_softmix.risk.best_linear_risk : The risk no such stack can beat on a
        denoising task.

    Notes
    -----
    Because the output is a fixed matrix times the query, a denoiser built
    from this stack, however deep, has a risk at least the best linear risk,
    strictly above the Bayes risk of a mixture of separated components
    (Theorem 4.1 of Gabet, Boursier & Boyer, 2026).

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import stacked_linear_attention
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> U = torch.eye(2).expand(2, 1, 2, 2)  # two layers, one head each
    >>> stacked_linear_attention(torch.tensor([[2.0, 0.0]]), prompt, U, U)
    tensor([[6.3750, 0.0000]])

    Layer one multiplies by ``I + Sigma = 1.5 I`` and turns ``Sigma = I / 2``
    into ``1.125 I``; layer two multiplies by ``2.125 I``:
    ``2 * 1.5 * 2.125 = 6.375``.
    """
    _check_prompt(queries, prompt, exclude)
    _check_layers(U, V, prompt.shape[-1])
    if U.shape[0] == 1 and exclude is not None:
        # One layer with leave-one-out: linear attention drops each query's
        # own token in O(H p^2), where a map per query costs O(H p^3).
        heads = linear_attention(queries, prompt, U[0], V[0], exclude=exclude)  # (H, n, p)
        return heads.sum(dim=0) + queries if residual else heads.sum(dim=0)
    maps = stacked_linear_maps(prompt, U, V, residual=residual, exclude=exclude)
    return (maps @ queries.unsqueeze(-1)).squeeze(-1)  # (m, p, p) @ (n, p, 1), m in {1, n}


def _check_layers(U, V, p):
    if U.dim() != 4 or U.shape[-2:] != (p, p) or V.shape != U.shape:
        raise ValueError(
            f"U and V must both have shape (n_layers, H, {p}, {p}); got "
            f"{tuple(U.shape)} and {tuple(V.shape)}."
        )


def _one_layer_trace(prompt, U, V, *, residual, exclude):
    """``tr M`` of one linear layer per query, each leaving out its own token.

    ``tr(V_h Sigma_n U_h)`` with ``Sigma_n = (L Sigma - o o^T) / (L - 1)`` is
    ``(L tr(V_h Sigma U_h) - o^T U_h V_h o) / (L - 1)``: ``O(H p^2)`` per
    query instead of forming its map. ``U``, ``V``: (1, H, p, p); returns (n,).
    """
    U, V = U[0], V[0]
    count = prompt.shape[0]
    second_moment = prompt.mT @ prompt / count
    shared = torch.einsum("hij,jk,hki->", V, second_moment, U)  # sum_h tr(V_h Sigma U_h)
    own, kept = _left_out_tokens(prompt, exclude)
    own_term = torch.einsum("ni,hij,hjk,nk->n", own, U, V, own)  # sum_h o^T U_h V_h o
    trace = (count * shared - own_term) / kept
    return trace + prompt.shape[-1] if residual else trace


def stacked_linear_maps(
    prompt: torch.Tensor,
    U: torch.Tensor,
    V: torch.Tensor,
    *,
    residual: bool = True,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """The matrix that a stack of linear-attention layers applies to a query.

    That is ``M_K ... M_1``, with ``M_l = [I +] sum_h V_h Sigma_l U_h`` and
    ``Sigma_l`` the prompt's second-moment matrix at layer ``l``.

    Parameters
    ----------
    prompt : Tensor of shape (L, p)
        The prompt tokens at the first layer.
    U : Tensor of shape (n_layers, H, p, p)
        Interaction matrices, per layer and head.
    V : Tensor of shape (n_layers, H, p, p)
        Value matrices, per layer and head.
    residual : bool, default=True
        Whether each layer adds its input back (the ``I +`` above).
    exclude : Tensor of shape (n,), dtype int64, default=None
        As in :func:`stacked_linear_attention`: each query then has its own map.

    Returns
    -------
    Tensor of shape (1, p, p), or (n, p, p) with ``exclude``
        Its trace is the divergence of the stack, the term Stein's unbiased
        risk estimate needs.

    See Also
    --------
    stacked_linear_attention : The stack applied to queries.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import stacked_linear_maps
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> U = torch.eye(2).expand(1, 1, 2, 2)
    >>> stacked_linear_maps(prompt, U, U)  # I + V Sigma U with Sigma = I / 2
    tensor([[[1.5000, 0.0000],
             [0.0000, 1.5000]]])
    """
    p = prompt.shape[-1]
    _check_layers(U, V, p)
    count = prompt.shape[0]
    second_moment = (prompt.mT @ prompt / count).unsqueeze(0)  # (1, p, p)
    if exclude is not None:
        own, kept = _left_out_tokens(prompt, exclude)
        own_outer = own.unsqueeze(-1) * own.unsqueeze(-2)  # (n, p, p)
        second_moment = (second_moment * count - own_outer) / kept.view(-1, 1, 1)
    identity = torch.eye(p, dtype=prompt.dtype, device=prompt.device)
    total = identity.expand_as(second_moment)
    for U_layer, V_layer in zip(U, V, strict=True):
        # (H, p, p) @ (m, 1, p, p) @ (H, p, p), summed over heads -> (m, p, p)
        layer_map = (V_layer @ second_moment.unsqueeze(1) @ U_layer).sum(dim=1)
        if residual:
            layer_map = identity + layer_map
        total = layer_map @ total
        second_moment = layer_map @ second_moment @ layer_map.mT
    return total


def combine_heads(
    heads: torch.Tensor,
    queries: torch.Tensor,
    *,
    residual: bool = False,
    output_map: torch.Tensor | None = None,
    skip: torch.Tensor | None = None,
) -> torch.Tensor:
    """Combine per-head outputs into one prediction per query.

    ``residual`` turns every head into ``z + T_h(z)``; ``output_map`` ``W`` then
    mixes the concatenated head outputs (``None``: they are summed); ``skip``
    ``A`` adds ``A z``. Residual heads under an output map
    ``W = (W_1, ..., W_H)`` equal ``(sum_h W_h) z + sum_h W_h T_h(z)``, which is
    why the denoisers store a skip map and value matrices instead.

    Parameters
    ----------
    heads : Tensor of shape (H, n, q)
        Head outputs ``T_h(z)``, as returned by :func:`softmax_attention`.
    queries : Tensor of shape (n, p)
        The queries ``z`` the heads were evaluated at.
    residual : bool, default=False
        Add the query to every head's output, ``z + T_h(z)``; needs ``q == p``.
    output_map : Tensor of shape (r, H * q), default=None
        ``W_out``, applied to the concatenated head outputs; ``None`` sums
        them (then ``r = q``).
    skip : Tensor of shape (r, p), default=None
        Skip map ``A``: ``A z`` is added to the result.

    Returns
    -------
    Tensor of shape (n, r)
        One prediction per query.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import combine_heads
    >>> heads = torch.ones(2, 1, 2)  # two heads, one query, outputs (1, 1)
    >>> combine_heads(heads, torch.tensor([[1.0, -1.0]]), residual=True)
    tensor([[4., 0.]])

    Proposition 4.4's output map ``W_out = (I, -2c I)`` over two residual heads
    equals a skip ``(1 - 2c) I`` plus the first head (the second is zero):

    >>> c, z = 0.8, torch.tensor([[1.0, -1.0]])
    >>> heads = torch.stack([torch.tensor([[0.3, 0.2]]), torch.zeros(1, 2)])
    >>> W_out = torch.cat([torch.eye(2), -2 * c * torch.eye(2)], dim=1)
    >>> torch.allclose(
    ...     combine_heads(heads, z, residual=True, output_map=W_out),
    ...     combine_heads(heads[:1], z, skip=(1 - 2 * c) * torch.eye(2)),
    ... )
    True
    """
    n_heads, n_queries, width = heads.shape
    if residual:
        if width != queries.shape[-1]:
            raise ValueError(
                f"residual heads need outputs of the query's size {queries.shape[-1]}; got {width}."
            )
        heads = heads + queries
    if output_map is None:
        out = heads.sum(dim=0)
    else:
        stacked = heads.permute(1, 0, 2).reshape(n_queries, n_heads * width)  # (n, H*q)
        out = stacked @ output_map.mT
    if skip is not None:
        out = out + queries @ skip.mT
    return out
