"""Linear-attention heads and their stacks: the baseline that stays linear in the query."""

import torch

from ._heads import _as_heads, _check_prompt, _left_out_tokens


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
    sk_softmix.theory.risk.best_linear_risk : The risk no such stack can beat on a
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


def one_layer_trace(prompt, U, V, *, residual, exclude):
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
