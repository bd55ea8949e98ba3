"""Samples from a Gaussian mixture and their noisy observations."""

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from .theory._mixture import check_mixture, check_noise_variance, covariance_sqrt

__all__ = ["NoisyMixtureSample", "make_denoising_tasks", "make_gaussian_mixture", "make_lda"]


class NoisyMixtureSample(NamedTuple):
    """What ``make_gaussian_mixture`` returns: unpacks as ``noisy, clean, labels``.

    The estimators call their input ``X``; here it is the *noisy* view.
    Fit a denoiser as ``fit(sample.noisy, sample.clean)`` (supervised) or
    ``fit(sample.noisy)`` (by SURE); the names make ``fit(clean, noisy)``
    hard to write by accident.

    Parameters
    ----------
    noisy : ndarray of shape (n_samples, n_features)
        Noisy observations ``Z = X + N(0, xi^2 I)``: what a denoiser's
        ``fit`` and ``transform`` take as ``X``.
    clean : ndarray of shape (n_samples, n_features)
        Clean points ``X``: a denoiser's targets ``y``.
    labels : ndarray of shape (n_samples,)
        Component of each point, integers in ``[0, n_components)``.
    """

    noisy: np.ndarray
    clean: np.ndarray
    labels: np.ndarray


@validate_params(
    {"n_samples": [Interval(Integral, 1, None, closed="left")], "random_state": ["random_state"]},
    prefer_skip_nested_validation=True,
)
def make_gaussian_mixture(
    n_samples: int,
    means,
    weights=None,
    covariance=1.0,
    noise_variance: float = 1.0,
    random_state=None,
) -> NoisyMixtureSample:
    """Draw clean points from a Gaussian mixture and observe them in noise.

    ``X ~ sum_k pi_k N(m_k, Gamma_k)`` and ``Z = X + N(0, xi^2 I)``.

    Parameters
    ----------
    n_samples : int
        Number of points, at least 1.
    means : array-like of shape (n_components, n_features)
        Component means ``m_k``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions; ``None`` means equal weights.
    covariance : float or array-like, default=1.0
        ``gamma^2 >= 0`` (shared ``gamma^2 I``), a shared
        ``(n_features, n_features)`` matrix or an
        ``(n_components, n_features, n_features)`` stack, each symmetric
        positive semi-definite.
    noise_variance : float, default=1.0
        ``xi^2 >= 0``; zero gives ``Z = X``.
    random_state : int, RandomState instance or None, default=None
        Seed. Labels, then the clean points, then the noise are drawn from
        it, so the clean points for a given seed do not depend on
        ``noise_variance``.

    Returns
    -------
    sample : NoisyMixtureSample
        A named tuple, in this order:

        noisy : ndarray of shape (n_samples, n_features)
            Noisy observations ``Z``: what a denoiser's ``fit`` and
            ``transform`` take as ``X``.
        clean : ndarray of shape (n_samples, n_features)
            Clean points ``X``: a denoiser's targets ``y``.
        labels : ndarray of shape (n_samples,)
            Component of each point, integers in ``[0, n_components)``.

    See Also
    --------
    sklearn.datasets.make_blobs : Isotropic clusters without the noisy view.
    sk_softmix.theory.risk.bayes_risk : The best achievable denoising risk on such data.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Section 4 (the denoising model).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.datasets import make_gaussian_mixture
    >>> sample = make_gaussian_mixture(
    ...     5, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    ... )
    >>> sample.noisy.shape, sample.clean.shape, sample.labels.shape
    ((5, 2), (5, 2), (5,))

    It unpacks in the order ``noisy, clean, labels``; ``Z - X`` is the
    noise, of variance ``xi^2``:

    >>> Z, X, labels = make_gaussian_mixture(
    ...     20_000, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    ... )
    >>> round(float(np.var(Z - X)), 1), X[labels == 0].mean(axis=0).round(1).tolist()
    (4.0, [3.0, 0.0])
    """
    means, weights, covariances = check_mixture(means, weights, covariance)
    xi2 = check_noise_variance(noise_variance, allow_zero=True)
    rng = check_random_state(random_state)
    n_components, n_features = means.shape

    labels = rng.choice(n_components, size=int(n_samples), p=weights)
    X = rng.standard_normal((int(n_samples), n_features))
    roots = covariance_sqrt(covariances)  # (K, p, p), roots_k roots_k^T = Gamma_k
    for k in range(n_components):
        rows = labels == k
        # (n_k, p) @ (p, p) -> (n_k, p)
        X[rows] = means[k] + X[rows] @ roots[k]  # roots are symmetric
    Z = X + np.sqrt(xi2) * rng.standard_normal(X.shape)
    return NoisyMixtureSample(noisy=Z, clean=X, labels=labels)


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "prior": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_lda(
    n_samples: int,
    means,
    prior: float = 0.5,
    covariance=1.0,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw a two-class sample of the LDA model (the paper's eq. 4).

    ``P(y = 1) = prior`` and ``x | y = c ~ N(m_c, Gamma)``, labels in {-1, +1}.

    Parameters
    ----------
    n_samples : int
        Number of points, at least 1.
    means : array-like of shape (2, n_features)
        ``m_{-1}`` then ``m_1``.
    prior : float, default=0.5
        ``pi_+``, strictly between 0 and 1.
    covariance : float or array-like of shape (n_features, n_features), default=1.0
        The shared ``Gamma``: a scalar ``gamma^2`` or a matrix.
    random_state : int, RandomState instance or None, default=None
        Seed of the labels and the points.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points.
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.

    See Also
    --------
    sk_softmix.SoftmaxAttentionClassifier : Learns the Bayes score of this model.
    sk_softmix.theory.lda.lda_coordinates : That Bayes score in closed form.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       eq. 4.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.datasets import make_lda
    >>> X, y = make_lda(1000, [[0.0, 1.0], [1.0, 0.0]], prior=0.6, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((1000, 2), [-1, 1])
    >>> bool(abs(np.mean(y == 1) - 0.6) < 0.05)  # the prior
    True
    >>> X[y == 1].mean(axis=0).round(1).tolist()  # m_1
    [1.0, 0.0]
    """
    Z, X, labels = make_gaussian_mixture(
        n_samples,
        means,
        weights=[1 - prior, prior],
        covariance=covariance,
        noise_variance=0.0,
        random_state=random_state,
    )
    return X, 2 * labels - 1


@validate_params(
    {
        "n_tasks": [Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "mean_norm": [Interval(Real, 0, None, closed="left")],
        "component_variance": [Interval(Real, 0, None, closed="left")],
        "noise_variance": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_denoising_tasks(
    n_tasks: int,
    n_samples: int,
    n_features: int,
    n_components: int = 2,
    mean_norm: float = 3.0,
    component_variance: float = 1.0,
    noise_variance: float = 4.0,
    random_state=None,
):
    """Yield denoising tasks that share variances but not means or weights.

    Each task is a mixture with ``n_components`` means of norm ``mean_norm``
    in uniformly random directions, Dirichlet(1, ..., 1) weights, and the
    shared ``component_variance`` and ``noise_variance``: the admissible tasks
    of Proposition 4.4, whose Bayes denoisers one set of attention weights
    reproduces when the prompt supplies the means and weights.

    Parameters
    ----------
    n_tasks : int
        Number of tasks to yield.
    n_samples : int
        Points per task.
    n_features : int
        Dimension ``p`` of the points.
    n_components : int, default=2
        Components per task.
    mean_norm : float, default=3.0
        Norm of every component mean.
    component_variance : float, default=1.0
        ``gamma^2``.
    noise_variance : float, default=4.0
        ``xi^2``.
    random_state : int, RandomState instance or None, default=None
        Seed of the whole sequence of tasks.

    Yields
    ------
    Z : ndarray of shape (n_samples, n_features)
        Noisy points.
    X : ndarray of shape (n_samples, n_features)
        Clean points.
    means : ndarray of shape (n_components, n_features)
        The task's component means.
    weights : ndarray of shape (n_components,)
        The task's mixing proportions.

    See Also
    --------
    sk_softmix.SoftmaxAttentionDenoiser.partial_fit : Meta-trains over such
        tasks.
    sk_softmix.theory.constructions.in_context_construction : Parameters that denoise
        every such task exactly in the large-prompt limit.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.datasets import make_denoising_tasks
    >>> tasks = list(make_denoising_tasks(3, 100, 2, random_state=0))
    >>> Z, X, means, weights = tasks[0]
    >>> Z.shape, np.linalg.norm(means, axis=1).round(6).tolist(), round(float(weights.sum()), 6)
    ((100, 2), [3.0, 3.0], 1.0)
    """
    rng = check_random_state(random_state)
    for _ in range(n_tasks):
        directions = rng.normal(size=(n_components, n_features))
        means = mean_norm * directions / np.linalg.norm(directions, axis=1, keepdims=True)
        weights = rng.dirichlet(np.ones(n_components))
        Z, X, _ = make_gaussian_mixture(
            n_samples,
            means,
            weights,
            covariance=component_variance,
            noise_variance=noise_variance,
            random_state=rng,
        )
        yield Z, X, means, weights
