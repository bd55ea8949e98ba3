"""LDA, shrinkage LDA and shrinkage QDA from weighted samples.

scikit-learn's ``LinearDiscriminantAnalysis.fit`` takes no ``sample_weight``.
With token weights ``w_i`` (the classifier's merged repeated rows, its
``sample_weight`` and ``class_weight``) the linear start is the same model
fitted on the weighted empirical distribution: class priors ``pi_c``, class
means ``mu_c`` and the pooled within-class covariance ``Sigma`` are weighted
averages, and the scores are LDA's, ``x^T Sigma^+ mu_c - 1/2 mu_c^T
Sigma^+ mu_c + log pi_c``. QDA keeps each class's own covariance, shrunk by
the Ledoit-Wolf formula as shrinkage LDA's are before pooling.

The weights count relative to each other only: the number of samples that
the Ledoit-Wolf shrinkage divides by is Kish's
effective sample size ``(sum w)^2 / sum w^2``, which is ``n`` for equal
weights (then both functions are scikit-learn's, up to rounding and to a
shift of every logit by the same amount) and does not change when every
weight is multiplied by a constant.
"""

import numpy as np

# Relative eigenvalues of the standardised within-class covariance below
# which a direction counts as unresolved, as scikit-learn's SVD solver cuts
# singular values of the standardised data below ``tol=1e-4``.
RANK_TOLERANCE = 1e-4
# Where no class has any spread, the fraction of the total covariance that
# stands in for the within-class one: two classes one total standard deviation
# apart then get logits of about +-50.
NO_SPREAD_FRACTION = 1e-2
# QDA: the fraction of each feature's total variance added to every class's
# covariance, which keeps a class of no spread along a direction invertible.
QDA_RIDGE = 1e-6


def effective_sample_size(weights: np.ndarray) -> float:
    """Kish's ``(sum w)^2 / sum w^2``: ``n`` for equal weights, fewer otherwise."""
    weights = np.asarray(weights, dtype=np.float64)
    return float(weights.sum() ** 2 / np.square(weights).sum())


def weighted_class_statistics(X, labels, weights, n_classes):
    """Priors (C,), means (C, d) and each sample's centred features (n, d).

    ``weights`` are normalised to sum to 1 first; every class needs a
    positive weight.
    """
    p = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    priors = np.bincount(labels, weights=p, minlength=n_classes)
    one_hot = np.eye(n_classes)[labels] * p[:, None]  # (n, C)
    means = one_hot.T @ X / priors[:, None]  # (C, n) @ (n, d) -> (C, d)
    return priors, means, X - means[labels]


def weighted_lda(X, labels, weights, n_classes, shrinkage=False):
    """``coef_`` and ``intercept_`` of weighted LDA, in scikit-learn's shapes.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    labels : ndarray of shape (n,)
        Class indices ``0..C-1``, every class with a positive weight.
    weights : ndarray of shape (n,)
        Positive sample weights.
    n_classes : int
    shrinkage : bool, default=False
        ``False``: the pooled (maximum-likelihood) covariance,
        pseudo-inverted on the directions scikit-learn's SVD solver keeps. ``True``: each class's
        covariance shrunk by the Ledoit-Wolf formula on its standardised
        features and pooled by the priors, as
        ``LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")``.

    Returns
    -------
    coef : ndarray of shape (1, d) for two classes, else (C, d)
    intercept : ndarray of shape (1,) or (C,)
    """
    X = np.asarray(X, dtype=np.float64)
    priors, means, centred = weighted_class_statistics(X, labels, weights, n_classes)
    p = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    if shrinkage:
        covariance = sum(
            priors[c] * _ledoit_wolf(centred[labels == c], p[labels == c]) for c in range(n_classes)
        )
        precision_means = np.linalg.lstsq(covariance, means.T, rcond=None)[0].T  # (C, d)
    else:
        covariance = (centred * p[:, None]).T @ centred  # (d, n) @ (n, d) -> (d, d)
        if not np.any(covariance):
            # No class has any spread (each is one point, repeated): the limit
            # of LDA as the spread vanishes is the nearest class mean, which a
            # small fraction of the total covariance gives with confident
            # (large, finite) scores. All points equal: the priors alone.
            spread = X - priors @ means
            covariance = NO_SPREAD_FRACTION * ((spread * p[:, None]).T @ spread)
        precision_means = _standardised_pseudo_solve(covariance, means.T).T
    coef = precision_means  # (C, d): Sigma^+ mu_c
    intercept = -0.5 * np.sum(coef * means, axis=1) + np.log(priors)
    if n_classes == 2:
        return (coef[1] - coef[0])[None], np.array([intercept[1] - intercept[0]])
    return coef, intercept


def weighted_qda(X, labels, weights, n_classes):
    """``coef_``, ``intercept_`` and ``Q`` of Gaussian classes with their own
    Ledoit-Wolf covariances, each class's log-density plus its log-prior.

    Class ``c``'s score is ``log pi_c + log N(x; mu_c, Sigma_c)`` up to a
    constant shared by the classes: ``x^T Q_c x + b_c^T x + a_c`` with
    ``Q_c = -Sigma_c^{-1} / 2``, ``b_c = Sigma_c^{-1} mu_c`` and
    ``a_c = -mu_c^T Sigma_c^{-1} mu_c / 2 - log|Sigma_c| / 2 + log pi_c``; for
    two classes the difference of class 1's and class 0's. ``Sigma_c`` is the
    class's shrunk covariance (as shrinkage LDA's before pooling) plus
    ``QDA_RIDGE`` times the total variance of each feature, so that a class
    with no spread along a direction (one point; a one-hot level it never
    takes) stays confident but finite.

    Returns ``coef`` (1 or C, d), ``intercept`` (1 or C,) and ``Q``
    (1 or C, d, d), symmetric, in the classifier's shapes.
    """
    X = np.asarray(X, dtype=np.float64)
    priors, means, centred = weighted_class_statistics(X, labels, weights, n_classes)
    p = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    total_variance = p @ np.square(X - priors @ means)  # (d,)
    floor = np.where(total_variance > 0, total_variance, 1.0) * QDA_RIDGE
    quadratic, coef, intercept = [], [], []
    for c in range(n_classes):
        members = labels == c
        covariance = _ledoit_wolf(centred[members], p[members]) + np.diag(floor)
        precision = np.linalg.inv(covariance)
        precision = (precision + precision.T) / 2
        _, log_determinant = np.linalg.slogdet(covariance)
        quadratic.append(-0.5 * precision)
        coef.append(precision @ means[c])
        intercept.append(-0.5 * means[c] @ coef[-1] - 0.5 * log_determinant + np.log(priors[c]))
    quadratic, coef, intercept = np.array(quadratic), np.array(coef), np.array(intercept)
    if n_classes == 2:
        return (
            (coef[1] - coef[0])[None],
            np.array([intercept[1] - intercept[0]]),
            (quadratic[1] - quadratic[0])[None],
        )
    return coef, intercept, quadratic


def _standardised_pseudo_solve(covariance, right):
    """``Sigma^+ right`` on the directions whose standardised eigenvalue is resolved.

    The covariance is standardised to unit diagonal first (a constant
    feature keeps scale 1 and is dropped as a zero eigenvalue), as
    scikit-learn's SVD solver scales the features by their within-class
    standard deviations before its cut-off.
    """
    scale = np.sqrt(np.diag(covariance))
    scale[scale == 0] = 1.0
    correlation = covariance / np.outer(scale, scale)
    eigenvalues, eigenvectors = np.linalg.eigh(correlation)
    kept = eigenvalues > RANK_TOLERANCE**2
    basis = eigenvectors[:, kept] / np.sqrt(eigenvalues[kept])  # (d, r)
    return (basis @ (basis.T @ (right / scale[:, None]))) / scale[:, None]


def _ledoit_wolf(centred, p):
    """The Ledoit-Wolf shrunk covariance of one class from weighted samples.

    ``centred`` (n_c, d) are the class's samples minus its weighted mean,
    ``p`` their weights (any scale). Computed on the standardised features
    and scaled back, as scikit-learn's LDA does; with equal weights it is
    ``sklearn.covariance.ledoit_wolf`` on them.
    """
    p = p / p.sum()
    n_effective = 1.0 / np.square(p).sum()
    scale = np.sqrt(p @ np.square(centred))
    scale[scale == 0] = 1.0
    Z = centred / scale  # standardised (n_c, d)
    d = Z.shape[1]
    empirical = (Z * p[:, None]).T @ Z  # (d, d)
    mu = np.trace(empirical) / d
    # delta: squared distance of the empirical covariance to mu I, per feature;
    # beta: the sampling variance of the empirical covariance, per feature
    delta = (np.sum(np.square(empirical)) - d * mu**2) / d
    fourth = p @ np.square(np.sum(np.square(Z), axis=1))  # mean of ||z_i||^4
    beta = (fourth - np.sum(np.square(empirical))) / (d * n_effective)
    beta = min(beta, delta)
    shrinkage = 0.0 if beta <= 0 else beta / delta
    shrunk = (1 - shrinkage) * empirical + shrinkage * mu * np.eye(d)
    return shrunk * np.outer(scale, scale)
