"""Empirical-Bayes denoiser: a Gaussian mixture fitted to the noisy data."""

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.mixture import GaussianMixture
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from ..theory._mixture import psd_part
from ..training._units import checked_scale
from ..training._validation import (
    FLOAT_DTYPES,
    Count,
    clean_targets,
    describe_ignored_target,
    noisy_variance,
    unchanged_on_error,
    warn_if_misspecified,
)
from ._bayes import _PosteriorMeanMixin


class GaussianMixtureDenoiser(_PosteriorMeanMixin, BaseEstimator):
    """Plug-in (empirical Bayes) denoiser from a Gaussian mixture fit.

    Fits :class:`~sklearn.mixture.GaussianMixture` to the noisy observations
    ``Z = X + N(0, xi^2 I)``, which gives weights ``pi_k``, means ``m_k`` and
    noisy covariances ``S_k``; the clean covariances are then
    ``Gamma_k = S_k - xi^2 I`` made positive semi-definite, and ``transform``
    applies the Bayes denoiser of that estimated mixture. It needs no clean
    data, only the noise level.

    Parameters
    ----------
    n_components : int, default=2
        Number of mixture components.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Form of the fitted noisy covariances, as in ``GaussianMixture``.
    noise_variance : float, default=None
        Variance ``xi^2 > 0`` of the isotropic Gaussian noise in ``X``.
        ``None``: estimated from clean targets ``y`` given to ``fit``
        (without them ``fit`` raises a ``ValueError``).
    tol : float, default=1e-5
        EM convergence threshold on the gain in mean log-likelihood **per
        entry** (``GaussianMixture`` receives ``tol * n_features``, its gain
        per sample), so that one value suits any dimension. Measured: on the
        paper's Figure 2 task (p = 2) 1e-5 is within 0.05% of the risk at
        1e-6, where ``GaussianMixture``'s 1e-3 per sample stopped EM after 5
        iterations and cost up to 0.8%; on 8x8 digits (p = 64, 5
        components) 1e-6 per sample took 38 iterations for the risk that 1e-5
        per entry reaches in 15-22.
    reg_covar : float, default=1e-6
        Added to the diagonal of the fitted ``S_k``, passed to
        ``GaussianMixture``, in units of the mean square of ``X``: EM runs on
        ``X`` divided by its root-mean-square, so that the result does not
        depend on the data's units (an absolute ``1e-6`` dominated data
        scaled by ``1e-4``).
    max_iter : int, default=200
        EM iterations, passed to ``GaussianMixture``, which warns
        (``ConvergenceWarning``) when they run out before ``tol`` is met.
    n_init : int, default=1
        EM restarts, passed to ``GaussianMixture``.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, \
            default="kmeans"
        EM initialisation, passed to ``GaussianMixture``.
    random_state : int, RandomState instance or None, default=None
        Seed of the EM initialisation, passed to ``GaussianMixture``.

    Attributes
    ----------
    gmm_ : GaussianMixture
        The mixture fitted to the noisy data divided by ``scale_``.
    scale_ : float
        Root-mean-square of the training data.
    means_ : ndarray of shape (n_components, n_features)
        Fitted means ``m_k``.
    weights_ : ndarray of shape (n_components,)
        Fitted mixing proportions ``pi_k``.
    noisy_covariances_ : ndarray of shape (n_components, n_features, n_features)
        Fitted covariances ``S_k`` of the noisy data, expanded to full
        matrices whatever ``covariance_type``.
    signal_covariances_ : ndarray of shape \
            (n_components, n_features, n_features)
        ``Gamma_k = psd_part(S_k - xi^2 I)``: the symmetric part with negative
        eigenvalues set to zero.
    noise_variance_ : float
        ``xi^2``.
    n_iter_ : int
        EM iterations of the best of the ``n_init`` fits.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when ``X``
        has feature names that are all strings.

    See Also
    --------
    BayesDenoiser : The same formula with the true mixture (the oracle).
    sklearn.mixture.GaussianMixture : The mixture fit used here.

    Notes
    -----
    The plug-in of the Bayes denoiser of Section 4 of the paper (Theorem 4.1):

    ``E[X|Z=z] = sum_k beta_k(z) (m_k + Gamma_k S_k^{-1} (z - m_k))``,
    ``beta_k(z)`` proportional to ``pi_k N(z; m_k, S_k)``.

    When a fitted ``S_k`` has a direction of variance below ``xi^2`` the data
    show no signal there, and clipping ``S_k - xi^2 I`` at zero makes the
    denoiser shrink that direction fully onto ``m_k``. Cost of ``transform``:
    ``O(n_samples n_components n_features^2)``.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798 (2026),
       Section 4 (the Bayes denoiser that the plug-in estimates).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import GaussianMixtureDenoiser
    >>> from sk_softmix.datasets import make_gaussian_mixture
    >>> Z, X, _ = make_gaussian_mixture(
    ...     2000, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    ... )
    >>> denoiser = GaussianMixtureDenoiser(noise_variance=4.0, random_state=0)
    >>> mse = -denoiser.fit(Z).score(Z, X)
    >>> bool(mse < 1.6)  # the best affine denoiser's risk is 1.56
    True
    """

    _parameter_constraints: dict = {
        "n_components": [Count(1)],
        "covariance_type": [StrOptions({"full", "tied", "diag", "spherical"})],
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Count(0)],
        "n_init": [Count(1)],
        "init_params": [StrOptions({"kmeans", "k-means++", "random", "random_from_data"})],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_components=2,
        covariance_type="full",
        noise_variance=None,
        tol=1e-5,
        reg_covar=1e-6,
        max_iter=200,
        n_init=1,
        init_params="kmeans",
        random_state=None,
    ):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.noise_variance = noise_variance
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit a Gaussian mixture to the noisy ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.
        y : array-like of shape (n_samples, n_features), default=None
            Clean counterparts of ``X``: used only to estimate
            ``noise_variance`` (the mean square of ``X - y``) when it is
            ``None``. Any other ``y`` (a Pipeline's labels) is ignored.

        Returns
        -------
        self : object
            The fitted denoiser.
        """
        with unchanged_on_error(self):
            X = validate_data(self, X, dtype=FLOAT_DTYPES)
            clean = clean_targets(y, X)
            if self.noise_variance is not None:
                xi2 = float(self.noise_variance)
            elif clean is not None:
                # Z - X is the noise itself: its mean square estimates xi^2
                xi2 = float(np.mean(np.square(X - clean, dtype=np.float64)))
            else:
                raise ValueError(
                    "GaussianMixtureDenoiser needs noise_variance (xi^2), the "
                    "variance of the Gaussian noise in X, to turn the fitted noisy "
                    "covariances S_k into signal covariances S_k - xi^2 I, or clean "
                    "targets y of X's shape to estimate it from; got "
                    f"{describe_ignored_target(y)} and noise_variance=None."
                )
            n_samples, n_features = X.shape
            if n_samples < self.n_components:
                raise ValueError(
                    f"GaussianMixtureDenoiser with n_components="
                    f"{self.n_components} needs at least that many samples; got "
                    f"n_samples={n_samples}."
                )
            gmm = GaussianMixture(
                n_components=self.n_components,
                covariance_type=self.covariance_type,
                tol=self.tol * n_features,  # GaussianMixture's tol is per sample
                reg_covar=self.reg_covar,
                max_iter=self.max_iter,
                n_init=self.n_init,
                init_params=self.init_params,
                random_state=self.random_state,
            )
            # EM in float64 even for float32 input: the posterior is computed
            # in float64 from these parameters anyway.
            scale = checked_scale(X, type(self).__name__)
            gmm.fit(X.astype(np.float64, copy=False) / scale)
            noisy = expand_covariances(
                gmm.covariances_, self.covariance_type, self.n_components, n_features
            ) * (scale * scale)
            warn_if_misspecified(noisy_variance(X), xi2, type(self).__name__, trains=False)
            self.gmm_ = gmm
            self.scale_ = scale
            self.means_ = np.array(gmm.means_, dtype=np.float64) * scale
            self.weights_ = np.array(gmm.weights_, dtype=np.float64)
            self.noisy_covariances_ = noisy
            self.signal_covariances_ = psd_part(noisy - xi2 * np.eye(n_features))
            self.noise_variance_ = xi2
            self.n_iter_ = int(gmm.n_iter_)
        return self

    def _posterior_parameters(self):
        return (
            self.means_,
            self.weights_,
            self.noisy_covariances_,
            self.signal_covariances_,
        )


def expand_covariances(
    covariances: np.ndarray, covariance_type: str, n_components: int, n_features: int
) -> np.ndarray:
    """Expand ``GaussianMixture.covariances_`` to one full matrix per component.

    Parameters
    ----------
    covariances : ndarray
        Shape (K, p, p) for "full", (p, p) for "tied", (K, p) for "diag",
        (K,) for "spherical".
    covariance_type : {"full", "tied", "diag", "spherical"}
    n_components : int
        K.
    n_features : int
        p.

    Returns
    -------
    ndarray of shape (n_components, n_features, n_features)
    """
    covariances = np.asarray(covariances, dtype=np.float64)
    identity = np.eye(n_features)
    if covariance_type == "full":
        return covariances.copy()
    if covariance_type == "tied":
        return np.broadcast_to(covariances, (n_components,) + identity.shape).copy()
    if covariance_type == "diag":
        # (K, p) -> (K, p, p): variances on the diagonals
        return covariances[:, :, None] * identity
    if covariance_type == "spherical":
        # (K,) -> (K, p, p): one variance per component
        return covariances[:, None, None] * identity
    raise ValueError(
        f"covariance_type must be 'full', 'tied', 'diag' or 'spherical'; got {covariance_type!r}."
    )
