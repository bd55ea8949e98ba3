"""Input checks shared by the estimators (semantic checks that parameter
constraints cannot express)."""

from contextlib import contextmanager

import numpy as np
from sklearn.utils import check_array


def check_clean_targets(y, X: np.ndarray) -> np.ndarray:
    """Validate clean targets ``y`` paired with noisy observations ``X``.

    A denoiser learns the map from noisy to clean points, so ``y`` must have
    exactly the shape of ``X``; it is cast to ``X``'s dtype.
    """
    y = check_array(y, dtype=X.dtype, ensure_2d=False, input_name="y")
    if y.shape != X.shape:
        raise ValueError(
            "y must hold the clean counterparts of X, with the same shape as X "
            f"{X.shape}; got y of shape {y.shape}."
        )
    return y


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
