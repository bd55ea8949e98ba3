"""Softmax attention on a whole Gaussian mixture: the large-prompt limit (Proposition 2.1).

For tokens drawn from ``mu = sum_k pi_k N(m_k, Gamma_k)``, a softmax head is a
softmax-gated mixture of affine experts::

    T_{U,V}[mu](z) = V sum_k alpha_k(z) (m_k + Gamma_k U z),
    alpha_k(z) = softmax_k(log pi_k + m_k^T U z + 1/2 (U z)^T Gamma_k (U z)).

A finite prompt of ``L`` tokens from ``mu`` converges to it as ``L`` grows.
"""

import numpy as np
from scipy.special import softmax


def population_softmax_attention(
    queries: np.ndarray,
    means: np.ndarray,
    weights: np.ndarray,
    covariances: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
) -> np.ndarray:
    """A softmax head on a Gaussian-mixture prompt of infinite length.

    Parameters
    ----------
    queries : ndarray of shape (n, p)
        The query tokens ``z``.
    means : ndarray of shape (K, p)
        Component means ``m_k`` of the token distribution.
    weights : ndarray of shape (K,)
        Component weights ``pi_k``.
    covariances : ndarray of shape (K, p, p)
        Component covariances of the tokens (for a prompt of noisy
        observations, signal plus noise covariance).
    U : ndarray of shape (p, p)
        Interaction (key-query) matrix.
    V : ndarray of shape (q, p)
        Value matrix.

    Returns
    -------
    ndarray of shape (n, q)
        ``T_{U,V}[mu](z)`` for each query.

    See Also
    --------
    sk_softmix.attention.softmax_attention : The same head on a finite prompt.

    Notes
    -----
    Proposition 2.1 of Gabet, Boursier & Boyer (2026)::

        T_{U,V}[mu](z) = V sum_k alpha_k(z) (m_k + Gamma_k U z),
        alpha_k(z) = softmax_k(log pi_k + m_k^T U z + 1/2 (U z)^T Gamma_k (U z)).

    With a shared covariance the quadratic term cancels (eq. 3): a global
    linear map ``V Gamma U z`` plus a softmax gate over the means. A single
    Gaussian gives the affine map ``V (m + Gamma U z)``. The gate ``alpha`` is
    computed with a log-sum-exp, so any finite input gives a finite output.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Proposition 2.1.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.population import population_softmax_attention
    >>> means, weights = np.array([[1.0, 0.0]]), np.array([1.0])
    >>> covariances = np.eye(2)[None]
    >>> population_softmax_attention(np.array([[0.0, 2.0]]), means, weights,
    ...                              covariances, np.eye(2), np.eye(2))
    array([[1., 2.]])

    One Gaussian gives ``V (m + Gamma U z) = (1, 0) + (0, 2)``. On a mixture, a
    long prompt of its samples gets close to the limit:

    >>> import torch
    >>> from sk_softmix.attention import softmax_attention
    >>> from sk_softmix.datasets import make_gaussian_mixture
    >>> means, weights = np.array([[3.0, 0.0], [0.0, 3.0]]), np.array([0.5, 0.5])
    >>> covariances = np.stack([5.0 * np.eye(2)] * 2)  # noisy tokens: 1 + 4
    >>> Z, _, _ = make_gaussian_mixture(100_000, means, covariance=1.0,
    ...                                 noise_variance=4.0, random_state=0)
    >>> queries, U, V = np.array([[1.0, 2.0], [-2.0, 0.5]]), np.eye(2) / 5, np.eye(2)
    >>> limit = population_softmax_attention(queries, means, weights, covariances, U, V)
    >>> finite = softmax_attention(*(torch.from_numpy(a) for a in (queries, Z, U, V)))
    >>> bool(np.abs(finite.numpy() - limit).max() < 0.05)
    True
    """
    transformed = queries @ U.T  # (n, p): U z
    spread = np.einsum("kij,nj->nki", covariances, transformed)  # (n, K, p): Gamma_k U z
    logits = (
        np.log(np.clip(weights, np.finfo(float).tiny, None))
        + transformed @ means.T  # (n, K): m_k^T U z
        + 0.5 * np.einsum("nki,ni->nk", spread, transformed)
    )
    gate = softmax(logits, axis=1)  # (n, K)
    experts = means[None, :, :] + spread  # (n, K, p): m_k + Gamma_k U z
    return np.einsum("nk,nkp->np", gate, experts) @ V.T
