"""The paper's coordinates of a fitted binary classifier (Section 3).

A binary head on the population is ``f(x) = w^T x + b + r sigmoid(s0 +
s^T x)`` (eq. 6-7), and its Bayes target is LDA's ``(w*, b*)``. The
classifier exposes both as methods, for the training-dynamics studies that
compare them; they read only the fitted prompt and heads.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..theory.lda import class_statistics, lda_coordinates
from ._heads import heads_coordinates


class EffectiveCoordinatesMixin:
    """``effective_coordinates`` and ``bayes_coordinates`` of a fitted binary model."""

    def effective_coordinates(self) -> dict:
        """Effective coordinates ``(w, b, r, s, s0)`` of a fitted binary model.

        Computed head by head from the prompt's class means, pooled covariance
        and prior (:func:`sk_softmix.theory.lda.effective_coordinates`); compare
        ``w`` and ``b`` (with ``r``, ``s``) to
        ``LinearDiscriminantAnalysis().coef_`` and ``intercept_``, or to
        :func:`sk_softmix.theory.lda.lda_coordinates`.

        Returns
        -------
        dict
            ``w`` (n_heads, d), ``b``, ``r`` (n_heads,), ``s`` (n_heads, d),
            ``s0`` (float).
        """
        check_is_fitted(self)
        if len(self.classes_) != 2:
            raise ValueError("Effective coordinates are defined for two classes only.")
        if np.any(getattr(self, "W_", 0.0)):
            raise ValueError(
                "Effective coordinates (eq. 7) are those of the paper's bilinear heads; this "
                "model has kernel heads (a key norm W_). Fit with head='bilinear'."
            )
        statistics = class_statistics(self.prompt_X_, 2 * self.prompt_y_ - 1)
        return heads_coordinates(self.U11_, self.u12_, self.v21_, self.v22_, statistics)

    def bayes_coordinates(self) -> tuple[np.ndarray, float]:
        """Bayes (LDA) coordinates ``(w*, b*)`` of the prompt of a binary model.

        From the prompt's class means, pooled covariance and prior
        (:func:`sk_softmix.theory.lda.lda_coordinates`): the score ``w*^T x + b*``
        that :meth:`effective_coordinates` should approach, equal to
        ``LinearDiscriminantAnalysis(solver="lsqr")``'s ``coef_`` and
        ``intercept_`` fitted on the prompt.

        Returns
        -------
        w : ndarray of shape (n_features,)
        b : float
        """
        check_is_fitted(self)
        if len(self.classes_) != 2:
            raise ValueError("Bayes-LDA coordinates are defined for two classes only.")
        return lda_coordinates(*class_statistics(self.prompt_X_, 2 * self.prompt_y_ - 1))
