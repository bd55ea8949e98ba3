"""Risks of denoisers on a known Gaussian mixture (Section 4 and Theorem 4.1 of the paper).

All risks are per entry, ``E||f(Z) - X||^2 / p``, the quantity that
``sklearn.metrics.mean_squared_error`` estimates on 2-D arrays, for
``X ~ sum_k pi_k N(m_k, Gamma_k)`` and ``Z = X + N(0, xi^2 I)``.
"""

import warnings
from numbers import Integral

import numpy as np
from scipy.special import roots_hermitenorm
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._mixture import check_mixture, check_noise_variance, covariance_sqrt, posterior_spread

__all__ = ["bayes_risk", "best_linear_risk", "best_affine_risk"]

# Node counts per axis tried in turn when ``n_nodes=None``, stopping once two
# successive estimates agree to ``_QUADRATURE_RTOL``. Smooth tasks (Figure 2)
# stop at the second rule; the schedule is long because mixtures with very
# unequal covariances have sharp gates, where Gauss-Hermite converges slowly
# (about 1e-5 relative error at 100 nodes per axis in p = 2 for such a mixture).
_NODE_SCHEDULE = {
    1: (50, 100, 200, 400, 800),
    2: (25, 50, 100, 200, 400),
    3: (15, 25, 40, 60),
}
_QUADRATURE_RTOL = 1e-6
_MAX_QUADRATURE_DIM = 3
# Bounds the memory of one grid (points x components x features doubles).
_MAX_GRID_POINTS = 500_000
# Monte Carlo queries per block, bounding memory at O(block * K * p).
_MC_BLOCK = 1 << 15


def _standard_normal_grid(n_features: int, n_nodes: int):
    """Tensor-product Gauss-Hermite rule for N(0, I_p).

    Returns nodes (n_nodes**p, p) and weights (n_nodes**p,) summing to one.
    """
    nodes_1d, weights_1d = roots_hermitenorm(n_nodes)
    weights_1d = weights_1d / weights_1d.sum()
    grids = np.meshgrid(*([nodes_1d] * n_features), indexing="ij")
    nodes = np.stack([grid.ravel() for grid in grids], axis=1)
    weights = np.ones(1)
    for _ in range(n_features):
        weights = np.multiply.outer(weights, weights_1d).ravel()
    return nodes, weights


def _quadrature(spread, means, weights, roots, n_nodes: int) -> float:
    """E_Z[spread(Z)] for Z ~ sum_j pi_j N(m_j, roots_j roots_j^T).

    One Gauss-Hermite grid per component, mapped onto that component.
    """
    nodes, node_weights = _standard_normal_grid(means.shape[1], n_nodes)
    total = 0.0
    for j in range(means.shape[0]):
        if weights[j] == 0:
            continue
        # (N, p) @ (p, p) -> (N, p); roots are symmetric, and multiplying by a
        # transposed view would be several times slower
        Z = means[j] + nodes @ roots[j]
        total += weights[j] * float(node_weights @ spread(Z))
    return total


def _adaptive_quadrature(
    spread, means, weights, roots, schedule, within: float, n_features: int
) -> float:
    """Quadrature refined along ``schedule`` until two successive rules agree
    to ``_QUADRATURE_RTOL`` of the risk; warns if the schedule runs out."""
    between = change = None
    for count in schedule:
        previous = between
        between = _quadrature(spread, means, weights, roots, count)
        if previous is not None:
            change = abs(between - previous)
            if change <= _QUADRATURE_RTOL * (within + between):
                return between
    if change is not None:
        warnings.warn(
            f"bayes_risk quadrature did not converge: {schedule[-2]} and "
            f"{schedule[-1]} nodes per axis give risks differing by "
            f"{change / n_features:.3g} (relative "
            f"{change / (within + between):.3g}). Use method='monte_carlo' "
            "if that matters.",
            RuntimeWarning,
            stacklevel=3,
        )
    return between


def _monte_carlo(spread, means, weights, roots, n_samples: int, random_state):
    """Mean of spread(Z) over n_samples draws of Z ~ sum_k pi_k N(m_k, S_k)."""
    rng = check_random_state(random_state)
    total = 0.0
    for start in range(0, n_samples, _MC_BLOCK):
        size = min(_MC_BLOCK, n_samples - start)
        labels = rng.choice(means.shape[0], size=size, p=weights)
        Z = rng.standard_normal((size, means.shape[1]))
        for k in range(means.shape[0]):
            rows = labels == k
            # Z | component k ~ N(m_k, S_k): (n_k, p) @ (p, p) -> (n_k, p)
            Z[rows] = means[k] + Z[rows] @ roots[k]  # roots are symmetric
        total += float(spread(Z).sum())
    return total / n_samples


def _within_component_term(covariances, noisy_covariances, weights, xi2):
    """sum_k pi_k tr Cov(X | Z, k) = sum_k pi_k xi^2 tr(Gamma_k S_k^{-1}).

    Gamma - Gamma S^{-1} Gamma = Gamma S^{-1} (S - Gamma) = xi^2 Gamma S^{-1}:
    a product of PSD quantities, so no cancellation.
    """
    traces = np.array(
        [
            np.trace(np.linalg.solve(noisy, signal))
            for noisy, signal in zip(noisy_covariances, covariances, strict=True)
        ]
    )
    return xi2 * float(weights @ traces)


@validate_params(
    {
        "method": [StrOptions({"auto", "quadrature", "monte_carlo"})],
        "n_nodes": [Interval(Integral, 1, None, closed="left"), None],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def bayes_risk(
    means,
    weights=None,
    covariance=1.0,
    noise_variance: float = 1.0,
    *,
    method: str = "auto",
    n_nodes: int | None = None,
    n_samples: int = 200_000,
    random_state=None,
) -> float:
    """Per-entry risk of the Bayes denoiser ``E[X | Z]`` on a Gaussian mixture.

    Parameters
    ----------
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions; ``None`` means equal weights.
    covariance : float or array-like, default=1.0
        ``gamma^2`` (shared ``gamma^2 I``), a shared ``(p, p)`` matrix or a
        ``(K, p, p)`` stack, as in :func:`~sk_softmix.BayesDenoiser`.
    noise_variance : float, default=1.0
        ``xi^2 > 0``.
    method : {"auto", "quadrature", "monte_carlo"}, default="auto"
        ``"quadrature"`` (p <= 3) integrates over each component of ``Z``'s law
        with a tensor-product Gauss-Hermite rule; ``"monte_carlo"`` averages
        over ``n_samples`` draws of ``Z``. ``"auto"`` uses quadrature when
        ``p <= 3``.
    n_nodes : int, default=None
        Gauss-Hermite nodes per axis. ``None`` refines the rule (up to 800,
        400, 60 nodes per axis for p = 1, 2, 3) until two successive
        estimates agree to a relative 1e-6, and warns if they never do.
    n_samples : int, default=200_000
        Monte Carlo draws.
    random_state : int, RandomState instance or None, default=None
        Seed for the Monte Carlo draws.

    Returns
    -------
    float
        ``E||X - E[X|Z]||^2 / p``.

    See Also
    --------
    best_linear_risk : Risk of the best estimator ``M z``.
    best_affine_risk : Risk of the best estimator ``M z + c``.
    sk_softmix.BayesDenoiser : The estimator attaining this risk.

    Notes
    -----
    The risk is computed as ``E tr Cov(X | Z) / p`` with
    ``tr Cov(X|Z=z) = sum_k beta_k(z) tr Sigma_k
    + sum_k beta_k(z) ||mu_k(z) - f*(z)||^2``,
    ``mu_k(z) = m_k + Gamma_k S_k^{-1}(z - m_k)``, ``Sigma_k = xi^2 Gamma_k S_k^{-1}``
    and ``S_k = Gamma_k + xi^2 I``. The first term integrates in closed form to
    ``sum_k pi_k tr Sigma_k``; only the second, a sum of non-negative terms,
    is integrated numerically. Unlike ``E||X||^2 - E||f*(Z)||^2`` this does
    not lose digits when the means are large. The Monte Carlo estimate is
    Rao-Blackwellised (it averages this conditional variance rather than
    squared errors), so its standard error is well below that of an empirical
    MSE on the same number of points.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Section 4 (Bayes denoiser of a mixture).

    Examples
    --------
    >>> from sk_softmix.theory.risk import bayes_risk
    >>> round(bayes_risk([[0.0]], covariance=1.0, noise_variance=1.0), 6)
    0.5

    The paper's Figure 2 task, between the risk 0.8 of an oracle that knows
    each point's component and the best affine risk 1.558:

    >>> round(bayes_risk([[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0), 4)
    1.495
    """
    means, weights, covariances = check_mixture(means, weights, covariance)
    xi2 = check_noise_variance(noise_variance)
    n_features = means.shape[1]
    if method == "auto":
        method = "quadrature" if n_features <= _MAX_QUADRATURE_DIM else "monte_carlo"
    noisy_covariances = covariances + xi2 * np.eye(n_features)
    within = _within_component_term(covariances, noisy_covariances, weights, xi2)
    roots = covariance_sqrt(noisy_covariances)  # (K, p, p)

    def spread(Z):
        return posterior_spread(Z, means, weights, noisy_covariances, covariances)

    if method == "quadrature":
        if n_features > _MAX_QUADRATURE_DIM:
            raise ValueError(
                f"method='quadrature' supports at most {_MAX_QUADRATURE_DIM} "
                f"features (the grid has n_nodes**p points); got p={n_features}. "
                "Use method='monte_carlo'."
            )
        if n_nodes is None:
            schedule = _NODE_SCHEDULE[n_features]
        elif int(n_nodes) ** n_features > _MAX_GRID_POINTS:
            raise ValueError(
                f"n_nodes must satisfy n_nodes**p <= {_MAX_GRID_POINTS} "
                f"(p={n_features}); got {n_nodes!r}."
            )
        else:
            schedule = (int(n_nodes),)
        between = _adaptive_quadrature(spread, means, weights, roots, schedule, within, n_features)
    else:
        between = _monte_carlo(spread, means, weights, roots, int(n_samples), random_state)
    return float((within + between) / n_features)


def _linear_risk(second_moment: np.ndarray, xi2: float) -> float:
    """tr(R - R (R + xi^2 I)^{-1} R) / p for a PSD (p, p) matrix R.

    In R's eigenbasis each term is lambda xi^2 / (lambda + xi^2): computed
    this way it is non-negative and free of cancellation.
    """
    eigenvalues = np.maximum(np.linalg.eigvalsh(second_moment), 0.0)
    return float(np.mean(eigenvalues * xi2 / (eigenvalues + xi2)))


def best_linear_risk(means, weights=None, covariance=1.0, noise_variance: float = 1.0) -> float:
    """Per-entry risk of the best linear denoiser ``z -> M z`` (no intercept).

    Parameters
    ----------
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions; ``None`` means equal weights.
    covariance : float or array-like, default=1.0
        As in :func:`bayes_risk`.
    noise_variance : float, default=1.0
        ``xi^2 > 0``.

    Returns
    -------
    float
        ``tr(R_X - R_X (R_X + xi^2 I)^{-1} R_X) / p`` with
        ``R_X = E[X X^T] = sum_k pi_k (Gamma_k + m_k m_k^T)``.

    See Also
    --------
    best_affine_risk : With an intercept.
    bayes_risk : The best risk of any estimator.
    sklearn.linear_model.LinearRegression : Its ``fit_intercept=False`` fit
        on a large sample attains this risk.

    Notes
    -----
    The minimiser is ``M = R_X (R_X + xi^2 I)^{-1}``. Theorem 4.1 of the paper: no
    linear attention predictor, however deep, does better than this.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, arXiv 2610.11798 (2026), Section 4.

    Examples
    --------
    >>> from sk_softmix.theory.risk import best_linear_risk
    >>> round(best_linear_risk([[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0), 6)
    2.315789

    On this task (the paper's Figure 2) every linear-attention stack is at
    least 1.55 times the Bayes risk:

    >>> from sk_softmix.theory.risk import bayes_risk
    >>> ratio = best_linear_risk([[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0) / bayes_risk(
    ...     [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0
    ... )
    >>> round(ratio, 2)
    1.55
    """
    means, weights, covariances = check_mixture(means, weights, covariance)
    xi2 = check_noise_variance(noise_variance)
    # sum_k pi_k (Gamma_k + m_k m_k^T): (K,) . (K, p, p) + (p, K) @ (K, p)
    second_moment = np.einsum("k,kij->ij", weights, covariances) + (means.T * weights) @ means
    return _linear_risk(second_moment, xi2)


def best_affine_risk(means, weights=None, covariance=1.0, noise_variance: float = 1.0) -> float:
    """Per-entry risk of the best affine denoiser ``z -> M z + c``.

    Parameters
    ----------
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions; ``None`` means equal weights.
    covariance : float or array-like, default=1.0
        As in :func:`bayes_risk`.
    noise_variance : float, default=1.0
        ``xi^2 > 0``.

    Returns
    -------
    float
        ``tr(C - C (C + xi^2 I)^{-1} C) / p`` with ``C = Cov(X)``, the mixture
        covariance ``sum_k pi_k (Gamma_k + (m_k - mbar)(m_k - mbar)^T)``.

    See Also
    --------
    best_linear_risk : Without an intercept.
    bayes_risk : The best risk of any estimator.
    sklearn.linear_model.LinearRegression : Its ``fit_intercept=True`` fit
        on a large sample attains this risk.

    Notes
    -----
    The minimiser is the Wiener filter of the mixture seen
    as one Gaussian, ``mbar + C (C + xi^2 I)^{-1} (z - mbar)``.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, arXiv 2610.11798 (2026), Section 4.

    Examples
    --------
    >>> from sk_softmix.theory.risk import best_affine_risk
    >>> round(best_affine_risk([[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0), 6)
    1.557895
    """
    means, weights, covariances = check_mixture(means, weights, covariance)
    xi2 = check_noise_variance(noise_variance)
    centred = means - weights @ means  # (K, p)
    covariance_x = np.einsum("k,kij->ij", weights, covariances) + (centred.T * weights) @ centred
    return _linear_risk(covariance_x, xi2)
