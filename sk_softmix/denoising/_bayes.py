"""The exact Bayes denoiser of a known Gaussian mixture (the oracle)."""

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data

from ..theory._mixture import check_mixture, noisy_choleskys, posterior_divergence, posterior_mean
from ..training._persistence import ParametersAddedSinceMixin
from ..training._validation import FLOAT_DTYPES, unchanged_on_error
from ._mixin import DenoiserMixin


class _PosteriorMeanMixin(DenoiserMixin):
    """Denoisers that apply :func:`~sk_softmix.theory._mixture.posterior_mean` with
    fitted mixture parameters.

    Subclasses provide ``_posterior_parameters()`` returning ``(means,
    weights, noisy_covariances, signal_covariances)``.
    """

    def _posterior_parameters(self):
        raise NotImplementedError

    def _denoise(self, X: np.ndarray) -> np.ndarray:
        # The algebra runs in float64 whatever X's dtype; only the result is
        # cast back, so float32 input loses nothing but the final rounding.
        means, weights, noisy, signal = self._posterior_parameters()
        return posterior_mean(X, means, weights, noisy, signal).astype(X.dtype, copy=False)

    def _stein_risks(self, X: np.ndarray) -> np.ndarray:
        """``(||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)) / p`` per query, in float64."""
        parameters = self._posterior_parameters()
        X = X.astype(np.float64, copy=False)
        residual = np.sum((posterior_mean(X, *parameters) - X) ** 2, axis=1)
        xi2, p = self.noise_variance_, X.shape[1]
        return (residual - p * xi2 + 2 * xi2 * posterior_divergence(X, *parameters)) / p


class BayesDenoiser(ParametersAddedSinceMixin, _PosteriorMeanMixin, BaseEstimator):
    """Exact Bayes denoiser ``E[X | Z]`` for a known Gaussian mixture.

    The clean signal is ``X ~ sum_k pi_k N(m_k, Gamma_k)`` and the
    observations are ``Z = X + N(0, xi^2 I)``. Knowing the mixture, the
    posterior mean minimises the mean squared error among all denoisers; it
    is the oracle that trained denoisers are compared with. Nothing is
    learnt: ``fit`` only checks the data's dimension against the mixture.

    Parameters
    ----------
    means : array-like of shape (n_components, n_features), default=None
        Component means ``m_k`` of the clean signal. ``None``: one component
        centred at the origin, in the dimension of the ``X`` given to
        ``fit``; the denoiser is then the Wiener filter of ``N(0, Gamma)``,
        ``Gamma (Gamma + xi^2 I)^{-1} z``.
    weights : array-like of shape (n_components,), default=None
        Mixing proportions ``pi_k``, non-negative and summing to one;
        ``None`` means equal weights.
    covariance : float or array-like, default=1.0
        Component covariances ``Gamma_k`` of the clean signal: a scalar
        ``gamma^2 >= 0`` (shared ``gamma^2 I``), one shared
        ``(n_features, n_features)`` symmetric positive semi-definite matrix,
        or one such matrix per component, shape
        ``(n_components, n_features, n_features)``.
    noise_variance : float, default=1.0
        Variance ``xi^2 > 0`` of the isotropic Gaussian noise.

    Attributes
    ----------
    means_ : ndarray of shape (n_components, n_features)
        Validated component means.
    weights_ : ndarray of shape (n_components,)
        Mixing proportions, summing to one.
    covariances_ : ndarray of shape (n_components, n_features, n_features)
        Clean component covariances ``Gamma_k``, whatever form was given.
    noise_variance_ : float
        ``xi^2``.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when ``X``
        has feature names that are all strings.

    See Also
    --------
    GaussianMixtureDenoiser : The same formula with the mixture estimated
        from noisy data (empirical Bayes).
    sklearn.mixture.GaussianMixture : Fits the mixture such a plug-in needs.
    sk_softmix.theory.risk.bayes_risk : The risk this denoiser attains.

    Notes
    -----
    With ``S_k = Gamma_k + xi^2 I`` (Section 4 of the paper),

    ``E[X|Z=z] = sum_k beta_k(z) (m_k + Gamma_k S_k^{-1} (z - m_k))``,
    ``beta_k(z)`` proportional to ``pi_k N(z; m_k, S_k)``.

    For a shared covariance ``Gamma`` this is
    ``Gamma S^{-1} z + xi^2 S^{-1} sum_k beta_k(z) m_k`` with
    ``beta_k(z) = softmax_k(log pi_k + m_k^T S^{-1} z - m_k^T S^{-1} m_k / 2)``:
    a linear map plus a softmax gate over the means, which two softmax
    attention heads realise exactly. The gate is computed from
    log-densities, so no finite query, however large, yields NaN. Cost:
    ``O(n_samples n_components n_features^2)`` time; queries are processed
    in blocks, so the working memory beyond input and output is bounded (a
    few times 32 MiB) however many queries there are.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Section 4 (Bayes denoiser of a Gaussian mixture; Theorem 4.1).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import BayesDenoiser
    >>> means = np.array([[3.0, 0.0], [0.0, 3.0]])
    >>> denoiser = BayesDenoiser(means, covariance=1.0, noise_variance=4.0)
    >>> Z = np.array([[3.0, 0.0], [10.0, -10.0]])
    >>> denoiser.fit(Z).transform(Z).round(3)
    array([[ 2.66,  0.34],
           [ 4.4 , -2.  ]])

    The second query is far on the side of ``m_1``: the gate is certain and
    the output is ``0.2 z + 0.8 m_1``.
    """

    _parameter_constraints: dict = {
        "means": ["array-like", None],
        "weights": ["array-like", None],
        "covariance": [Interval(Real, 0, None, closed="left"), "array-like"],
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, means=None, weights=None, covariance=1.0, noise_variance=1.0):
        self.means = means
        self.weights = weights
        self.covariance = covariance
        self.noise_variance = noise_variance

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check the mixture and that ``X`` lives in its space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations; only their number of features is used.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted denoiser.
        """
        # validate_data records n_features_in_ before the dimension check can
        # fail; the context restores a previous fit if anything below raises.
        with unchanged_on_error(self):
            X = validate_data(self, X, dtype=FLOAT_DTYPES)
            given = np.zeros((1, X.shape[1])) if self.means is None else self.means
            means, weights, covariances = check_mixture(given, self.weights, self.covariance)
            if X.shape[1] != means.shape[1]:
                raise ValueError(
                    f"X has {X.shape[1]} features, but the mixture lives in "
                    f"dimension {means.shape[1]} (means of shape {means.shape}); "
                    f"X must have shape (n_samples, {means.shape[1]})."
                )
            self.means_ = means
            self.weights_ = weights
            self.covariances_ = covariances
            self.noise_variance_ = float(self.noise_variance)
            # transform factors Gamma_k + xi^2 I: a failure belongs to fit
            noisy_choleskys(self._posterior_parameters()[2])
        return self

    def _posterior_parameters(self):
        noisy = self.covariances_ + self.noise_variance_ * np.eye(self.means_.shape[1])
        return self.means_, self.weights_, noisy, self.covariances_
