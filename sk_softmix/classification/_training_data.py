"""The classifier's training set as the model sees it: tokens, weights, coordinates.

Before any start or head is fitted, ``fit`` turns ``(X, y, sample_weight)``
into the prompt's tokens: the classes and label indices, each row's weight
(``sample_weight`` times ``class_weight``), repeated rows merged into one
weighted token for kernel heads (so that leave-one-out never sees a
copy), and the coordinates the model works in (standardised, or for kernel
heads at least at unit root-mean-square). :func:`training_tokens` does all
of it from values, so it is tested without an estimator.
"""

import warnings
from typing import NamedTuple

import numpy as np

from ..training._units import power_of_two_scale
from ..training._validation import unstandardised_features
from ._tokens import (
    check_class_counts,
    distinct_tokens,
    equal_weights,
    left_in_shares,
    repeats_are_observations,
    row_weights,
)


class TrainingTokens(NamedTuple):
    """The tokens of the prompt, in the model's coordinates.

    ``X`` and ``labels`` are the tokens (distinct ``(x, label)`` rows for
    kernel heads, every row otherwise), ``rows`` the training rows that
    hold them (``None``: every row, in order), ``weights`` theirs
    (``None``: equal), ``left_in`` the share of its token a leave-one-out
    query keeps and ``counts`` the rows each token holds (``None``: one
    each); ``feature_mean`` and ``feature_scale`` map a row of the
    training set to the model's coordinates.
    """

    X: np.ndarray
    labels: np.ndarray
    classes: np.ndarray
    weights: np.ndarray | None
    rows: np.ndarray | None
    left_in: np.ndarray | None
    counts: np.ndarray | None
    feature_mean: np.ndarray
    feature_scale: np.ndarray


def training_tokens(
    X, y, sample_weight, *, class_weight, kernel: bool, standardize, warn_unstandardised: bool
) -> TrainingTokens:
    """The prompt's tokens from validated ``X`` and ``y``.

    ``kernel`` says whether the heads are kernel heads (which take weights
    and merge repeated rows; bilinear heads refuse unequal weights),
    ``standardize`` is the estimator's parameter, and
    ``warn_unstandardised`` whether raw features left as given deserve a
    warning (heads that train).
    """
    classes, labels = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(
            f"SoftmaxAttentionClassifier needs at least 2 classes in y; got {len(classes)} "
            f"({classes.tolist()})."
        )
    weights = row_weights(y, classes, sample_weight, class_weight, X)
    rows = left_in = counts = None
    if kernel:
        rows, weights, counts = distinct_tokens(X, labels, weights, return_counts=True)
        if len(rows) == len(X) and equal_weights(weights):
            weights = None  # no repeated row, no weight: the plain fit, exactly
        X, labels = X[rows], labels[rows]
        if counts.max() == 1 or not repeats_are_observations(X):
            counts = None  # no repeated row, or copies: Kish's count of the weights
        left_in = None if counts is None else left_in_shares(counts)
    elif not equal_weights(weights):
        raise ValueError(
            "sample_weight and class_weight weigh the tokens of kernel heads; the "
            "bilinear heads take no weights. Use head='auto' with init='auto', or "
            "equal weights."
        )
    else:
        weights = None  # equal weights change nothing
    check_class_counts(labels, classes, minimum=1 if kernel else 2)
    problem = unstandardised_features(X)
    if problem is not None and standardize is False and warn_unstandardised:
        warnings.warn(
            f"SoftmaxAttentionClassifier: X is not standardised ({problem}) and "
            "standardize=False. The heads train on the features as given, where a "
            "selective solution is hard to find, so the fit may stay at its linear "
            "start (LDA's accuracy). Use standardize='auto', or put a "
            "StandardScaler in front.",
            UserWarning,
            stacklevel=6,  # the user's call of fit
        )
    standardise = standardize is True or (standardize == "auto" and problem is not None)
    mean, scale = feature_standardisation(X, standardise, weights)
    if kernel and not standardise:
        # kernel heads are tuned in float32: at unit root-mean-square the
        # squared distances of data at any scale float64 serves (1e-20,
        # 1e19) stay inside float32's range; a power of two rounds nothing
        scale = np.full(X.shape[1], power_of_two_scale(X))
    if standardise or kernel:
        X = ((X - mean) / scale).astype(X.dtype, copy=False)
    return TrainingTokens(X, labels, classes, weights, rows, left_in, counts, mean, scale)


def feature_standardisation(
    X, standardise: bool, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The centre and scale of each feature the model works in.

    ``(mean, standard deviation)`` of ``X``'s columns when ``standardise``
    (a constant column keeps scale 1), else zeros and ones; weighted by the
    rows' ``weights`` where given, so that repeated rows merged into one
    weighted token give the same coordinates as the rows themselves.
    """
    n_features = X.shape[1]
    if not standardise:
        return np.zeros(n_features), np.ones(n_features)
    X = X.astype(np.float64)
    if weights is None:
        mean = X.mean(axis=0)
        scale = X.std(axis=0)
    else:
        mean = np.average(X, axis=0, weights=weights)
        scale = np.sqrt(np.average(np.square(X - mean), axis=0, weights=weights))
    # below float64's resolution of the column the spread is rounding: constant
    constant = scale <= 1e-12 * np.maximum(np.abs(mean), scale.max())
    scale[constant] = 1.0
    return mean, scale
