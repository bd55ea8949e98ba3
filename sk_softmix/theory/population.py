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
    >>> from sk_softmix.theory.population import population_softmax_attention
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


def population_key_bias_attention(
    queries: np.ndarray,
    means: np.ndarray,
    weights: np.ndarray,
    covariances: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
) -> np.ndarray:
    """A key-bias softmax head on a Gaussian-mixture prompt of infinite length.

    The head scores token ``z_i`` by ``z_i^T U z + b^T z_i - 1/2 z_i^T W
    z_i`` (:func:`sk_softmix.attention.key_bias`); ``W = 0`` and ``b = 0``
    give :func:`population_softmax_attention`. This package's extension,
    not the paper's.

    Parameters
    ----------
    queries : ndarray of shape (n, p)
        The query tokens ``z``.
    means : ndarray of shape (K, p)
        Component means ``m_k`` of the token distribution.
    weights : ndarray of shape (K,)
        Component weights ``pi_k``.
    covariances : ndarray of shape (K, p, p)
        Component covariances ``S_k`` of the tokens.
    U : ndarray of shape (p, p)
        Interaction (key-query) matrix.
    V : ndarray of shape (q, p)
        Value matrix.
    W : ndarray of shape (p, p)
        Key-norm matrix (its symmetric part counts).
    b : ndarray of shape (p,)
        Key offset.

    Returns
    -------
    ndarray of shape (n, q)
        The head's output for each query.

    Raises
    ------
    ValueError
        When some ``S_k^{-1} + W`` is not positive definite: the tokens'
        weights ``exp(score)`` then have no finite mean, and a long prompt
        puts all the weight on its most extreme tokens.

    Notes
    -----
    Each component's tokens, weighted by ``exp(score)``, are again Gaussian
    (an exponential tilt): with ``P_k = S_k^{-1} + W`` and ``a = U z + b``,
    their mean is ``mu_k(z) = P_k^{-1} (S_k^{-1} m_k + a)``, and::

        T(z) = V sum_k alpha_k(z) mu_k(z),
        alpha_k(z) = softmax_k(log pi_k - 1/2 log det(I + S_k W)
                               + 1/2 mu_k^T P_k mu_k - 1/2 m_k^T S_k^{-1} m_k).

    A gated mixture of affine experts still, as in Proposition 2.1 of the
    paper, whose gate now carries a term in ``m_k`` alone: with a shared
    ``S`` it is ``log pi_k + m_k^T S^{-1} P^{-1} (U z + b) - 1/2 m_k^T
    (S^{-1} - S^{-1} P^{-1} S^{-1}) m_k`` up to a constant in ``k``
    (user guide, "Key-bias heads").

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.population import population_key_bias_attention
    >>> means, weights, covariances = np.array([[1.0, 0.0]]), np.array([1.0]), np.eye(2)[None]
    >>> population_key_bias_attention(np.array([[0.0, 2.0]]), means, weights, covariances,
    ...                               np.eye(2), np.eye(2), np.eye(2), np.zeros(2))
    array([[0.5, 1. ]])

    One Gaussian ``N(m, I)`` tilted by ``W = I`` has precision ``2 I``: the
    head returns ``(m + U z) / 2``.
    """
    means = np.asarray(means, dtype=float)
    covariances = np.asarray(covariances, dtype=float)
    W = 0.5 * (np.asarray(W, dtype=float) + np.asarray(W, dtype=float).T)
    shifted = queries @ U.T + b  # (n, p): a = U z + b
    logits, experts = [], []
    for pi, m, S in zip(weights, means, covariances, strict=True):
        S_inv = np.linalg.inv(S)
        P = S_inv + W
        try:
            cholesky = np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            raise ValueError(
                "S_k^{-1} + W is not positive definite for some component: the "
                "key-bias head's weights have no finite mean on this mixture."
            ) from None
        centre = (S_inv @ m)[None, :] + shifted  # (n, p): S^-1 m + a
        mu = np.linalg.solve(P, centre.T).T  # (n, p): P^-1 (S^-1 m + a)
        log_det = 2 * np.sum(np.log(np.diag(cholesky))) + np.linalg.slogdet(S)[1]  # det(S P)
        logits.append(
            np.log(max(pi, np.finfo(float).tiny))
            - 0.5 * log_det
            + 0.5 * np.sum(mu * centre, axis=1)  # mu^T P mu = mu^T (S^-1 m + a)
            - 0.5 * m @ S_inv @ m
        )
        experts.append(mu)
    gate = softmax(np.stack(logits, axis=1), axis=1)  # (n, K)
    return np.einsum("nk,knp->np", gate, np.stack(experts)) @ V.T
