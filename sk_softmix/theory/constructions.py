"""Closed-form attention parameters: the Bayes denoiser and the linear starts.

The population constructions of Gabet, Boursier & Boyer (2026, Section 4)
are exact for a prompt of infinite length and serve as initialisations
(``init="bayes"``) and test oracles. The best affine and linear maps, and
heads that realise the affine one exactly on a given prompt, are the linear
starts of the denoisers (``init="linear"``). All matrices are NumPy float64.
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


def best_affine_map(
    noisy: np.ndarray, clean: np.ndarray | None = None, noise_variance: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The affine denoiser ``z -> A z + c`` of least mean squared error (a Wiener filter).

    With clean targets it is the least-squares regression of ``clean`` on
    ``noisy`` with an intercept. Without them, ``Z = X + N(0, xi^2 I)`` gives
    ``Cov(X, Z) = S - xi^2 I`` with ``S`` the covariance of ``Z``, so
    ``A = (S - xi^2 I)_+ S^{-1}`` and ``c = (I - A) zbar``, where ``(.)_+``
    clips negative eigenvalues to zero (a noise variance above the data's
    variance along a direction shrinks that direction to the mean).

    Parameters
    ----------
    noisy : ndarray of shape (n, p)
        Noisy observations ``z``.
    clean : ndarray of shape (n, p), default=None
        Their clean counterparts; when given, ``noise_variance`` is unused.
    noise_variance : float, default=None
        ``xi^2``, needed without ``clean``.

    Returns
    -------
    A : ndarray of shape (p, p)
        The linear part of the map.
    c : ndarray of shape (p,)
        Its constant.

    See Also
    --------
    best_linear_map : The same without the constant ``c``.
    sk_softmix.theory.risk.best_affine_risk : The risk of this map on a known mixture.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.constructions import best_affine_map
    >>> rng = np.random.default_rng(0)
    >>> X = 2.0 + rng.normal(size=(20_000, 1))  # signal variance 1
    >>> Z = X + rng.normal(size=X.shape)  # noise variance 1
    >>> A, c = best_affine_map(Z, noise_variance=1.0)
    >>> round(float(A[0, 0]), 1), round(float(c[0]), 1)  # shrink halfway to the mean
    (0.5, 1.0)
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    mean = noisy.mean(axis=0)
    centred = noisy - mean
    covariance = centred.T @ centred / len(noisy)
    if clean is not None:
        clean = np.asarray(clean, dtype=np.float64)
        clean_mean = clean.mean(axis=0)
        cross = (clean - clean_mean).T @ centred / len(noisy)  # Cov(X, Z)
        A = cross @ np.linalg.pinv(covariance, hermitian=True)
        return A, clean_mean - A @ mean
    A = _shrinkage(covariance, noise_variance)
    return A, mean - A @ mean


def best_linear_map(
    noisy: np.ndarray, clean: np.ndarray | None = None, noise_variance: float | None = None
) -> np.ndarray:
    """The linear denoiser ``z -> M z`` (no constant) of least mean squared error.

    ``M = E[X Z^T] E[Z Z^T]^{-1}``: with clean targets from the sample, and
    without them ``M = (Sigma - xi^2 I)_+ Sigma^{-1}`` with ``Sigma`` the
    second-moment matrix of ``Z``, negative eigenvalues clipped to zero. This
    is the best any stack of linear-attention layers can do (Section 4 of
    the paper).

    Parameters
    ----------
    noisy : ndarray of shape (n, p)
        Noisy observations ``z``.
    clean : ndarray of shape (n, p), default=None
        Their clean counterparts; when given, ``noise_variance`` is unused.
    noise_variance : float, default=None
        ``xi^2``, needed without ``clean``.

    Returns
    -------
    M : ndarray of shape (p, p)
        The map.

    See Also
    --------
    best_affine_map : With a constant, which a softmax head can supply.
    sk_softmix.theory.risk.best_linear_risk : The risk of this map on a known mixture.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.constructions import best_linear_map
    >>> best_linear_map(np.array([[2.0], [-2.0]]), noise_variance=1.0)  # 1 - 1/4
    array([[0.75]])
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    second_moment = noisy.T @ noisy / len(noisy)
    if clean is not None:
        cross = np.asarray(clean, dtype=np.float64).T @ noisy / len(noisy)  # E[X Z^T]
        return cross @ np.linalg.pinv(second_moment, hermitian=True)
    return _shrinkage(second_moment, noise_variance)


def _shrinkage(moment, noise_variance):
    """``(moment - xi^2 I)_+ moment^{-1}``: eigenvalues ``max(lambda - xi^2, 0) / lambda``."""
    eigenvalues, eigenvectors = np.linalg.eigh((moment + moment.T) / 2)
    safe = np.where(eigenvalues > 0, eigenvalues, 1.0)
    factors = np.where(eigenvalues > 0, np.clip(1 - noise_variance / safe, 0.0, None), 0.0)
    return (eigenvectors * factors) @ eigenvectors.T


def affine_heads(
    A: np.ndarray,
    c: np.ndarray,
    prompt: np.ndarray,
    n_heads: int,
    *,
    residual: bool,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Softmax heads (and skip map) whose sum is the affine map ``z -> A z + c``.

    The linear start of :class:`~sk_softmix.SoftmaxAttentionDenoiser`. A head
    with ``U = 0`` weighs every token equally and returns ``V zbar``, a
    constant (``zbar`` the prompt's mean); that is all the heads contribute:

    - ``residual=True``: skip ``A`` and head 0 with ``U = 0`` and
      ``V zbar = c``, namely ``V = (I - A) + (c - (I - A) zbar) zbar^T / ||zbar||^2``.
      For the unsupervised Wiener map ``c = (I - A) zbar``, so
      ``V = I - A = xi^2 S^{-1}``: the in-context construction of
      Proposition 4.4 with its gate switched off (``U = S^{-1} -> 0``).
    - ``residual=False`` (at least two heads): plain heads reach an affine map
      only in a limit. Head 1 has ``U = eps S^{-1}`` (``S`` the prompt's
      covariance) and ``V = A / eps``, so it returns ``A zbar / eps + A z``
      up to ``O(eps)``; head 0 (``U = 0``) cancels ``A zbar / eps`` and adds
      ``c``. ``eps = 1e-3 / p`` keeps the scores below about ``1e-3``.

    Any further head has ``V = 0`` (it contributes nothing) and a small
    random ``U``, so that training can grow it.

    Parameters
    ----------
    A : ndarray of shape (p, p)
        The linear part of the map.
    c : ndarray of shape (p,)
        Its constant.
    prompt : ndarray of shape (L, p)
        The tokens the heads attend over.
    n_heads : int
        At least 1 with ``residual=True``, 2 without.
    residual : bool
        Whether a skip map is available.
    random_state : int, RandomState instance or None, default=None
        Seeds the interaction matrices of the extra heads.

    Returns
    -------
    U : ndarray of shape (n_heads, p, p)
        Interaction matrices.
    V : ndarray of shape (n_heads, p, p)
        Value matrices.
    skip : ndarray of shape (p, p), or None when ``residual=False``
        The skip map ``A``.

    See Also
    --------
    best_affine_map : The map to start from.
    in_context_construction : The selective construction the residual start
        sits next to.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.constructions import affine_heads, best_affine_map
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(500, 2)) + [1.0, -2.0]
    >>> A, c = best_affine_map(Z, noise_variance=0.5)
    >>> U, V, skip = affine_heads(A, c, Z, 2, residual=True, random_state=0)
    >>> bool(np.allclose(V[0] @ Z.mean(axis=0), c) and np.all(U[0] == 0) and np.all(V[1] == 0))
    True
    """
    from sklearn.utils import check_random_state

    prompt = np.asarray(prompt, dtype=np.float64)
    p = prompt.shape[1]
    if not residual and n_heads < 2:
        raise ValueError(
            "Plain heads (residual=False) need n_heads >= 2 to represent an affine map: "
            "one head carries the constant and another the linear part; got n_heads=1."
        )
    random_state = check_random_state(random_state)
    mean = prompt.mean(axis=0)
    scale2 = max(float(np.mean(prompt**2)), np.finfo(float).tiny)
    U = random_state.normal(scale=0.5 / np.sqrt(p), size=(n_heads, p, p)) / scale2
    V = np.zeros((n_heads, p, p))
    identity = np.eye(p)
    floor = 1e-12 * scale2 * p  # a mean this close to 0 carries no constant
    if residual:
        U[0] = 0.0
        V[0] = identity - A + _through_mean(c - (identity - A) @ mean, mean, floor)
        return U, V, A
    centred = prompt - mean
    precision = np.linalg.pinv(centred.T @ centred / len(prompt), hermitian=True)
    epsilon = 1e-3 / p
    U[0], U[1] = 0.0, epsilon * precision
    V[0] = -A / epsilon + _through_mean(c, mean, floor)
    V[1] = A / epsilon
    return U, V, None


def _through_mean(vector, mean, floor):
    """The smallest matrix ``R`` with ``R mean = vector``, or 0 if ``||mean||^2 <= floor``.

    A prompt centred at the origin returns no constant through ``U = 0``;
    the affine map's constant is then dropped rather than divided by ~0.
    """
    norm2 = float(mean @ mean)
    if norm2 <= floor:
        return np.zeros((len(vector), len(mean)))
    return np.outer(vector, mean) / norm2
