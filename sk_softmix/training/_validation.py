"""Input checks shared by the estimators (semantic checks that parameter
constraints cannot express)."""

import warnings
from contextlib import contextmanager
from numbers import Integral

import numpy as np
import torch
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval

# The dtypes the estimators compute in; anything else becomes float64.
FLOAT_DTYPES = [np.float64, np.float32]


def torch_dtype_of(X: np.ndarray):
    """The torch dtype the estimators compute ``X`` in: float32 stays float32."""
    return torch.float64 if X.dtype == np.float64 else torch.float32


def clean_targets(y, X: np.ndarray) -> np.ndarray | None:
    """``y`` validated as the clean counterparts of ``X``, or ``None``.

    A denoiser's clean targets have exactly the shape of ``X``. Any other
    ``y`` (a Pipeline's class labels, a regression target) belongs to a later
    step: the denoiser ignores it, as scikit-learn transformers ignore ``y``,
    and this returns ``None``. Float32 and float64 are kept (casting to a
    float32 ``X``'s dtype would reject values beyond 3.4e38), other types
    become float64.
    """
    if y is None or _shape(y) != X.shape:
        return None
    return check_array(y, dtype=FLOAT_DTYPES, input_name="y")


def _shape(y) -> tuple | None:
    """The shape of array-like ``y`` (None if it has none, e.g. ragged)."""
    shape = getattr(y, "shape", None)
    if shape is not None:
        return tuple(shape)
    try:
        return np.asarray(y).shape
    except (TypeError, ValueError):
        return None


def describe_ignored_target(y) -> str:
    """How an error names a ``y`` that :func:`clean_targets` ignored."""
    if y is None:
        return "no y"
    return (
        f"a y of shape {_shape(y)}, not shaped like X, which is taken for a later "
        "step's target (a Pipeline's labels) and ignored"
    )


@contextmanager
def unchanged_on_error(estimator):
    """Restore the estimator's attributes if the block raises (or is interrupted).

    ``fit`` validates and assigns fitted attributes as it goes, as scikit-learn
    estimators do; this makes a failed or interrupted ``fit`` leave a
    previously fitted estimator exactly as it was. Attributes are only ever
    re-bound, never mutated in place, so a shallow snapshot suffices.
    """
    saved = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise


def choose_prompt(
    n_samples: int, prompt_size, random_state, rows: np.ndarray | None = None
) -> np.ndarray:
    """Sorted rows of the training set that form the prompt.

    ``prompt_size=None`` takes every row of ``rows`` (default: all
    ``n_samples``); an int takes a random subset of them. ``rows`` are the
    rows left to train on after holding some out for validation.
    """
    if prompt_size is not None and prompt_size > n_samples:
        raise ValueError(
            f"prompt_size={prompt_size} exceeds the {n_samples} samples passed to fit; "
            "use prompt_size=None to use them all."
        )
    rows = np.arange(n_samples) if rows is None else rows
    if prompt_size is None:
        return rows
    if prompt_size > len(rows):
        raise ValueError(
            f"prompt_size={prompt_size} exceeds the {len(rows)} samples left to train on "
            f"after holding out {n_samples - len(rows)} for validation (early_stopping); "
            "use a smaller prompt_size or early_stopping=False."
        )
    return np.sort(random_state.choice(rows, prompt_size, replace=False))


def prompt_positions(prompt_indices: np.ndarray, n_samples: int) -> np.ndarray:
    """For each training sample, its row in the prompt, or -1 if not in it.

    This is the ``exclude`` argument of the attention engine: a training
    query never attends to its own copy.
    """
    positions = np.full(n_samples, -1, dtype=np.int64)
    positions[prompt_indices] = np.arange(len(prompt_indices))
    return positions


def noisy_variance(X: np.ndarray) -> float:
    """Variance of the data per entry, ``trace(Cov(X)) / p``, safe at any scale."""
    X = np.asarray(X, dtype=np.float64)
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if not largest > 0 or len(X) < 2:
        return 0.0
    return float(np.mean(np.var(X / largest, axis=0))) * largest * largest


# Below this fraction of the data's variance, a noise variance is under what
# float32 training resolves (its relative precision is about 1e-7 in the
# values, 1e-14 in their squares, and SURE's noise terms need several digits).
TINY_NOISE_FRACTION = 1e-10


def warn_if_misspecified(
    variance: float, noise_variance: float, estimator_name: str, *, trains: bool = True
):
    """Warn when ``noise_variance`` cannot be the noise of data of this variance.

    Returns ``"large"`` when it exceeds the data's variance per entry (the
    plug-in answer then shrinks every direction to the mean), ``"tiny"``
    when it is below ``TINY_NOISE_FRACTION`` of it and the estimator
    ``trains`` in float32 (the answer is the identity to that precision),
    ``None`` otherwise.
    """
    if noise_variance > variance:
        warnings.warn(
            f"{estimator_name}: noise_variance={noise_variance:.4g} exceeds the "
            f"variance of X per entry, {variance:.4g}, so X cannot be signal plus "
            "noise of that variance. The answer is the clipped plug-in one, which "
            "shrinks towards the mean; check noise_variance.",
            UserWarning,
            stacklevel=3,
        )
        return "large"
    if trains and noise_variance < TINY_NOISE_FRACTION * variance:
        warnings.warn(
            f"{estimator_name}: noise_variance={noise_variance:.4g} is below "
            f"{TINY_NOISE_FRACTION:g} times the variance of X per entry, "
            f"{variance:.4g}: too small to train on in float32. The answer is the "
            "linear start, the identity to that precision.",
            UserWarning,
            stacklevel=3,
        )
        return "tiny"
    return None


# A direction of the data whose variance is below this fraction of the noise
# variance cannot hold that noise: with n points in p dimensions, pure noise
# spreads the sample eigenvalues down to about xi^2 (1 - sqrt(p / n))^2, so
# this flags only constant or duplicated features and fewer points than
# features (p / n above 0.8).
DEGENERATE_FRACTION = 0.01


def noiseless_directions(X: np.ndarray, noise_variance: float) -> int:
    """How many directions of ``X`` have a variance below ``DEGENERATE_FRACTION * xi^2``.

    Along such a direction Stein's unbiased risk estimate is unbounded below
    (the residual can stay 0 while the divergence falls without end), so a
    denoiser cannot train on it there.
    """
    X = np.asarray(X, dtype=np.float64)
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if not largest > 0:
        return X.shape[1]
    centred = X / largest - np.mean(X / largest, axis=0)
    eigenvalues = np.linalg.eigvalsh(centred.T @ centred / len(X)) * largest * largest
    return int(np.sum(eigenvalues < DEGENERATE_FRACTION * noise_variance))


# Standardised features for the classifier's heads: every varying feature's
# mean within this many of its standard deviations of zero, and their
# standard deviations within this factor of one another.
OFFSET_LIMIT, SPREAD_LIMIT = 1.0, 10.0


def unstandardised_features(X: np.ndarray) -> str | None:
    """What keeps the features of ``X`` from being standardised, or None.

    The heads' training is not invariant to shifting or rescaling single
    features: on the XOR mixture, trained heads reach 0.956 on standardised
    features and stay at the linear start (0.33, LDA's) once one feature is
    shifted by 5 standard deviations or scaled by 100.
    """
    # divided by the largest entry first, so that squares cannot overflow
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if not largest > 0:
        return None
    X = X.astype(np.float64) / largest
    mean, std = X.mean(axis=0), X.std(axis=0)
    varying = np.flatnonzero(std > 1e-12 * std.max())
    if varying.size == 0:
        return None
    problems = []
    offsets = np.abs(mean[varying]) / std[varying]
    if offsets.max() > OFFSET_LIMIT:
        worst = varying[np.argmax(offsets)]
        problems.append(
            f"feature {worst} has its mean {offsets.max():.3g} standard deviations from 0"
        )
    spread = std[varying].max() / std[varying].min()
    if spread > SPREAD_LIMIT:
        problems.append(f"the features' standard deviations span a factor of {spread:.3g}")
    return " and ".join(problems) or None


class Count(Interval):
    """``Interval(Integral, left, right)`` that refuses ``True`` and ``False``.

    ``bool`` is a subclass of ``int``, so scikit-learn's integer intervals
    accept ``max_iter=True`` (run once) and ``n_heads=True`` (a TypeError deep
    in NumPy); a count given as a bool is a mistake worth naming.
    """

    def __init__(self, left, right=None, *, closed="left"):
        super().__init__(Integral, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not isinstance(val, bool) and super().is_satisfied_by(val)

    def __str__(self):
        return f"{super().__str__()} (not a bool)"


def repeated_rows(X: np.ndarray) -> int:
    """How many rows of ``X`` repeat an earlier one.

    Gaussian noise makes exact repeats impossible; on data that has them
    (binary or count features, duplicated records) Stein's unbiased risk
    estimate can be driven down without end: the denoiser returns each
    repeated point exactly while its divergence there falls.
    """
    return int(len(X) - len(np.unique(X, axis=0)))
