"""What every denoiser of the package shares: transform, predict, score, tags."""

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin
from sklearn.metrics import mean_squared_error
from sklearn.utils.validation import check_is_fitted, validate_data

from ..training._validation import FLOAT_DTYPES, clean_targets


class DenoiserMixin(OneToOneFeatureMixin, TransformerMixin):
    """A transformer from noisy to denoised points, scored against clean ones.

    Subclasses implement ``_denoise(X)`` on a validated float array.
    """

    def _denoise(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def transform(self, X):
        """Denoise ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.

        Returns
        -------
        X_denoised : ndarray of shape (n_samples, n_features)
            Same dtype as ``X`` (float32 or float64).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        return self._denoise(X)

    def predict(self, X):
        """Denoise ``X``; identical to :meth:`transform`.

        Provided so that regression scorers such as
        ``scoring="neg_mean_squared_error"`` apply, with the clean points as
        targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.

        Returns
        -------
        X_denoised : ndarray of shape (n_samples, n_features)
        """
        return self.transform(X)

    def _stein_risks(self, X: np.ndarray) -> np.ndarray:
        """Per-sample Stein's unbiased risk estimate, per entry, at the fitted xi^2."""
        raise NotImplementedError

    def score(self, X, y=None):
        """Negative mean squared error per entry, against clean ``y`` or estimated.

        With clean targets it is measured; without them (``y=None``, or a
        ``y`` not shaped like ``X``, such as a Pipeline's labels) it is
        Stein's unbiased risk estimate at the fitted ``noise_variance_``,
        whose expectation is that error, so that ``cross_validate`` and
        ``GridSearchCV`` choose hyperparameters from noisy data alone, as
        ``GaussianMixture.score`` needs no labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations, independent of the fitted prompt (held-out
            points) when ``y`` is not given.
        y : array-like of shape (n_samples, n_features), default=None
            Their clean counterparts.

        Returns
        -------
        score : float
            ``-mean_squared_error(y, self.predict(X))``, the average over all
            entries, or minus the mean SURE per entry; higher is better.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        clean = clean_targets(y, X)
        if clean is None:
            return -float(np.mean(self._stein_risks(X)))
        return -float(mean_squared_error(clean, self._denoise(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.target_tags.required = False
        return tags
