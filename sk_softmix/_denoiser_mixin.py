"""What every denoiser of the package shares: transform, predict, score, tags."""

import numpy as np
from sklearn.base import OneToOneFeatureMixin, TransformerMixin
from sklearn.metrics import mean_squared_error
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_clean_targets

FLOAT_DTYPES = [np.float64, np.float32]


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

    def score(self, X, y):
        """Negative mean squared error of the denoised ``X`` against clean ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.
        y : array-like of shape (n_samples, n_features)
            Their clean counterparts.

        Returns
        -------
        score : float
            ``-mean_squared_error(y, self.predict(X))``, the average over all
            entries; higher is better.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        y = check_clean_targets(y, X)
        return -float(mean_squared_error(y, self._denoise(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.target_tags.required = False
        return tags
