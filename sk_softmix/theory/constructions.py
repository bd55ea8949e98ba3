"""Closed-form attention parameters that equal the Bayes denoiser.

The population constructions of Gabet, Boursier & Boyer (2026, Section 4)
are exact for a prompt of infinite length and serve as initialisations
(``init="bayes"``) and test oracles. The denoisers' linear starts (the best
affine and linear maps) are in :mod:`sk_softmix.theory.affine_maps`. All
matrices are NumPy float64.
"""

import warnings

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
    Along an eigenvector of ``S`` whose eigenvalue is below ``xi^2`` (no
    signal variance: a constant feature, or a noise variance larger than the
    data's), the head averages instead (``U = 0``, ``V = 1``, skip 0 there):
    the posterior mean of a signal that is constant along that direction.

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
    >>> from sk_softmix.theory.constructions import in_context_construction
    >>> U, V, skip = in_context_construction(5.0 * np.eye(2), 4.0)
    >>> float(U[0, 0]), float(V[0, 0]), round(float(skip[0, 0]), 2)
    (0.2, 0.8, -0.6)

    The same parameters give the Bayes denoiser of two different tasks, on
    their noisy prompt laws:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.population import population_softmax_attention
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
    # Along a direction where S is below xi^2 (a constant feature, or a noise
    # variance larger than the data's) there is no signal to tilt towards,
    # and S^{-1} would put a skip near -2 xi^2 / S on it: average instead
    # (U = 0, V = 1, skip 0), the posterior mean when the signal is constant.
    inverse, signal, matrix = _eigenbasis(noisy_covariance, noise_variance)
    v = np.where(signal, noise_variance * inverse, 1.0)
    return matrix(inverse), matrix(v), matrix(np.where(signal, 1.0 - 2.0 * v, 0.0))


def key_bias_construction(
    means: np.ndarray,
    noisy_covariance: np.ndarray,
    noise_variance: float,
    *,
    key_norm: float = 0.0,
    span_tol: float | None = None,
) -> dict:
    """One key-bias head, a skip map and an intercept equal to the Bayes denoiser.

    This package's extension (user guide, "Key-bias heads"). A head that
    scores ``z_i^T (U z + b) - 1/2 z_i^T W z_i``
    (:func:`sk_softmix.attention.key_bias`) has, on the prompt law ``sum_k
    pi_k N(m_k, S)``, a softmax gate over the components and affine
    experts. In the whitened coordinates ``y = S^{-1/2} z``, with ``Pi`` the
    orthogonal projector on the span of the centred whitened means and
    ``w = key_norm``::

        U = (1 + w) Pi,  W = w Pi,  V = xi^2 (1 + w) Pi,
        A = I - xi^2 S^{-1} - V,  t = -xi^2 b + xi^2 (I - Pi) m_1

    (mapped back by ``S^{-1/2}`` on each side; ``A``, ``t`` and the means in
    ``z``'s units) and ``b`` in the span solving ``m_k^T P^{-1} b + 1/2
    m_k^T P^{-1} m_k = c`` for every ``k``, ``P = I + W``, make the gate the
    Bayes gate and ``f(z) = A z + t + V sum_i softmax_i(score_i) z_i``
    equal ``E[X | Z = z]`` whatever the means' norms. The equations for
    ``b`` have a solution when the means are affinely independent (``K <=
    p + 1`` components in general position) or lie on one sphere of the
    ``S^{-1}`` metric; equal ``S^{-1}``-norms give ``b = 0``, the paper's
    case. Four means of the plane with one inside the triangle of the
    others lie on no ellipse: no head of this form, with any key norm, is
    exact there.

    ``w = 0`` is a dot-product head with a key offset. ``w > 0`` adds the
    key norm of a Gaussian kernel of relative width ``1 / (1 + w)`` along
    the span: the same function on the prompt law, but on a finite prompt
    each expert averages the tokens near the query rather than a tilt far
    into a component's tail (see Notes).

    Parameters
    ----------
    means : ndarray of shape (K, p)
        Component means ``m_k``.
    noisy_covariance : ndarray of shape (p, p)
        ``S = Gamma + xi^2 I``, shared by the components. Eigenvalues below
        ``xi^2`` (a negative ``Gamma``, as an estimate can give) are raised
        to it: there the signal is constant and the head returns its mean.
    noise_variance : float
        ``xi^2``.
    key_norm : float, default=0.0
        ``w >= 0``, the key norm's weight relative to ``S^{-1}`` on the span
        (a negative one raises ``ValueError``).
    span_tol : float, default=None
        Singular values of the centred whitened means at or below it are
        dropped from the span (the means are first projected on what is
        kept). ``None``: ``1e-10`` times the largest. An estimator passes
        the sampling error of estimated means here.

    Returns
    -------
    dict
        ``U``, ``V``, ``W``, ``skip`` (``A``), each (p, p), ``b`` and
        ``intercept`` (``t``), each (p,). Where no exact ``b`` exists, the
        least-squares one, with a warning.

    See Also
    --------
    in_context_construction : The paper's head, without the key terms (equal
        norms).
    sk_softmix.theory.population.population_key_bias_attention : The head on the
        prompt law.

    Notes
    -----
    On the prompt law the score tilts each component to precision ``P =
    S^{-1} + W`` and mean ``P^{-1}(S^{-1} m_k + U z + b)``, and the gate's
    term in ``m_k`` alone is ``m_k^T S^{-1} P^{-1} b - 1/2 m_k^T (S^{-1} -
    S^{-1} P^{-1} S^{-1}) m_k``. Without ``b`` that is the Bayes gate's
    ``-1/2 m_k^T S^{-1} m_k`` only as ``W -> infinity``; with ``W = U = c
    S^{-1}`` it is the Bayes gate at temperature ``c / (1 + c)``. The offset
    makes it exact at any ``w``.

    On a prompt of ``L`` tokens each expert is a weighted average, whose
    variance grows as the weights concentrate on few tokens. With ``w =
    0`` a query ``z`` of component ``k`` tilts that component towards
    ``m_k + z + S b``, about half a mean's length beyond ``m_k``: on the
    three-component task of norms 0, 5 and 7 (``S = 2 I``, 20,000 tokens)
    the untrained head is 25% above the Bayes risk, and 4.2% with ``w =
    4``. Outside the span ``U = V = 0``: the Bayes denoiser is linear
    there, and a tilt would only cost tokens.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.constructions import key_bias_construction
    >>> from sk_softmix.theory.population import population_key_bias_attention
    >>> means = np.array([[4.0, 0.0], [0.0, 1.0], [-2.0, -2.0]])  # three norms
    >>> weights = np.array([0.2, 0.5, 0.3])
    >>> bayes = BayesDenoiser(means, weights, covariance=1.0, noise_variance=4.0)
    >>> z = np.array([[1.0, 2.0], [-4.0, 0.5], [6.0, -3.0]])
    >>> for w in (0.0, 3.0):
    ...     heads = key_bias_construction(means, 5.0 * np.eye(2), 4.0, key_norm=w)
    ...     head = population_key_bias_attention(
    ...         z, means, weights, np.stack([5.0 * np.eye(2)] * 3),
    ...         heads["U"], heads["V"], heads["W"], heads["b"])
    ...     print(np.allclose(z @ heads["skip"].T + heads["intercept"] + head,
    ...                       bayes.fit(z).transform(z)))
    True
    True
    """
    if not key_norm >= 0:
        raise ValueError(f"key_norm must be >= 0 (a kernel's weight); got {key_norm}.")
    means = np.atleast_2d(np.asarray(means, dtype=float))
    n_components, p = means.shape
    eigenvalues, eigenvectors = np.linalg.eigh((noisy_covariance + noisy_covariance.T) / 2)
    # a negative Gamma estimate is no signal: S >= xi^2 (and > 0 for xi^2 = 0)
    floor = max(noise_variance, 1e-12 * max(eigenvalues.max(), 1e-300))
    root_precision = (eigenvectors / np.sqrt(np.maximum(eigenvalues, floor))) @ eigenvectors.T
    whitened = means @ root_precision  # S^{-1/2} m_k (symmetric root)
    centre = whitened.mean(axis=0)
    _, singular, directions = np.linalg.svd(whitened - centre, full_matrices=False)
    tol = 1e-10 * singular.max(initial=0.0) if span_tol is None else span_tol
    basis = directions[singular > tol].T  # (p, r): orthonormal, the means' span
    span = basis @ basis.T
    whitened = centre + (whitened - centre) @ span
    # the gate's equations m_k^T P^{-1} b + 1/2 m_k^T P^{-1} m_k = c in the
    # whitened coordinates, b = basis beta, P^{-1} = I - w / (1 + w) Pi
    tilted = whitened - key_norm / (1.0 + key_norm) * whitened @ span
    system = np.hstack([tilted @ basis, -np.ones((n_components, 1))])
    target = -0.5 * np.einsum("kp,kp->k", tilted, whitened)
    solution = np.linalg.lstsq(system, target, rcond=None)[0]
    miss = np.abs(system @ solution - target).max()
    if miss > 1e-9 * max(1.0, np.abs(target).max()):
        warnings.warn(
            "key_bias_construction: no key offset b gives every component its "
            f"Bayes gate (equations missed by {miss:.3g}): the means are not affinely "
            "independent and not on one sphere of the S^-1 metric. The "
            "least-squares b is returned; the head is not the Bayes denoiser.",
            UserWarning,
            stacklevel=2,
        )
    offset = basis @ solution[:-1]

    def unwhitened(matrix):
        return root_precision @ matrix @ root_precision

    V = unwhitened(noise_variance * (1.0 + key_norm) * span)
    return {
        "U": unwhitened((1.0 + key_norm) * span),
        "V": V,
        "W": unwhitened(key_norm * span),
        "skip": np.eye(p) - noise_variance * unwhitened(np.eye(p)) - V,
        "b": root_precision @ offset,
        # the head's experts carry the means along the span; the rest of
        # every mean (one vector, the span being their differences') is here
        "intercept": noise_variance * root_precision @ (centre - centre @ span - offset),
    }


def _eigenbasis(noisy_covariance, noise_variance):
    """``1 / s`` on the eigenvalues ``s >= xi^2`` of ``S`` (0 below), that mask,
    and ``matrix(d)``, the symmetric matrix with eigenvalues ``d`` in ``S``'s basis."""
    eigenvalues, eigenvectors = np.linalg.eigh((noisy_covariance + noisy_covariance.T) / 2)
    signal = eigenvalues >= noise_variance
    inverse = np.where(signal, 1.0 / np.where(signal, eigenvalues, 1.0), 0.0)

    def matrix(diagonal):
        return (eigenvectors * diagonal) @ eigenvectors.T

    return inverse, signal, matrix


def single_head_construction(
    noisy_covariance: np.ndarray, noise_variance: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """One plain head ``U = S^{-1}``, ``V = I / 2``.

    It equals the Bayes denoiser exactly when the signal and noise covariances
    are equal (``gamma^2 = xi^2``, Theorem 4.1); otherwise no single head does.

    Parameters
    ----------
    noisy_covariance : ndarray of shape (p, p)
        ``S = Gamma + xi^2 I``.
    noise_variance : float, default=0.0
        ``xi^2``. When positive, directions where ``S`` is below it (no
        signal, e.g. a constant feature) get ``U = 0``, ``V = 1``: the head
        averages there instead of putting ``1 / S`` in the scores.

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
    >>> from sk_softmix.theory.constructions import single_head_construction
    >>> U, V = single_head_construction(4.0 * np.eye(2))  # gamma^2 = xi^2 = 2
    >>> float(U[0, 0]), float(V[0, 0])
    (0.25, 0.5)

    The head is then the Bayes denoiser:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.population import population_softmax_attention
    >>> means, weights = np.array([[3.0, 0.0], [0.0, 3.0]]), np.array([0.3, 0.7])
    >>> z = np.array([[1.0, 2.0], [-4.0, 0.5]])
    >>> head = population_softmax_attention(z, means, weights,
    ...                                     np.stack([4.0 * np.eye(2)] * 2), U, V)
    >>> bayes = BayesDenoiser(means, weights, covariance=2.0, noise_variance=2.0)
    >>> bool(np.allclose(head, bayes.fit(z).transform(z)))
    True
    """
    if noise_variance > 0:
        # as in_context_construction: average where S is below xi^2
        inverse, signal, matrix = _eigenbasis(noisy_covariance, noise_variance)
        return matrix(inverse), matrix(np.where(signal, 0.5, 1.0))
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
    >>> from sk_softmix.theory.constructions import two_head_construction
    >>> means = np.array([[3.0, 0.0], [0.0, 3.0]])  # the paper's Figure 2 task
    >>> U, V = two_head_construction(means, 1.0, 4.0)
    >>> U.shape, V.shape
    ((2, 2, 2), (2, 2, 2))

    On the noisy prompt law the sum of the two heads is the Bayes denoiser,
    whatever the weights:

    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.population import population_softmax_attention
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
    norms = np.linalg.norm(means, axis=1)
    if abs(norms[0] - norms[1]) > 1e-9 * max(norms.max(), np.finfo(float).tiny):
        raise ValueError(
            "two_head_construction is exact only for means of equal norms (Theorem 4.1); "
            f"got norms {norms[0]:.6g} and {norms[1]:.6g}. Centre the means on their "
            "midpoint (and shift the data by it) to make them equal."
        )
    return two_head_start(means, component_variance, noise_variance)


def two_head_start(means, component_variance, noise_variance):
    """:func:`two_head_construction`'s heads for any two means, as a training start.

    With means of unequal norms (a mixture fitted to data) the heads are not
    the Bayes denoiser, only near it; the estimators train from them.
    """
    m1, m2 = means
    p = means.shape[1]
    gamma2, xi2 = float(component_variance), float(noise_variance)
    s = gamma2 + xi2
    norms = np.linalg.norm(means, axis=1)
    cosine = m1 @ m2 / max(norms[0] * norms[1], np.finfo(float).tiny)
    if cosine > 1 - 1e-9:
        raise ValueError("two_head_construction needs two distinct, non-parallel means.")
    if cosine < -1 + 1e-9 or p == 1:
        return _opposite_means_construction((m1 - m2) / 2, gamma2, xi2)
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
