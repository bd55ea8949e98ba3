"""The denoisers' linear special case: the best affine and linear maps, and
attention heads that equal the affine one exactly on a given prompt.

They are the linear starts of the denoisers (``init="linear"``); the Bayes
constructions are in :mod:`sk_softmix.theory.constructions`. All matrices
are NumPy float64.
"""

import numpy as np


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
    >>> from sk_softmix.theory.affine_maps import best_affine_map
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


def leave_one_out_affine_errors(noisy: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """Each pair's squared error under the best affine map fitted without it.

    The least-squares fit of ``clean`` on ``[noisy, 1]`` (that of
    :func:`best_affine_map`, minimum norm where the design is rank-deficient)
    has fitted values ``H clean`` with ``H`` the projection onto the design's
    columns; leaving pair ``i`` out changes its residual ``r_i`` to
    ``r_i / (1 - H_ii)``. A pair of leverage 1 (``n <= p + 1`` points, or a
    point alone in a direction) is fitted exactly whatever its target: its
    held-out error is unbounded, returned as ``inf``.

    Parameters
    ----------
    noisy : ndarray of shape (n, p)
        Noisy observations ``z_i``.
    clean : ndarray of shape (n, p)
        Their clean counterparts ``x_i``.

    Returns
    -------
    ndarray of shape (n,)
        ``||x_i - L_{-i}(z_i)||^2``, with ``L_{-i}`` the best affine map of
        the other pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.theory.affine_maps import leave_one_out_affine_errors
    >>> Z = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> errors = leave_one_out_affine_errors(Z, 2 * Z + 1)  # an exact line
    >>> bool(np.all(errors < 1e-20))
    True
    >>> leave_one_out_affine_errors(Z[:2], Z[:2])  # two points fix a line
    array([inf, inf])
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    clean = np.asarray(clean, dtype=np.float64)
    design = np.column_stack([noisy - noisy.mean(axis=0), np.ones(len(noisy))])
    basis, singular, _ = np.linalg.svd(design, full_matrices=False)
    rank = int(np.sum(singular > singular.max() * max(design.shape) * np.finfo(float).eps))
    basis = basis[:, :rank]
    leverage = np.sum(basis**2, axis=1)
    residual = clean - basis @ (basis.T @ clean)
    errors = np.full(len(noisy), np.inf)
    free = 1.0 - leverage > 1e-9
    errors[free] = np.sum((residual[free] / (1.0 - leverage[free])[:, None]) ** 2, axis=1)
    return errors


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
    >>> from sk_softmix.theory.affine_maps import best_linear_map
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
    >>> from sk_softmix.theory.affine_maps import affine_heads, best_affine_map
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
