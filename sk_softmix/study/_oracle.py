"""The Bayes classifier of a known Gaussian mixture per class: the study's oracle."""

import numpy as np
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data


class MixtureBayesClassifier(ClassifierMixin, BaseEstimator):
    """Posterior class probabilities of a known mixture, ignoring the data.

    Class ``c`` has prior ``priors[c]`` and density
    ``sum_j (1/K_c) N(x; means[c][j], I)``: equal-weight unit-variance clusters,
    which covers the paper's LDA configurations (one cluster per class) and the
    XOR mixture (two per class). ``fit`` only records the classes and the
    number of features, so that ``cross_validate`` can score it like any
    other classifier.

    Parameters
    ----------
    means : dict
        Class label -> array of shape (n_clusters, n_features).
    priors : dict
        Class label -> prior probability; the values sum to one.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels of ``means``, sorted.
    n_features_in_ : int
        Number of features seen by ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix.study import MixtureBayesClassifier
    >>> oracle = MixtureBayesClassifier({0: [[-1.0]], 1: [[1.0]]}, {0: 0.5, 1: 0.5})
    >>> oracle.fit(np.zeros((2, 1)), [0, 1]).predict_proba([[0.0]])
    array([[0.5, 0.5]])
    """

    def __init__(self, means, priors):
        self.means = means
        self.priors = priors

    def fit(self, X, y):
        """Record the classes; the mixture itself is known.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Only its number of features is used.
        y : array-like of shape (n_samples,)
            Ignored: the classes are the keys of ``means``.

        Returns
        -------
        self : MixtureBayesClassifier
            This estimator.
        """
        validate_data(self, X, y)
        self.classes_ = np.array(sorted(self.means))
        return self

    def predict_log_joint(self, X) -> np.ndarray:
        """``log P(y = c) + log p(x | y = c)`` up to a constant, per class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The log joint densities, in the order of ``classes_``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        columns = []
        for label in self.classes_:
            centres = np.asarray(self.means[label], dtype=np.float64)
            squared = ((X[:, None, :] - centres[None]) ** 2).sum(axis=2)  # (n, n_clusters)
            columns.append(
                np.log(self.priors[label]) + logsumexp(-squared / 2, axis=1) - np.log(len(centres))
            )
        return np.stack(columns, axis=1)

    def predict_proba(self, X) -> np.ndarray:
        """Posterior probability of each class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one, columns in the order of ``classes_``.
        """
        return softmax(self.predict_log_joint(X), axis=1)

    def predict(self, X) -> np.ndarray:
        """The most probable class (the Bayes rule).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            One label of ``classes_`` per point.
        """
        return self.classes_[np.argmax(self.predict_log_joint(X), axis=1)]
