"""Iterating a denoiser: the clustering transition at lambda = 1 (Proposition 4.3 of the paper).

For two equal-weight components ``N(m_k, gamma^2 I)`` observed with noise
``N(0, xi^2 I)``, write ``c = (m_1 + m_2)/2`` and ``h = (m_1 - m_2)/2``. Along
``h``, with ``z = c + u h``, the Bayes denoiser maps ``u`` to
``(gamma^2/s) u + (xi^2/s) tanh(lambda^2 u)``, ``s = gamma^2 + xi^2`` and
``lambda^2 = ||h||^2 / s``; directions orthogonal to ``h`` shrink by
``gamma^2/s``. The fixed points solve ``u = tanh(lambda^2 u)``: for
``lambda <= 1`` every start converges to ``c``; for ``lambda > 1`` almost every
start converges to ``c + u* h`` or ``c - u* h`` (Proposition 4.3 of Gabet,
Boursier & Boyer 2026).
"""

from numbers import Integral, Real

import numpy as np
from scipy.optimize import brentq
from sklearn.utils._param_validation import Interval, validate_params

_VARIANCES = {
    "component_variance": [Interval(Real, 0, None, closed="left")],
    "noise_variance": [Interval(Real, 0, None, closed="neither")],
}


@validate_params(
    {"n_steps": [Interval(Integral, 0, None, closed="left")]},
    prefer_skip_nested_validation=True,
)
def iterate(denoiser, X, n_steps: int) -> np.ndarray:
    """The trajectory ``z_{t+1} = f(z_t)`` of a fitted denoiser.

    Parameters
    ----------
    denoiser : fitted estimator with ``transform``
        Any denoiser of this package (or a transformer that keeps the shape).
    X : array-like of shape (n, p)
        Starting points.
    n_steps : int
        Number of applications of ``f``.

    Returns
    -------
    ndarray of shape (n_steps + 1, n, p)
        ``X`` then each iterate.

    See Also
    --------
    fixed_points : Where the iterated Bayes denoiser converges.
    plot_trajectories : Draw the trajectories over the posterior map.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.dynamics import iterate
    >>> oracle = BayesDenoiser([[0.8, 0.0], [-0.8, 0.0]], covariance=0.0,
    ...                        noise_variance=1.0).fit(np.zeros((1, 2)))
    >>> iterate(oracle, np.array([[0.5, 2.0]]), 100)[-1].round(3)  # lambda = 0.8
    array([[0., 0.]])

    Above the threshold the same start stays on its side:

    >>> oracle = BayesDenoiser([[1.5, 0.0], [-1.5, 0.0]], covariance=0.0,
    ...                        noise_variance=1.0).fit(np.zeros((1, 2)))
    >>> iterate(oracle, np.array([[0.5, 2.0]]), 100)[-1].round(3)  # lambda = 1.5
    array([[1.463, 0.   ]])
    """
    current = np.asarray(X, dtype=np.float64)
    trajectory = [current]
    for _ in range(n_steps):
        current = np.asarray(denoiser.transform(current), dtype=np.float64)
        trajectory.append(current)
    return np.stack(trajectory)


def _centre_and_half_gap(means):
    means = np.asarray(means, dtype=np.float64)
    if means.ndim != 2 or means.shape[0] != 2:
        raise ValueError(f"means must have shape (2, p); got {means.shape}.")
    return means.mean(axis=0), (means[0] - means[1]) / 2


@validate_params(_VARIANCES, prefer_skip_nested_validation=True)
def separation(means, component_variance: float, noise_variance: float) -> float:
    """``lambda = ||h|| / sqrt(gamma^2 + xi^2)``, ``h`` the half-gap of the means.

    For point masses (``gamma = 0``) this is ``||m_1 - m_2|| / (2 xi)``.

    Parameters
    ----------
    means : array-like of shape (2, p)
        The two component means ``m_1``, ``m_2``.
    component_variance : float
        ``gamma^2 >= 0``.
    noise_variance : float
        ``xi^2 > 0``.

    Returns
    -------
    float
        ``lambda``; the transition is at ``lambda = 1``.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Section 4.3.

    Examples
    --------
    >>> from sk_softmix.theory.dynamics import separation
    >>> separation([[1.5, 0.0], [-1.5, 0.0]], 0.0, 1.0)
    1.5
    """
    _, half_gap = _centre_and_half_gap(means)
    return float(np.linalg.norm(half_gap) / np.sqrt(component_variance + noise_variance))


@validate_params(_VARIANCES, prefer_skip_nested_validation=True)
def fixed_points(means, component_variance: float, noise_variance: float) -> np.ndarray:
    """Attracting fixed points of the iterated Bayes denoiser.

    Parameters
    ----------
    means : array-like of shape (2, p)
        The two component means ``m_1``, ``m_2`` (equal weights).
    component_variance : float
        ``gamma^2 >= 0``, the variance of each component along every axis.
    noise_variance : float
        ``xi^2 > 0``.

    Returns
    -------
    ndarray of shape (1, p) or (2, p)
        The midpoint ``c`` when ``lambda <= 1``; otherwise ``c + u* h`` and
        ``c - u* h``, with ``u*`` the positive root of ``u = tanh(lambda^2 u)``
        (the midpoint is then an unstable fixed point).

    See Also
    --------
    separation : The ``lambda`` that decides between the two regimes.
    iterate : Run the iteration itself.

    Notes
    -----
    Proposition 4.3 of Gabet, Boursier & Boyer (2026), stated there for point
    masses (``gamma = 0``). With ``gamma > 0`` the map along ``h`` is
    ``u -> (gamma^2/s) u + (xi^2/s) tanh(lambda^2 u)``, whose fixed points
    solve the same equation.

    Examples
    --------
    >>> from sk_softmix.theory.dynamics import fixed_points
    >>> fixed_points([[3.0, 0.0], [-3.0, 0.0]], 0.0, 1.0).round(4)
    array([[ 3.,  0.],
           [-3.,  0.]])

    Weak separation: only the midpoint attracts.

    >>> fixed_points([[2.0, 1.0], [0.0, 1.0]], 1.0, 1.0)  # lambda = 0.71
    array([[1., 1.]])
    """
    centre, half_gap = _centre_and_half_gap(means)
    lam = separation(means, component_variance, noise_variance)
    if lam <= 1:
        return centre[None, :]
    u_star = brentq(lambda u: np.tanh(lam**2 * u) - u, 1e-12, 1.0, xtol=1e-15)
    return np.stack([centre + u_star * half_gap, centre - u_star * half_gap])


def plot_trajectories(
    denoiser,
    X,
    n_steps: int,
    *,
    means,
    weights=None,
    covariance=0.0,
    noise_variance=1.0,
    ax=None,
    resolution: int = 200,
):
    """Trajectories of the iterated denoiser over the posterior-probability map.

    The background is the posterior probability ``beta_1(z)`` of the first
    component under the given mixture; each start is drawn as a line to its
    last iterate, as in the paper's Figure 3. Needs matplotlib
    (``pip install sk_softmix[plot]``).

    Parameters
    ----------
    denoiser : fitted estimator with ``transform``
        The map ``f`` to iterate.
    X : array-like of shape (n, 2)
        Starting points (the plot is two-dimensional).
    n_steps : int
        Number of applications of ``f``.
    means : array-like of shape (n_components, 2)
        Means of the mixture behind the background, as for
        :class:`~sk_softmix.BayesDenoiser`.
    weights : array-like of shape (n_components,), default=None
        Its mixing proportions; ``None`` means equal weights.
    covariance : float or array-like, default=0.0
        Its clean covariance, as for :class:`~sk_softmix.BayesDenoiser`.
    noise_variance : float, default=1.0
        Its noise variance ``xi^2``.
    ax : matplotlib Axes, default=None
        Created when omitted.
    resolution : int, default=200
        Grid points per axis of the background.

    Returns
    -------
    matplotlib Axes
        The axes drawn on: the background, one line per start and a dot at
        each last iterate, the means as white crosses.

    See Also
    --------
    iterate : The trajectories without the plot.

    Examples
    --------
    >>> import numpy as np
    >>> from matplotlib.figure import Figure
    >>> from sk_softmix import BayesDenoiser
    >>> from sk_softmix.theory.dynamics import plot_trajectories
    >>> means = [[1.5, 0.0], [-1.5, 0.0]]  # lambda = 1.5: two attractors
    >>> oracle = BayesDenoiser(means, covariance=0.0, noise_variance=1.0).fit(np.zeros((1, 2)))
    >>> ax = plot_trajectories(oracle, [[0.5, 1.0], [-0.5, -1.0]], 50, means=means,
    ...                        ax=Figure().subplots(), resolution=20)
    >>> [line.get_xydata()[-1].round(3).tolist() for line in ax.lines]
    [[1.463, 0.0], [-1.463, 0.0]]
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plot_trajectories needs matplotlib: pip install 'sk_softmix[plot]'."
        ) from error
    from ._mixture import check_mixture, posterior_weights

    trajectory = iterate(denoiser, X, n_steps)
    if trajectory.shape[2] != 2:
        raise ValueError(f"plot_trajectories draws 2-D points; got {trajectory.shape[2]}.")
    means, weights, signal = check_mixture(means, weights, covariance)
    noisy = signal + noise_variance * np.eye(2)
    low = np.minimum(trajectory.min(axis=(0, 1)), means.min(axis=0)) - 1
    high = np.maximum(trajectory.max(axis=(0, 1)), means.max(axis=0)) + 1
    grid_x, grid_y = np.meshgrid(*(np.linspace(low[i], high[i], resolution) for i in range(2)))
    grid = np.column_stack([grid_x.ravel(), grid_y.ravel()])
    probability = posterior_weights(grid, means, weights, noisy)[:, 0].reshape(grid_x.shape)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    ax.contourf(grid_x, grid_y, probability, levels=20, cmap="RdBu", alpha=0.6)
    for k in range(trajectory.shape[1]):
        ax.plot(trajectory[:, k, 0], trajectory[:, k, 1], color="black", linewidth=0.6)
    ax.scatter(trajectory[-1, :, 0], trajectory[-1, :, 1], color="black", s=8, zorder=3)
    ax.scatter(means[:, 0], means[:, 1], marker="x", color="white", s=60, zorder=4)
    ax.set_aspect("equal")
    return ax
