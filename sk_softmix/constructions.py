"""Closed-form attention parameters that equal the Bayes denoiser (SPEC section 4).

These are the population constructions of Gabet, Boursier & Boyer (2026): exact
for a prompt of infinite length, used here as initialisations (``init="bayes"``)
and as test oracles. All matrices are NumPy float64.
"""

import numpy as np


def in_context_construction(
    noisy_covariance: np.ndarray, noise_variance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One residual head and a skip map that denoise every admissible task.

    With ``S`` the shared covariance of the noisy components and ``xi^2`` the
    noise variance, ``f(z) = A z + V sum_i softmax_i(z_i^T U z) z_i`` with::

        U = S^{-1},   V = xi^2 S^{-1},   A = I - 2 xi^2 S^{-1}

    equals ``E[X | Z = z]`` on any prompt law ``sum_k pi_k N(m_k, S)`` whose
    means have equal ``S^{-1}``-norms. For ``S = (gamma^2 + xi^2) I`` this is
    Proposition 4.4's ``U = S^{-1}``, ``V = c I``, skip ``1 - 2c``,
    ``c = xi^2 / (gamma^2 + xi^2)``: only the shared variances enter, the
    prompt supplies the means and weights.

    Parameters
    ----------
    noisy_covariance : ndarray of shape (p, p)
        ``S = Gamma + xi^2 I``.
    noise_variance : float
        ``xi^2``.

    Returns
    -------
    U : ndarray of shape (p, p)
        Interaction matrix ``S^{-1}``.
    V : ndarray of shape (p, p)
        Value matrix ``xi^2 S^{-1}``.
    skip : ndarray of shape (p, p)
        Skip map ``I - 2 xi^2 S^{-1}``.

    See Also
    --------
    two_head_construction : Two plain heads for one known task.
    sk_softmix.SoftmaxAttentionDenoiser : Starts from this construction with
        ``residual=True, init="bayes"``.

    Notes
    -----
    The paper writes the architecture as two residual heads
    ``T^res = z + T(z)`` under an output map ``W_out = (I, -2c I)``, with
    ``U_2 = V_2 = 0`` (Proposition 4.4); expanding the residuals gives the
    skip ``(1 - 2c) I`` used here. On the noisy prompt law the head is
    ``c z + c sum_k alpha_k(z) m_k`` with the Bayes gate, so
    ``f(z) = (1 - c) z + c sum_k alpha_k(z) m_k = E[X | Z = z]``.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Proposition 4.4.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.constructions import in_context_construction
    >>> U, V, skip = in_context_construction(5.0 * np.eye(2), 4.0)
    >>> float(U[0, 0]), float(V[0, 0]), round(float(skip[0, 0]), 2)
    (0.2, 0.8, -0.6)

    The same parameters give the Bayes denoiser of two different tasks, on
    their noisy prompt laws:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.population import population_softmax_attention
    >>> z = np.array([[1.0, 2.0], [-4.0, 0.5], [6.0, -3.0]])
    >>> for means, weights in [([[3.0, 0.0], [0.0, 3.0]], [0.3, 0.7]),
    ...                        ([[-1.0, 2.0], [2.0, 1.0]], [0.5, 0.5])]:
    ...     noisy = np.stack([5.0 * np.eye(2)] * 2)  # S = (1 + 4) I
    ...     head = population_softmax_attention(z, np.array(means), np.array(weights),
    ...                                         noisy, U, V)
    ...     bayes = BayesDenoiser(means, weights, covariance=1.0, noise_variance=4.0)
    ...     print(np.allclose(z @ skip.T + head, bayes.fit(z).transform(z)))
    True
    True
    """
    precision = np.linalg.inv(noisy_covariance)
    precision = (precision + precision.T) / 2
    identity = np.eye(precision.shape[0])
    return (
        precision,
        noise_variance * precision,
        identity - 2 * noise_variance * precision,
    )


def single_head_construction(
    noisy_covariance: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One plain head ``U = S^{-1}``, ``V = I / 2``.

    It equals the Bayes denoiser exactly when the signal and noise covariances
    are equal (``gamma^2 = xi^2``, Theorem 4.1); otherwise no single head does.

    Parameters
    ----------
    noisy_covariance : ndarray of shape (p, p)
        ``S = Gamma + xi^2 I``.

    Returns
    -------
    U : ndarray of shape (p, p)
        Interaction matrix ``S^{-1}``, which reproduces the Bayes gate.
    V : ndarray of shape (p, p)
        Value matrix ``I / 2``.

    See Also
    --------
    two_head_construction : Exact for any signal and noise variances.

    Notes
    -----
    With ``U = S^{-1}`` the head on the noisy prompt law is
    ``V z + V sum_k beta_k(z) m_k``, while the Bayes denoiser multiplies
    ``z`` by ``gamma^2 / (gamma^2 + xi^2)`` and the barycentre by
    ``xi^2 / (gamma^2 + xi^2)``: one value matrix can apply both factors only
    when they are equal, and then ``V = I / 2`` (Theorem 4.1).

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Theorem 4.1 and Appendix C.5.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.constructions import single_head_construction
    >>> U, V = single_head_construction(4.0 * np.eye(2))  # gamma^2 = xi^2 = 2
    >>> float(U[0, 0]), float(V[0, 0])
    (0.25, 0.5)

    The head is then the Bayes denoiser:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.population import population_softmax_attention
    >>> means, weights = np.array([[3.0, 0.0], [0.0, 3.0]]), np.array([0.3, 0.7])
    >>> z = np.array([[1.0, 2.0], [-4.0, 0.5]])
    >>> head = population_softmax_attention(z, means, weights,
    ...                                     np.stack([4.0 * np.eye(2)] * 2), U, V)
    >>> bayes = BayesDenoiser(means, weights, covariance=2.0, noise_variance=2.0)
    >>> bool(np.allclose(head, bayes.fit(z).transform(z)))
    True
    """
    precision = np.linalg.inv(noisy_covariance)
    return (precision + precision.T) / 2, np.eye(precision.shape[0]) / 2


def two_head_construction(
    means: np.ndarray, component_variance: float, noise_variance: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two plain softmax heads whose sum is the Bayes denoiser (Theorem 4.1).

    For two components ``N(m_k, gamma^2 I)`` with ``||m_1|| = ||m_2||`` observed
    with noise ``N(0, xi^2 I)``, ``T_{U_1,V_1} + T_{U_2,V_2}`` on the noisy
    prompt law equals ``E[X | Z]`` for any component weights. With
    ``s = gamma^2 + xi^2`` and ``Delta = m_1 - m_2``::

        U_1 = gamma^2/(xi^2 s) I + (xi^2 - gamma^2)/(xi^2 s) m_2 Delta^T / <m_2, Delta>
        U_2 = the same with m_1 in place of m_2,

    ``V_1`` maps ``m_1`` to ``(xi^2/s) m_1`` and ``m_2`` to 0, ``V_2`` the
    reverse, both ``xi^2/(2s) I`` on the complement of ``span(m_1, m_2)``.
    Opposite means ``m_1 = -m_2 = m`` use the paper's second form with a unit
    ``n`` orthogonal to ``m``.

    Parameters
    ----------
    means : ndarray of shape (2, p)
        The two clean means ``m_1``, ``m_2``, of equal norms.
    component_variance : float
        ``gamma^2``, the variance of each clean component along every axis.
    noise_variance : float
        ``xi^2``.

    Returns
    -------
    U : ndarray of shape (2, p, p)
        Interaction matrices of the two heads.
    V : ndarray of shape (2, p, p)
        Value matrices of the two heads.

    See Also
    --------
    single_head_construction : One head, exact only when ``gamma^2 = xi^2``.
    in_context_construction : One residual head for every task at once.
    sk_softmix.SoftmaxAttentionDenoiser : Starts from this construction with
        ``residual=False, init="bayes"``.

    Notes
    -----
    Each value matrix keeps one mean and cancels the other, while the two
    linear parts add up to the shrinkage ``gamma^2 / s`` (Appendix C.6 of the
    paper). It stays exact for point masses (``gamma^2 = 0``, Remark 4.2).

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Theorem 4.1 and Appendix C.6.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.constructions import two_head_construction
    >>> means = np.array([[3.0, 0.0], [0.0, 3.0]])  # the paper's Figure 2 task
    >>> U, V = two_head_construction(means, 1.0, 4.0)
    >>> U.shape, V.shape
    ((2, 2, 2), (2, 2, 2))

    On the noisy prompt law the sum of the two heads is the Bayes denoiser,
    whatever the weights:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.population import population_softmax_attention
    >>> weights, noisy = np.array([0.3, 0.7]), np.stack([5.0 * np.eye(2)] * 2)
    >>> z = np.array([[1.0, 2.0], [-4.0, 0.5], [6.0, -3.0]])
    >>> heads = sum(population_softmax_attention(z, means, weights, noisy, U[h], V[h])
    ...             for h in range(2))
    >>> bayes = BayesDenoiser(means, weights, covariance=1.0, noise_variance=4.0)
    >>> bool(np.allclose(heads, bayes.fit(z).transform(z)))
    True
    """
    means = np.asarray(means, dtype=float)
    if means.shape[0] != 2 or means.ndim != 2:
        raise ValueError(f"means must have shape (2, p); got {means.shape}.")
    m1, m2 = means
    p = means.shape[1]
    gamma2, xi2 = float(component_variance), float(noise_variance)
    s = gamma2 + xi2
    norms = np.linalg.norm(means, axis=1)
    cosine = m1 @ m2 / max(norms[0] * norms[1], np.finfo(float).tiny)
    if cosine < -1 + 1e-9 or p == 1:
        return _opposite_means_construction((m1 - m2) / 2, gamma2, xi2)
    if cosine > 1 - 1e-9:
        raise ValueError("two_head_construction needs two distinct, non-parallel means.")
    delta = m1 - m2
    identity = np.eye(p)

    def interaction(anchor):
        return gamma2 / (xi2 * s) * identity + (xi2 - gamma2) / (xi2 * s) * np.outer(
            anchor, delta
        ) / (anchor @ delta)

    basis = np.stack([m1, m2], axis=1)  # (p, 2)
    coordinates = np.linalg.pinv(basis)  # (2, p): m_1 -> e_1, m_2 -> e_2, 0 off the span
    complement = identity - basis @ coordinates
    values = [
        xi2 / s * np.outer(mean, coordinates[k]) + xi2 / (2 * s) * complement
        for k, mean in enumerate((m1, m2))
    ]
    return np.stack([interaction(m2), interaction(m1)]), np.stack(values)


def _opposite_means_construction(mean, gamma2, xi2):
    p = mean.shape[0]
    s = gamma2 + xi2
    e = mean / np.linalg.norm(mean)
    if p == 1:
        # No orthogonal direction: the two heads split one head U = 1/s, V = c.
        U = np.full((2, 1, 1), 1 / s)
        V = np.full((2, 1, 1), xi2 / (2 * s))
        if not np.isclose(gamma2, xi2):
            raise ValueError("In one dimension two plain heads are exact only when gamma^2 = xi^2.")
        return U, V
    # any unit vector orthogonal to e
    n = np.linalg.svd(e[None, :])[2][1]
    P = np.outer(e, e)
    Q = np.eye(p) - P
    U = np.stack([(np.eye(p) + sign * np.outer(n, e)) / s for sign in (1, -1)])
    V = np.stack(
        [
            xi2 / (2 * s) * P
            + gamma2 / (2 * s) * Q
            + sign * (gamma2 - xi2) / (2 * s) * np.outer(e, n)
            for sign in (1, -1)
        ]
    )
    return U, V
