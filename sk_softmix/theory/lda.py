"""One softmax head on an LDA population: effective coordinates (Section 3 of the paper).

Labels ``y`` in {-1, +1}, ``P(y = 1) = pi_+``, ``x | y = c ~ N(m_c, Gamma)``.
Tokens are ``(x_i, y_i)``, the query is ``(x, 0)`` and the prediction is the
last output coordinate. Only ``theta = (U11, u12, v21, v22)`` matter there::

    score(token i, query x) = x_i^T U11^T x + y_i u12^T x
    value read out           = v21^T x_i + v22 y_i

and on the population the head equals (Gabet, Boursier & Boyer 2026, eq. 6-7)::

    f_theta(x) = w^T x + b + r sigmoid(s0 + s^T x),
    w = U11 Gamma v21,  b = v21^T m_{-1} - v22,  r = v21^T (m_1 - m_{-1}) + 2 v22,
    s = 2 u12 + U11 (m_1 - m_{-1}),  s0 = log(pi_+ / (1 - pi_+)).

All functions are NumPy float64.
"""

import numpy as np
from scipy.special import expit


def class_statistics(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Class means, pooled covariance and prior of a two-class sample.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The points.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.

    Returns
    -------
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1``.
    covariance : ndarray of shape (d, d)
        Pooled within-class covariance ``sum_c pi_c Cov_c`` with the maximum
        likelihood (1/n_c) class covariances, as in
        ``LinearDiscriminantAnalysis(solver="lsqr")``.
    prior : float
        ``pi_+``, the fraction of positive labels.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import class_statistics
    >>> X = np.array([[0.0], [2.0], [4.0], [6.0]])
    >>> means, covariance, prior = class_statistics(X, np.array([-1, -1, 1, 1]))
    >>> means.ravel().tolist(), covariance.tolist(), prior
    ([1.0, 5.0], [[1.0]], 0.5)
    """
    means = np.stack([X[y == label].mean(axis=0) for label in (-1, 1)])
    centred = X - means[(y == 1).astype(int)]
    covariance = centred.T @ centred / len(X)
    return means, covariance, float(np.mean(y == 1))


def precision(covariance: np.ndarray) -> np.ndarray:
    """The inverse of a covariance matrix on its range, 0 off it.

    Eigenvalues below ``1e-8`` times the largest count as zero, as
    ``LinearDiscriminantAnalysis``'s SVD solver drops singular values of the
    scaled data below ``1e-4``: a constant feature, duplicated features or
    fewer samples than features then get a finite answer instead of a
    ``LinAlgError`` or weights near ``1e15``. Equals ``inv(covariance)`` on a
    well-conditioned matrix.

    Parameters
    ----------
    covariance : ndarray of shape (d, d)
        Symmetric positive semi-definite.

    Returns
    -------
    ndarray of shape (d, d)
        The pseudo-inverse.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import precision
    >>> precision(np.diag([4.0, 0.0])).tolist()  # the constant direction gets 0
    [[0.25, 0.0], [0.0, 0.0]]
    """
    eigenvalues, eigenvectors = np.linalg.eigh((covariance + covariance.T) / 2)
    largest = max(float(eigenvalues.max(initial=0.0)), 0.0)
    kept = eigenvalues > 1e-8 * largest if largest > 0 else np.zeros_like(eigenvalues, bool)
    inverse = np.where(kept, 1.0 / np.where(kept, eigenvalues, 1.0), 0.0)
    return (eigenvectors * inverse) @ eigenvectors.T


def lda_coordinates(
    means: np.ndarray, covariance: np.ndarray, prior: float
) -> tuple[np.ndarray, float]:
    """Bayes (LDA) score ``f*(x) = w*^T x + b*`` of a two-class Gaussian model.

    ``w* = Gamma^{-1} (m_1 - m_{-1})`` and
    ``b* = -1/2 (m_1^T Gamma^{-1} m_1 - m_{-1}^T Gamma^{-1} m_{-1}) + log(pi_+/(1-pi_+))``
    (eq. 5). With the statistics of :func:`class_statistics` these equal
    ``LinearDiscriminantAnalysis(solver="lsqr")``'s ``coef_`` and
    ``intercept_``.

    Parameters
    ----------
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1``.
    covariance : ndarray of shape (d, d)
        The shared class covariance ``Gamma``, positive definite.
    prior : float
        ``pi_+``.

    Returns
    -------
    w : ndarray of shape (d,)
        ``w*``.
    b : float
        ``b*``.

    See Also
    --------
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis : The same score
        estimated from data.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import lda_coordinates
    >>> w, b = lda_coordinates(np.array([[-1.0, 0.0], [1.0, 0.0]]), np.eye(2), 0.5)
    >>> w.tolist(), b
    ([2.0, 0.0], 0.0)

    From a sample's statistics, scikit-learn's LDA coefficients:

    >>> from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    >>> from sk_softmix.datasets import make_lda
    >>> from sk_softmix.theory.lda import class_statistics
    >>> X, y = make_lda(500, [[0.0, 1.0], [1.0, 0.0]], prior=0.6, random_state=0)
    >>> w, b = lda_coordinates(*class_statistics(X, y))
    >>> lda = LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
    >>> bool(np.allclose(lda.coef_[0], w) and np.isclose(lda.intercept_[0], b))
    True
    """
    precision_means = means @ precision(covariance)  # (2, d): Gamma^{-1} m_c
    w = precision_means[1] - precision_means[0]
    b = -0.5 * (means[1] @ precision_means[1] - means[0] @ precision_means[0])
    return w, float(b + np.log(prior / (1 - prior)))


def effective_coordinates(
    U11: np.ndarray,
    u12: np.ndarray,
    v21: np.ndarray,
    v22: float,
    means: np.ndarray,
    covariance: np.ndarray,
    prior: float,
) -> dict:
    """Effective coordinates ``(w, b, r, s, s0)`` of one head (eq. 7).

    ``w = U11 Gamma v21``, ``b = v21^T m_{-1} - v22``,
    ``r = v21^T (m_1 - m_{-1}) + 2 v22``, ``s = 2 u12 + U11 (m_1 - m_{-1})``
    and ``s0 = log(pi_+ / (1 - pi_+))``: on the population the head's score
    is ``w^T x + b + r sigmoid(s0 + s^T x)`` (eq. 6).

    Parameters
    ----------
    U11 : ndarray of shape (d, d)
        Feature-feature block of the key-query matrix: the score of token
        ``i`` for query ``x`` has the term ``x_i^T U11^T x``.
    u12 : ndarray of shape (d,)
        Label-feature block: the score has the term ``y_i u12^T x``.
    v21 : ndarray of shape (d,)
        Read-out of the token's features: the value read out of token ``i``
        is ``v21^T x_i + v22 y_i``.
    v22 : float
        Read-out of the token's label.
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1``.
    covariance : ndarray of shape (d, d)
        The shared class covariance ``Gamma``.
    prior : float
        ``pi_+``.

    Returns
    -------
    dict
        Keys ``w`` (d,), ``b`` (float), ``r`` (float), ``s`` (d,) and ``s0``
        (float).

    See Also
    --------
    effective_score : The score these coordinates define.
    lda_coordinates : The Bayes coordinates ``(w*, b*)`` to compare ``w``,
        ``b`` with.

    Notes
    -----
    Every critical point of the logistic risk in these coordinates is a
    global minimum (Theorem 3.1): the minimisers are the two Bayes manifolds
    ``E_1 = {(w*, b*, 0, s)}`` (no sigmoid) and
    ``E_2 = {(w*, b* - r sigmoid(s0), r, 0)}`` (a constant sigmoid absorbed in
    the bias).

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       eq. 6-7 and Theorem 3.1.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import effective_coordinates
    >>> coords = effective_coordinates(np.eye(1), np.zeros(1), np.ones(1), 0.0,
    ...                                np.array([[-1.0], [1.0]]), np.eye(1), 0.5)
    >>> coords["w"].tolist(), coords["b"], coords["r"], coords["s"].tolist()
    ([1.0], -1.0, 2.0, [2.0])
    """
    w, b, r, s = _eq7(U11, u12, v21, v22, means[0], means[1] - means[0], covariance)
    return {"w": w, "b": float(b), "r": float(r), "s": s, "s0": float(np.log(prior / (1 - prior)))}


def _eq7(U11, u12, v21, v22, m_minus, delta, covariance):
    """The paper's eq. 7, ``(w, b, r, s)`` from a head's blocks, for NumPy
    arrays and torch tensors alike (gradient descent differentiates it)."""
    return (
        U11 @ covariance @ v21,  # w
        v21 @ m_minus - v22,  # b
        v21 @ delta + 2 * v22,  # r
        2 * u12 + U11 @ delta,  # s
    )


def effective_score(X: np.ndarray, coordinates: dict) -> np.ndarray:
    """``f(x) = w^T x + b + r sigmoid(s0 + s^T x)`` for each row of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The points.
    coordinates : dict
        As returned by :func:`effective_coordinates`.

    Returns
    -------
    ndarray of shape (n,)
        The score of each point; positive favours the class +1.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import effective_score
    >>> coords = {"w": np.ones(1), "b": 0.0, "r": 2.0, "s": np.zeros(1), "s0": 0.0}
    >>> effective_score(np.array([[1.0]]), coords).tolist()
    [2.0]
    """
    c = coordinates
    return X @ c["w"] + c["b"] + c["r"] * expit(c["s0"] + X @ c["s"])


def lda_construction(
    means: np.ndarray, covariance: np.ndarray, prior: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One head whose population score is the Bayes score (Lemma B.3).

    Every case sets ``u12 = -1/2 U11 (m_1 - m_{-1})``, so ``s = 0`` and the gate
    is the constant ``pi_+``:

    - ``pi_+ != 1/2``: ``U11 = I``, ``v21 = Gamma^{-1} w*``,
      ``v22 = (b* - v21^T mbar) / (2 pi_+ - 1)``, ``mbar`` the prior-weighted mean;
    - ``pi_+ = 1/2``, ``m_1 != -m_{-1}``: ``v21 = (b*/||mbar||^2) mbar`` (any
      nonzero vector orthogonal to ``mbar`` if ``b* = 0``), ``a = Gamma v21``,
      ``U11 = w* a^T / ||a||^2``, ``v22 = 0``;
    - ``pi_+ = 1/2``, ``m_1 = -m_{-1}``: ``U11 = I``, ``v21 = Gamma^{-1} w*``,
      ``v22 = 0``.

    Parameters
    ----------
    means : ndarray of shape (2, d)
        ``m_{-1}`` then ``m_1``.
    covariance : ndarray of shape (d, d)
        The shared class covariance ``Gamma``, positive definite.
    prior : float
        ``pi_+``.

    Returns
    -------
    U11 : ndarray of shape (d, d)
        Feature-feature block of the key-query matrix.
    u12 : ndarray of shape (d,)
        Label-feature block of the key-query matrix.
    v21 : ndarray of shape (d,)
        Read-out of the features.
    v22 : float
        Read-out of the label.

    See Also
    --------
    sk_softmix.SoftmaxAttentionClassifier : ``init="bayes"`` starts from this
        construction on the prompt's statistics.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Lemma B.3 (Appendix B.2).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import effective_coordinates, lda_construction
    >>> means, cov = np.array([[0.0, 1.0], [1.0, 0.0]]), np.eye(2)
    >>> theta = lda_construction(means, cov, 0.6)
    >>> coords = effective_coordinates(*theta, means, cov, 0.6)
    >>> coords["s"].tolist()  # the gate is constant
    [0.0, 0.0]

    and the head's score is the Bayes score:

    >>> from sk_softmix.theory.lda import effective_score, lda_coordinates
    >>> w, b = lda_coordinates(means, cov, 0.6)
    >>> X = np.random.default_rng(0).normal(size=(5, 2))
    >>> bool(np.allclose(effective_score(X, coords), X @ w + b))
    True
    """
    d = means.shape[1]
    w_star, b_star = lda_coordinates(means, covariance, prior)
    delta = means[1] - means[0]
    mean = (1 - prior) * means[0] + prior * means[1]
    scale = max(np.abs(means).max(), 1.0)
    v22 = 0.0
    if not np.isclose(prior, 0.5):
        U11 = np.eye(d)
        v21 = precision(covariance) @ w_star
        v22 = (b_star - v21 @ mean) / (2 * prior - 1)
    elif np.linalg.norm(mean) <= 1e-12 * scale:
        U11 = np.eye(d)
        v21 = precision(covariance) @ w_star
    else:
        if abs(b_star) > 1e-12:
            v21 = b_star / (mean @ mean) * mean
        else:
            v21 = np.linalg.svd(mean[None, :])[2][-1]  # unit, orthogonal to mbar
            if d == 1:
                raise ValueError("In one dimension with b* = 0 and mbar != 0 no v21 exists.")
        a = covariance @ v21
        U11 = np.outer(w_star, a) / (a @ a)
    return U11, -0.5 * U11 @ delta, v21, float(v22)


def krylov_basis(mean: np.ndarray, covariance: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis of the Krylov space ``K = span{m, Gamma m, ..., Gamma^{d-1} m}``.

    Theorem 3.6's invariant subspace asks ``v21`` in ``K-perp``, which
    ``Gamma`` maps into itself: that is what keeps the constraint under the
    flow, where orthogonality to ``m`` alone would not survive.

    Parameters
    ----------
    mean : ndarray of shape (d,) or (k, d)
        ``m``, with ``m_1 = -m_{-1} = m``; several rows span the block
        Krylov space of all of them (the smallest ``Gamma``-invariant space
        that holds each row), as for more than two classes.
    covariance : ndarray of shape (d, d)
        The shared class covariance ``Gamma``.
    rtol : float, default=1e-10
        A new direction counts when its part outside the basis so far is
        above ``rtol`` times its own length before projection (``||Gamma||
        ||q||`` for a direction ``Gamma q``; the longest row for a row of
        ``mean``): Arnoldi iteration, block by block.

    Returns
    -------
    ndarray of shape (d, dim K)
        Orthonormal columns spanning ``K`` (no column when ``m = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.lda import krylov_basis
    >>> krylov_basis(np.array([1.0, 0.0, 0.0]), np.eye(3)).shape  # Gamma = I: K = span(m)
    (3, 1)
    >>> krylov_basis(np.array([1.0, 1.0, 0.0]), np.diag([1.0, 2.0, 3.0])).shape
    (3, 2)
    """
    starts = np.atleast_2d(np.asarray(mean, dtype=float))
    covariance = np.asarray(covariance, dtype=float)
    d = starts.shape[1]
    basis = np.zeros((d, 0))

    def add(candidate, reference_length):
        nonlocal basis
        for _ in range(2):  # Gram-Schmidt twice: one pass loses orthogonality
            candidate = candidate - basis @ (basis.T @ candidate)
        length = np.linalg.norm(candidate)
        if length > rtol * reference_length and length > 0:
            basis = np.column_stack([basis, candidate / length])

    longest = np.linalg.norm(starts, axis=1).max()
    for row in starts:
        add(row, longest)
    scale = np.linalg.norm(covariance, 2)
    expanded = 0  # columns whose image under Gamma is already in the basis
    while expanded < basis.shape[1] < d:
        add(covariance @ basis[:, expanded], scale)
        expanded += 1
    return basis
