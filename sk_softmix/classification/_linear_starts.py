"""The classifier's linear start: the best regularised linear classifier for the data.

Plain LDA is the paper's linear special case, but on real data it is often
not the best linear classifier: with more features than samples its pooled
covariance is singular (faces, 625 pixels and 160 training images: 0.715
accuracy where logistic regression has 0.965), and on digits it is
overconfident (log-loss 2.5 times logistic regression's). So the default
start compares three linear scores by cross-validated log-loss on the
training set (``best_linear_start``):

- ``"lda"``: ``LinearDiscriminantAnalysis()``;
- ``"shrinkage_lda"``: ``LinearDiscriminantAnalysis(solver="lsqr",
  shrinkage="auto")``, the Ledoit-Wolf shrunk pooled covariance;
- ``"logistic"``: ``LogisticRegression()`` (L2, ``C=1``).

Each gives a skip map and intercept of the classifier's shapes, ``(width,
d)`` and ``(width,)``, with ``width`` 1 for two classes (the score of
``classes_[1]``) and ``C`` otherwise.
"""

import warnings

import numpy as np
import torch
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from ..training._stopping import significantly_lower
from ..training._units import rms_scale
from ._heads import classification_losses, lda_skip
from ._tokens import equal_weights
from ._weighted_linear import weighted_lda

LINEAR_STARTS = ("lda", "shrinkage_lda", "logistic")

# Folds of the cross-validation that compares the linear starts (fewer when
# a class has fewer samples), and the standard errors by which a regularised
# start must beat LDA there.
N_FOLDS = 5
N_STANDARD_ERRORS = 1.0
# ... and by this fraction of LDA's loss: a start that is LDA up to a small
# shrinkage has paired differences so consistent that one standard error is
# tiny (two Gaussian classes in 2-D, 200 points: shrinkage LDA won by 2.3%
# in one split and lost in another). Where LDA is poor the gain is large:
# 47% on breast cancer, 60% on digits, 99% on 625-pixel faces.
MIN_RELATIVE_GAIN = 0.05


def linear_skip(
    name: str, X: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``coef_`` and ``intercept_`` of the linear start ``name`` fitted on ``(X, labels)``.

    ``labels`` are class indices ``0..C-1``; the shapes are scikit-learn's,
    ``(1, d)`` and ``(1,)`` for two classes, ``(C, d)`` and ``(C,)`` otherwise.
    ``weights`` are the rows' positive weights (``None``: equal). With
    unequal weights both LDAs are the weighted ones of ``_weighted_linear``
    (scikit-learn's take no weights) and logistic regression takes them as
    ``sample_weight``, scaled to mean 1 so that its penalty weighs as much as
    with equal weights.
    """
    n_classes = int(labels.max()) + 1
    # fitted at unit root-mean-square and mapped back, as lda_skip does: the
    # power of two rounds nothing, and float32 data near 1e20 stays finite
    scale = 2.0 ** np.round(np.log2(rms_scale(X)))
    unweighted = equal_weights(weights)
    if name == "lda" and unweighted:
        try:
            return lda_skip(X, labels)
        except (ValueError, IndexError, np.linalg.LinAlgError):
            # scikit-learn's SVD solver fails where no class has any spread
            # (IndexError) or a class has one sample; the weighted form below
            # pseudo-inverts whatever covariance there is, even none
            pass
    X = np.asarray(X, dtype=np.float64) / scale
    if name == "lda" or (name == "shrinkage_lda" and not unweighted):
        weights = np.ones(len(X)) if unweighted else weights
        coef, intercept = weighted_lda(X, labels, weights, n_classes, name != "lda")
        return coef / scale, intercept
    if name == "shrinkage_lda":
        model = LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto").fit(X, labels)
    elif name == "logistic":
        sample_weight = None if unweighted else weights * (len(weights) / np.sum(weights))
        with warnings.catch_warnings():
            # a start that has not converged is judged by its held-out loss
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = LogisticRegression(max_iter=1000).fit(X, labels, sample_weight=sample_weight)
    else:
        raise ValueError(f"Unknown linear start {name!r}; expected one of {LINEAR_STARTS}.")
    return model.coef_ / scale, model.intercept_.astype(np.float64)


def linear_scores(coef: np.ndarray, intercept: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Scores ``X coef^T + intercept`` (n, width)."""
    return np.asarray(X, dtype=np.float64) @ coef.T + intercept


def score_losses(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-sample log-loss of scores (n, 1) (logistic) or logits (n, C) (cross-entropy),
    in float64: :func:`~._heads.classification_losses` on NumPy arrays."""
    losses = classification_losses(
        torch.as_tensor(scores, dtype=torch.float64), torch.as_tensor(labels, dtype=torch.long)
    )
    return losses.numpy()


def cross_validated_scores(
    X: np.ndarray,
    labels: np.ndarray,
    random_state: int,
    names=LINEAR_STARTS,
    weights: np.ndarray | None = None,
) -> dict:
    """Out-of-fold scores (n, width) of each linear start, on stratified folds.

    Every row is scored by the start fitted without its fold: ``N_FOLDS``
    folds, or as many as the smallest class has samples (at least 2). A
    start that cannot be fitted on a fold's training rows (LDA on one
    sample per class) scores that fold by those rows' class priors, the
    linear score with no slope.
    """
    n_classes = int(labels.max()) + 1
    n_folds = max(2, min(N_FOLDS, int(np.bincount(labels).min())))
    folds = StratifiedKFold(n_folds, shuffle=True, random_state=random_state).split(X, labels)
    width = 1 if n_classes == 2 else n_classes
    scores = {name: np.empty((len(X), width)) for name in names}
    for train, test in folds:
        fold_weights = None if weights is None else weights[train]
        for name in names:
            try:
                coef, intercept = linear_skip(name, X[train], labels[train], fold_weights)
            except ValueError:
                coef, intercept = prior_score(labels[train], n_classes, fold_weights, X.shape[1])
            scores[name][test] = linear_scores(coef, intercept, X[test])
    return scores


def prior_score(labels, n_classes, weights, n_features):
    """``coef_`` (zeros) and ``intercept_`` (the log-priors) of a score with no slope."""
    priors = np.bincount(labels, weights=weights, minlength=n_classes).astype(np.float64)
    with np.errstate(divide="ignore"):
        log_priors = np.log(priors / priors.sum())
    log_priors = np.maximum(log_priors, np.log(np.finfo(np.float64).tiny))  # a class unseen
    if n_classes == 2:
        return np.zeros((1, n_features)), np.array([log_priors[1] - log_priors[0]])
    return np.zeros((n_classes, n_features)), log_priors


def best_linear_start(
    X: np.ndarray,
    labels: np.ndarray,
    random_state: int,
    weights: np.ndarray | None = None,
    n_effective: float | None = None,
) -> tuple[str, np.ndarray, np.ndarray]:
    """The linear start: LDA unless another start's cross-validated log-loss
    is lower by ``N_STANDARD_ERRORS`` standard errors and ``MIN_RELATIVE_GAIN``.

    The one-standard-error rule keeps the paper's linear special case where
    the data cannot tell the starts apart: on wine (178 samples), picking the
    lowest cross-validated loss chose a regularised start in 2 folds of 5 and
    cost 1.1 points of accuracy and 70% more log-loss than LDA. With
    ``weights`` the losses are weighted means and the test a weighted one,
    on ``n_effective`` samples where given (``_tokens.effective_size``).

    Returns its name, its out-of-fold scores (n, width) and their per-sample
    losses (n,).
    """
    scores = cross_validated_scores(X, labels, random_state, weights=weights)
    losses = {name: score_losses(value, labels) for name, value in scores.items()}
    finite = [name for name in LINEAR_STARTS if np.all(np.isfinite(losses[name]))]
    best = "lda"
    others = [name for name in finite if name != "lda"]
    if others:
        challenger = min(others, key=lambda name: np.average(losses[name], weights=weights))
        lda, other = losses.get("lda"), losses[challenger]
        if "lda" not in finite or (
            np.average(other, weights=weights)
            < (1 - MIN_RELATIVE_GAIN) * np.average(lda, weights=weights)
            and significantly_lower(
                torch.as_tensor(other),
                torch.as_tensor(lda),
                N_STANDARD_ERRORS,
                None if weights is None else torch.as_tensor(weights),
                n_effective,
            )
        ):
            best = challenger
    return best, scores[best], losses[best]
