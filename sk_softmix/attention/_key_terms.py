"""Score terms of the token alone: this package's extension of the paper's heads.

A head may score ``z_i^T (U_h z + b_h) - 1/2 z_i^T W_h z_i + c_{h,i}``: a key
offset ``b_h``, a key norm ``W_h`` and any per-token term ``c_{h,i}`` (user
guide, "Key-bias heads"). Each is folded into the plain score ``z_i . t`` of
wider tokens and queries, so that every kernel of the engine, the
leave-one-out exclusion and the overflow guard apply unchanged; the first
``p`` columns of the widened tokens stay the prompt's.
"""

import torch

from ._kernels import CLOSED_FORM_MAX_FEATURES


def with_key_terms(transformed, prompt, key_offset=None, key_norm=None, bias=None):
    """``transformed`` and ``prompt`` with the key offset, key norm and key
    bias of :func:`softmax_attention` folded in (each checked first).

    The offset is added to the queries' image. A key norm that is trained
    on narrow tokens rides on the queries too (``_with_key_products``);
    otherwise its per-token terms join ``bias``, so that every per-token
    term takes one column per head (``_with_key_bias``).
    """
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
        W = key_norm.reshape(-1, p, p)
        if _products_are_narrow(p) and torch.is_grad_enabled() and W.requires_grad:
            transformed, prompt = _with_key_products(transformed, prompt, W)
        else:
            norms = key_bias(prompt, W, W.new_zeros(n_heads, p))
            bias = norms if bias is None else norms + bias.reshape(-1, prompt.shape[0])
    if bias is not None:
        transformed, prompt = _with_key_bias(transformed, prompt, bias)
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


def _products_are_narrow(p):
    """Whether ``p`` features, their ``p (p + 1) / 2`` products and a column of
    ones stay within the closed-form backward's width (``p = 2``: 6)."""
    return p + p * (p + 1) // 2 + 1 <= CLOSED_FORM_MAX_FEATURES


def _with_key_products(transformed, prompt, W):
    """Queries and tokens whose plain scores are ``z_i . t_h - 1/2 z_i^T W_h z_i``,
    with ``W`` carried by the queries.

    The tokens gain their products ``-1/2 z_ia z_ib`` (``a <= b``) and a
    column of ones, each head's query the matching entries of ``W_h`` and
    ``-max_i`` of its terms (the softmax ignores a per-head constant, as in
    ``_with_key_bias``). A ``W`` that requires grad then reaches the scores
    through the queries, where the fused kernel's closed-form backward
    applies; as a per-token column it would send training to the matmul
    kernel. The first ``p`` columns of the tokens stay the prompt's.
    """
    n_heads, n_queries, p = transformed.shape
    pairs = torch.triu_indices(p, p, device=prompt.device)
    # z^T W z = sum_a W_aa z_a^2 + sum_{a<b} (W_ab + W_ba) z_a z_b
    halved = torch.where(pairs[0] == pairs[1], 0.5, 1.0).to(W.dtype)
    weights = (W + W.mT)[:, pairs[0], pairs[1]] * halved  # (H, pairs)
    products = -0.5 * prompt[:, pairs[0]] * prompt[:, pairs[1]]  # (L, pairs)
    with torch.no_grad():
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
