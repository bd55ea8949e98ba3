"""Gaussian-mixture algebra behind the Bayes and plug-in denoisers.

Model (Section 4 of the paper): ``X ~ sum_k pi_k N(m_k, Gamma_k)`` and the noisy
observation is ``Z = X + N(0, xi^2 I)``. Given ``Z = z`` the component ``k``
has posterior weight ``beta_k(z)`` proportional to ``pi_k N(z; m_k, S_k)``
and, inside component ``k``, ``X`` is Gaussian with mean
``m_k + Gamma_k S_k^{-1} (z - m_k)``. Everything here is NumPy in float64;
softmax weights are computed from log-densities so that no query of finite
magnitude produces NaN.
"""

from numbers import Real

import numpy as np
from scipy import linalg
from scipy.special import softmax

# Relative tolerance for "symmetric" and "positive semi-definite": loose enough
# for covariances estimated from data, tight enough to catch a wrong matrix.
_MATRIX_RTOL = 1e-8
# posterior_mean / posterior_spread process queries in blocks whose (K, n, p)
# expert array holds at most this many doubles (32 MiB).
_BLOCK_ELEMENTS = 1 << 22
# How far the weights may drift from summing to one before it is an error
# rather than rounding.
_WEIGHTS_ATOL = 1e-8


def _as_float_array(value, name: str) -> np.ndarray:
    try:
        array = np.array(value, dtype=np.float64)  # a copy: the caller may change theirs
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers; got {value!r}.") from exc
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must contain only finite values (no NaN or inf).")
    return array


def _check_covariance_matrices(covariances: np.ndarray, name: str) -> np.ndarray:
    """Symmetrise a (K, p, p) stack after checking it is symmetric PSD."""
    scale = np.max(np.abs(covariances), axis=(1, 2), initial=0.0)
    asymmetry = np.max(
        np.abs(covariances - covariances.transpose(0, 2, 1)), axis=(1, 2), initial=0.0
    )
    bad = np.flatnonzero(asymmetry > _MATRIX_RTOL * np.maximum(scale, 1.0))
    if bad.size:
        raise ValueError(
            f"{name} must be symmetric; matrix {bad[0]} differs from its "
            f"transpose by up to {asymmetry[bad[0]]:.3g}."
        )
    symmetric = 0.5 * (covariances + covariances.transpose(0, 2, 1))
    smallest = np.linalg.eigvalsh(symmetric)[:, 0]
    bad = np.flatnonzero(smallest < -_MATRIX_RTOL * np.maximum(scale, 1.0))
    if bad.size:
        raise ValueError(
            f"{name} must be positive semi-definite; matrix {bad[0]} has the "
            f"eigenvalue {smallest[bad[0]]:.6g}."
        )
    if np.any(smallest < 0):
        # Rounding-level negative eigenvalues would make square roots NaN later.
        symmetric = psd_part(symmetric)
    return symmetric


def check_mixture(means, weights=None, covariance=1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a Gaussian mixture and bring it to one canonical form.

    Parameters
    ----------
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions ``pi_k``: non-negative, summing to one (a drift of
        up to 1e-8 is renormalised away). ``None`` means equal weights.
    covariance : float, array-like of shape (n_features, n_features) or \
            (n_components, n_features, n_features), default=1.0
        Component covariances ``Gamma_k``: a non-negative scalar ``gamma^2``
        (shared ``gamma^2 I``), one shared symmetric positive semi-definite
        matrix, or one such matrix per component.

    Returns
    -------
    means : ndarray of shape (n_components, n_features), float64
    weights : ndarray of shape (n_components,), float64, summing to one
    covariances : ndarray of shape (n_components, n_features, n_features)
        Symmetric positive semi-definite, float64.

    Raises
    ------
    ValueError
        Naming the argument, the shape expected and the shape received.
    """
    means = _as_float_array(means, "means")
    if means.ndim != 2 or means.shape[0] < 1 or means.shape[1] < 1:
        raise ValueError(
            "means must be a 2-D array of shape (n_components, n_features) with "
            f"at least one component and one feature; got shape {means.shape}."
        )
    n_components, n_features = means.shape

    if weights is None:
        weights = np.full(n_components, 1.0 / n_components)
    else:
        weights = _as_float_array(weights, "weights")
        if weights.shape != (n_components,):
            raise ValueError(
                f"weights must have shape (n_components,) = ({n_components},) to "
                f"match means; got shape {weights.shape}."
            )
        if np.any(weights < 0):
            raise ValueError(f"weights must be non-negative; got {weights}.")
        total = weights.sum()
        if abs(total - 1.0) > _WEIGHTS_ATOL:
            raise ValueError(f"weights must sum to 1; they sum to {total!r}.")
        weights = weights / total

    covariance = _as_float_array(covariance, "covariance")
    full_shape = (n_components, n_features, n_features)
    if covariance.ndim == 0:
        if covariance < 0:
            raise ValueError(
                f"A scalar covariance (gamma^2) must be non-negative; got {float(covariance)!r}."
            )
        covariances = np.broadcast_to(float(covariance) * np.eye(n_features), full_shape).copy()
    elif covariance.ndim == 2 and covariance.shape == full_shape[1:]:
        covariances = np.broadcast_to(covariance, full_shape).copy()
    elif covariance.ndim == 3 and covariance.shape == full_shape:
        covariances = covariance.copy()
    else:
        raise ValueError(
            "covariance must be a scalar, an array of shape (n_features, "
            f"n_features) = {full_shape[1:]} or an array of shape (n_components, "
            f"n_features, n_features) = {full_shape}; got shape {covariance.shape}."
        )
    covariances = _check_covariance_matrices(covariances, "covariance")
    return means, weights, covariances


def check_noise_variance(noise_variance, *, allow_zero: bool = False) -> float:
    """Return ``noise_variance`` (xi^2) as a float after checking its range.

    Positive and finite; zero is accepted only with ``allow_zero=True``.
    """
    if isinstance(noise_variance, bool) or not isinstance(noise_variance, Real | np.ndarray):
        raise ValueError(f"noise_variance (xi^2) must be a real number; got {noise_variance!r}.")
    value = np.asarray(noise_variance, dtype=np.float64)
    if value.ndim != 0:
        raise ValueError(f"noise_variance (xi^2) must be a scalar; got shape {value.shape}.")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"noise_variance (xi^2) must be finite and {bound}; got {value!r}.")
    return value


def psd_part(matrices) -> np.ndarray:
    """Nearest symmetric positive semi-definite matrix in Frobenius norm.

    Parameters
    ----------
    matrices : array-like of shape (p, p) or (n_matrices, p, p)

    Returns
    -------
    ndarray of the same shape, float64
        The symmetric part ``(A + A^T) / 2`` with its negative eigenvalues
        set to zero.
    """
    matrices = np.asarray(matrices, dtype=np.float64)
    if matrices.ndim not in (2, 3) or matrices.shape[-1] != matrices.shape[-2]:
        raise ValueError(
            "psd_part expects an array of shape (p, p) or (n_matrices, p, p); "
            f"got shape {matrices.shape}."
        )
    symmetric = 0.5 * (matrices + np.swapaxes(matrices, -1, -2))
    eigenvalues, eigenvectors = np.linalg.eigh(symmetric)
    clipped = (eigenvectors * np.maximum(eigenvalues, 0.0)[..., None, :]) @ np.swapaxes(
        eigenvectors, -1, -2
    )
    return 0.5 * (clipped + np.swapaxes(clipped, -1, -2))


def covariance_sqrt(covariances: np.ndarray) -> np.ndarray:
    """Symmetric square roots ``A_k = A_k^T`` with ``A_k A_k^T = Gamma_k``.

    Unlike a Cholesky factor this exists for singular covariances too.

    Parameters
    ----------
    covariances : ndarray of shape (n_components, p, p), symmetric PSD

    Returns
    -------
    ndarray of shape (n_components, p, p)
    """
    eigenvalues, eigenvectors = np.linalg.eigh(covariances)
    roots = np.sqrt(np.maximum(eigenvalues, 0.0))
    # (K, p, p) * (K, 1, p) scales column j by sqrt(lambda_j); @ V^T -> (K, p, p)
    root = (eigenvectors * roots[:, None, :]) @ eigenvectors.transpose(0, 2, 1)
    # Exactly symmetric, so callers may multiply by A_k in place of A_k^T.
    return 0.5 * (root + root.transpose(0, 2, 1))


def noisy_choleskys(noisy_covariances: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of the S_k, with an error naming the bad one."""
    factors = np.empty_like(noisy_covariances)
    for k, matrix in enumerate(noisy_covariances):
        try:
            factors[k] = linalg.cholesky(matrix, lower=True)
        except linalg.LinAlgError as exc:
            eigenvalues = np.linalg.eigvalsh((matrix + matrix.T) / 2)
            raise ValueError(
                f"noisy_covariances[{k}] must be symmetric positive definite; its "
                f"eigenvalues run from {eigenvalues[0]:.3g} to {eigenvalues[-1]:.3g}, "
                "singular to float64 precision (for BayesDenoiser, Gamma_k + xi^2 I: "
                "use a larger noise_variance or a better-conditioned covariance)."
            ) from exc
    return factors


def _check_posterior_inputs(Z, means, weights, noisy_covariances, signal_covariances):
    Z = np.asarray(Z, dtype=np.float64)
    means = np.asarray(means, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    noisy_covariances = np.asarray(noisy_covariances, dtype=np.float64)
    if means.ndim != 2:
        raise ValueError(
            f"means must have shape (n_components, n_features); got shape {means.shape}."
        )
    n_components, n_features = means.shape
    if Z.ndim != 2 or Z.shape[1] != n_features:
        raise ValueError(
            f"Z must have shape (n_samples, {n_features}) to match means; got shape {Z.shape}."
        )
    expected = (n_components, n_features, n_features)
    if weights.shape != (n_components,):
        raise ValueError(f"weights must have shape ({n_components},); got shape {weights.shape}.")
    if noisy_covariances.shape != expected:
        raise ValueError(
            f"noisy_covariances must have shape {expected}; got shape {noisy_covariances.shape}."
        )
    if signal_covariances is not None:
        signal_covariances = np.asarray(signal_covariances, dtype=np.float64)
        if signal_covariances.shape != expected:
            raise ValueError(
                f"signal_covariances must have shape {expected}; "
                f"got shape {signal_covariances.shape}."
            )
    return Z, means, weights, noisy_covariances, signal_covariances


def _posterior_weights(
    Z: np.ndarray, means: np.ndarray, weights: np.ndarray, choleskys: np.ndarray
) -> np.ndarray:
    """beta_k(z) from validated float64 inputs and the Cholesky factors of S_k.

    Shapes: Z (n, p), means (K, p), weights (K,), choleskys (K, p, p);
    returns (n, K).
    """
    n_samples = Z.shape[0]
    n_components = means.shape[0]
    log_dets = 2.0 * np.log(np.diagonal(choleskys, axis1=1, axis2=2)).sum(axis=1)
    with np.errstate(divide="ignore"):
        # A zero weight is a component that can never be chosen: log 0 = -inf.
        log_weights = np.log(weights)
    squared = np.empty((n_samples, n_components))
    for k in range(n_components):
        # L_k^{-1} (z - m_k): (p, p) \ (p, n) -> (p, n)
        whitened = linalg.solve_triangular(
            choleskys[k], (Z - means[k]).T, lower=True, check_finite=False
        )
        with np.errstate(over="ignore"):
            squared[:, k] = np.einsum("ij,ij->j", whitened, whitened)
    # The 2 pi terms are common to all components and cancel in the softmax.
    logits = log_weights - 0.5 * log_dets - 0.5 * squared  # (n, K)
    overflowed = ~np.isfinite(squared).all(axis=1)
    if np.any(overflowed):
        logits[overflowed] = _limit_logits(Z[overflowed], means, log_weights, log_dets, choleskys)
    return softmax(logits, axis=1)


def _limit_logits(Z, means, log_weights, log_dets, choleskys):
    """Logits for queries so large that squared Mahalanobis distances overflow.

    With s = max|z| (a power of two, so scaling is exact) the logits are
    s^2 q_k(z/s) + O(1) with q_k = -1/2 ||L_k^{-1}(z/s - m_k/s)||^2; at that
    scale the softmax is the indicator of argmax_k q_k (shared between ties),
    and the O(1) terms only break exact ties.
    """
    exponents = np.maximum(np.ceil(np.log2(np.max(np.abs(Z), axis=1))), 0.0)
    scales = np.ldexp(1.0, exponents.astype(int))[:, None]  # (n, 1)
    scaled = np.empty((Z.shape[0], means.shape[0]))
    for k in range(means.shape[0]):
        whitened = linalg.solve_triangular(
            choleskys[k],
            (Z / scales - means[k] / scales).T,
            lower=True,
            check_finite=False,
        )
        scaled[:, k] = -0.5 * np.einsum("ij,ij->j", whitened, whitened)
    scaled[:, ~np.isfinite(log_weights)] = -np.inf
    winners = scaled == scaled.max(axis=1, keepdims=True)
    # Among (numerically) tied winners, the finite terms decide; losers get -inf.
    return np.where(winners, log_weights - 0.5 * log_dets, -np.inf)


def posterior_weights(Z, means, weights, noisy_covariances) -> np.ndarray:
    """Posterior component probabilities ``beta_k(z)`` for noisy queries.

    ``beta_k(z)`` is proportional to ``pi_k N(z; m_k, S_k)``, computed as a
    softmax of log-densities.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_features)
        Noisy queries.
    means : array-like of shape (n_components, n_features)
    weights : array-like of shape (n_components,)
    noisy_covariances : array-like of shape (n_components, n_features, n_features)
        Covariances ``S_k`` of the noisy observations, positive definite.

    Returns
    -------
    ndarray of shape (n_samples, n_components)
        Rows sum to one.
    """
    Z, means, weights, noisy_covariances, _ = _check_posterior_inputs(
        Z, means, weights, noisy_covariances, None
    )
    return _posterior_weights(Z, means, weights, noisy_choleskys(noisy_covariances))


def _transposed_gains(choleskys: np.ndarray, signal_covariances: np.ndarray) -> np.ndarray:
    """(Gamma_k S_k^{-1})^T = S_k^{-1} Gamma_k, shape (K, p, p), C-contiguous.

    Row-vector queries use the transpose: (Gamma S^{-1} (z - m))^T =
    (z - m)^T S^{-1} Gamma. Keeping it contiguous matters: numpy's matmul
    with a transposed view of the right operand takes a path about 10x slower.
    """
    gains = np.empty_like(signal_covariances)
    for k, (factor, signal) in enumerate(zip(choleskys, signal_covariances, strict=True)):
        gains[k] = linalg.cho_solve((factor, True), signal, check_finite=False)
    return gains


def _blockwise_moments(Z, means, weights, noisy_covariances, signal_covariances):
    """Yield (rows, beta, experts) over blocks of queries.

    beta has shape (n_block, K); the expert means m_k + Gamma_k S_k^{-1}(z - m_k)
    have shape (K, n_block, p), at most ``_BLOCK_ELEMENTS`` numbers, so memory
    stays bounded however many queries there are.
    """
    choleskys = noisy_choleskys(noisy_covariances)
    gains_t = _transposed_gains(choleskys, signal_covariances)
    block_size = max(1, _BLOCK_ELEMENTS // means.size)
    for start in range(0, Z.shape[0], block_size):
        rows = slice(start, start + block_size)
        block = Z[rows]
        beta = _posterior_weights(block, means, weights, choleskys)
        # (n_block, p) @ (p, p) -> (n_block, p), for each of the K components
        experts = np.stack([m + (block - m) @ g for m, g in zip(means, gains_t, strict=True)])
        yield rows, beta, experts


def posterior_mean(Z, means, weights, noisy_covariances, signal_covariances) -> np.ndarray:
    """Posterior mean ``E[X | Z = z]`` under a Gaussian mixture prior.

    ``E[X|Z=z] = sum_k beta_k(z) (m_k + Gamma_k S_k^{-1} (z - m_k))`` with
    ``beta_k(z)`` proportional to ``pi_k N(z; m_k, S_k)``.

    With ``S_k = Gamma_k + xi^2 I`` this is the exact Bayes denoiser of the
    mixture; with ``S_k`` from a mixture fitted to noisy data and
    ``Gamma_k = psd_part(S_k - xi^2 I)`` it is the empirical-Bayes plug-in.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_features)
        Noisy queries.
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,)
        Mixing proportions ``pi_k`` (zeros allowed).
    noisy_covariances : array-like of shape (n_components, n_features, n_features)
        Covariances ``S_k`` of ``Z`` given the component, positive definite.
    signal_covariances : array-like of shape \
            (n_components, n_features, n_features)
        Covariances ``Gamma_k`` of ``X`` given the component (the cross
        covariance of ``X`` and ``Z``).

    Returns
    -------
    ndarray of shape (n_samples, n_features), float64
        Finite for finite queries of any magnitude short of overflowing
        float64 in ``z - m_k`` (tested up to 1e300): when squared distances
        overflow, the gate is taken in its large-``z`` limit.
    """
    Z, means, weights, noisy_covariances, signal_covariances = _check_posterior_inputs(
        Z, means, weights, noisy_covariances, signal_covariances
    )
    result = np.empty_like(Z)
    for rows, beta, experts in _blockwise_moments(
        Z, means, weights, noisy_covariances, signal_covariances
    ):
        result[rows] = _mix(beta, experts)
    return result


def _mix(beta: np.ndarray, values: np.ndarray) -> np.ndarray:
    """sum_k beta_k values_k: (n, K) and (K, n, ...) -> (n, ...).

    A component with beta = 0 contributes nothing even where its value is
    infinite (0 * inf would be NaN).
    """
    gate = beta.T.reshape(beta.T.shape + (1,) * (values.ndim - 2))  # (K, n, 1...)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.where(gate > 0, gate * values, 0.0)
    return terms.sum(axis=0)


def posterior_divergence(Z, means, weights, noisy_covariances, signal_covariances):
    """Divergence ``sum_j d f_j / d z_j`` of :func:`posterior_mean` at each query.

    With ``f = sum_k beta_k mu_k``, the experts ``mu_k = m_k + Gamma_k S_k^{-1}
    (z - m_k)`` and ``grad beta_k = beta_k (g_k - sum_j beta_j g_j)`` where
    ``g_k = S_k^{-1} (m_k - z)``::

        div f = sum_k beta_k tr(Gamma_k S_k^{-1}) + sum_k beta_k (mu_k - f) . (g_k - gbar)

    Stein's unbiased risk estimate of the denoiser needs it (``score``
    without clean targets). Shapes as in :func:`posterior_mean`; returns
    ``(n_samples,)``.
    """
    Z, means, weights, noisy_covariances, signal_covariances = _check_posterior_inputs(
        Z, means, weights, noisy_covariances, signal_covariances
    )
    choleskys = noisy_choleskys(noisy_covariances)
    traces = np.trace(_transposed_gains(choleskys, signal_covariances), axis1=1, axis2=2)  # (K,)
    divergence = np.empty(Z.shape[0])
    for rows, beta, experts in _blockwise_moments(
        Z, means, weights, noisy_covariances, signal_covariances
    ):
        block = Z[rows]
        # g_k = S_k^{-1} (m_k - z): (p, p) solves against (p, n_block), per component
        scores = np.stack(
            [
                linalg.cho_solve((factor, True), (mean - block).T, check_finite=False).T
                for factor, mean in zip(choleskys, means, strict=True)
            ]
        )  # (K, n_block, p)
        deviations = experts - _mix(beta, experts)  # mu_k - f
        centred_scores = scores - _mix(beta, scores)  # g_k - gbar
        divergence[rows] = beta @ traces + _mix(
            beta, np.einsum("knp,knp->kn", deviations, centred_scores)
        )
    return divergence


def posterior_spread(Z, means, weights, noisy_covariances, signal_covariances):
    """``sum_k beta_k(z) ||mu_k(z) - E[X|Z=z]||^2``: the between-component part
    of ``tr Cov(X | Z = z)``, ``mu_k(z)`` being the expert means.

    Shapes as in :func:`posterior_mean`; returns ``(n_samples,)``. Summing
    non-negative terms, unlike ``E||X||^2 - E||E[X|Z]||^2``, loses nothing
    to cancellation.
    """
    Z, means, weights, noisy_covariances, signal_covariances = _check_posterior_inputs(
        Z, means, weights, noisy_covariances, signal_covariances
    )
    spread = np.empty(Z.shape[0])
    for rows, beta, experts in _blockwise_moments(
        Z, means, weights, noisy_covariances, signal_covariances
    ):
        deviations = experts - _mix(beta, experts)  # (K, n_block, p)
        spread[rows] = _mix(beta, np.einsum("knp,knp->kn", deviations, deviations))
    return spread
