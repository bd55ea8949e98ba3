"""Score terms of the token alone: this package's extension of the paper's heads.

A head may score ``z_i^T (U_h z + b_h) - 1/2 z_i^T W_h z_i + c_{h,i}``: a key
offset ``b_h``, a key norm ``W_h`` and any per-token term ``c_{h,i}`` (user
guide, "Key-bias heads"). Each is folded into the plain score ``z_i . t`` of
wider tokens and queries, so that every kernel of the engine, the
leave-one-out exclusion and the overflow guard apply unchanged; the first
``p`` columns of the widened tokens stay the prompt's.
"""

import torch

from ._attention_kernels import _CLOSED_FORM_MAX_FEATURES


def _with_key_terms(transformed, prompt, key_offset, key_norm, key_bias):
    """``transformed`` and ``prompt`` with the key offset, key norm and key
    bias of :func:`softmax_attention` folded in (each checked first)."""
    n_heads, _, p = transformed.shape
    if key_offset is not None:
        if key_offset.numel() != n_heads * p:
            raise ValueError(
                f"key_offset must have shape ({n_heads}, {p}) or ({p},) for one head; "
                f"got {tuple(key_offset.shape)}."
            )
        transformed = transformed + key_offset.reshape(n_heads, 1, p)
    if key_norm is not None:
        if key_norm.shape not in ((n_heads, p, p), (p, p)) or (key_norm.dim() == 2 and n_heads > 1):
            raise ValueError(
                f"key_norm must have shape ({n_heads}, {p}, {p})"
                + (f" or ({p}, {p}) for one head" if n_heads == 1 else "")
                + f"; got {tuple(key_norm.shape)}."
            )
        transformed, prompt = _with_key_norm(transformed, prompt, key_norm.reshape(-1, p, p))
    if key_bias is not None:
        transformed, prompt = _with_key_bias(transformed, prompt, key_bias)
    return transformed, prompt


def key_bias(prompt: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-token score terms ``c_{h,i} = b_h^T z_i - 1/2 z_i^T W_h z_i``.

    With them a head's score is ``z_i^T U_h z + b_h^T z_i - 1/2 z_i^T W_h
    z_i``; with ``W = U`` and ``b = 0`` it is ``-1/2 ||z - z_i||_U^2`` up to
    a term of the query alone, which the softmax ignores: a Gaussian-kernel
    ("non-local means") head. This package's extension (user guide,
    "Key-bias heads").

    Parameters
    ----------
    prompt : Tensor of shape (L, p)
        The prompt tokens ``z_i``.
    W : Tensor of shape (H, p, p)
        Key-norm matrices (only their symmetric part counts).
    b : Tensor of shape (H, p)
        Key offsets.

    Returns
    -------
    Tensor of shape (H, L)
        ``c_{h,i}``, for the ``key_bias`` of :func:`softmax_attention`.

    Examples
    --------
    >>> import torch
    >>> from sk_softmix.attention import key_bias
    >>> prompt = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    >>> key_bias(prompt, torch.eye(2)[None], torch.tensor([[1.0, 0.0]]))
    tensor([[ 0.5000, -2.0000]])
    """
    norms = torch.einsum("li,hij,lj->hl", prompt, W, prompt)  # z_i^T W_h z_i
    return b @ prompt.mT - 0.5 * norms


def _with_key_norm(transformed, prompt, W):
    """Queries and tokens whose plain scores are ``z_i . t_h - 1/2 z_i^T W_h z_i``.

    The first ``p`` columns of the returned tokens are the prompt's, so
    averages and moments over them start with the prompt's own. Two ways,
    with the same scores:

    - per token: ``c_{h,i} = -1/2 z_i^T W_h z_i`` as one column per head
      (``_with_key_bias``); a ``W`` that requires grad then reaches the
      scores through the tokens, which sends training to the matmul kernel;
    - through the query's image, where ``W`` requires grad and the tokens
      stay narrow (``p = 2``: 6 columns): the tokens gain their products
      ``-1/2 z_ia z_ib`` (``a <= b``) and a column of ones, each head's
      query the matching entries of ``W_h`` and ``-max_i c_{h,i}``, so the
      gradient flows through the queries and the fused kernel's
      closed-form backward applies.

    Parameters
    ----------
    transformed : Tensor of shape (H, n, p)
        ``U_h z`` (plus any key offset) per head and query.
    prompt : Tensor of shape (L, p)
        The prompt tokens.
    W : Tensor of shape (H, p, p)
        Key-norm matrices.

    Returns
    -------
    transformed : Tensor of shape (H, n, r)
        The widened queries.
    tokens : Tensor of shape (L, r)
        The widened prompt, its first ``p`` columns the prompt.
    """
    n_heads, n_queries, p = transformed.shape
    pairs = torch.triu_indices(p, p, device=prompt.device)
    width = p + pairs.shape[1] + 1
    narrow = width <= _CLOSED_FORM_MAX_FEATURES
    if not (narrow and torch.is_grad_enabled() and W.requires_grad):
        return _with_key_bias(transformed, prompt, key_bias(prompt, W, W.new_zeros(n_heads, p)))
    symmetric = W + W.mT
    # z^T W z = sum_a W_aa z_a^2 + sum_{a<b} (W_ab + W_ba) z_a z_b
    weights = torch.where(
        pairs[0] == pairs[1], symmetric[:, pairs[0], pairs[1]] / 2, symmetric[:, pairs[0], pairs[1]]
    )  # (H, pairs)
    products = -0.5 * prompt[:, pairs[0]] * prompt[:, pairs[1]]  # (L, pairs)
    with torch.no_grad():  # the softmax ignores a per-head constant: max 0, as in _with_key_bias
        largest = (products.to(weights.dtype) @ weights.mT).amax(dim=0)  # (H,)
    extra = torch.cat([weights, -largest.unsqueeze(1)], dim=1).to(transformed.dtype)
    queries = torch.cat([transformed, extra.unsqueeze(1).expand(n_heads, n_queries, -1)], dim=-1)
    ones = prompt.new_ones((prompt.shape[0], 1))
    return queries, torch.cat([prompt, products, ones], dim=-1)


def _with_key_bias(transformed, prompt, bias):
    """``z_i . (U_h z) + c_{h,i}`` as a plain score over wider tokens.

    Each token gains one column per head holding ``c_{h,i}``, and head
    ``h``'s transformed query a 1 in its own column and 0 in the others:
    every kernel, leave-one-out and overflow guard then applies unchanged,
    and the extra columns of the average are dropped. Each head's terms are
    shifted to a maximum of 0 first (the softmax ignores a per-head
    constant), so that large positive terms cannot overflow.
    """
    n_heads, n_queries, p = transformed.shape
    bias = bias.unsqueeze(0) if bias.dim() == 1 else bias
    if bias.shape != (n_heads, prompt.shape[0]):
        raise ValueError(
            f"key_bias must have shape ({n_heads}, {prompt.shape[0]}) or "
            f"({prompt.shape[0]},) for one head; got {tuple(bias.shape)}."
        )
    bias = bias.to(prompt.dtype)
    bias = bias - bias.detach().amax(dim=1, keepdim=True)
    selector = torch.eye(n_heads, dtype=transformed.dtype, device=transformed.device)
    selector = selector.unsqueeze(1).expand(n_heads, n_queries, n_heads)
    return torch.cat([transformed, selector], dim=-1), torch.cat([prompt, bias.mT], dim=-1)
