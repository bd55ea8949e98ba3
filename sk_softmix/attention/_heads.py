"""What softmax and linear heads share: shape checks of the heads and the prompt, the
left-out token of each query, and the combination of head outputs into one prediction."""

import torch


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
