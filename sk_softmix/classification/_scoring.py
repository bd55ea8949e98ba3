"""The per-sample losses and errors that every choice in the classifier's fit compares.

Scores are ``(n, 1)`` for two classes (the logit of ``classes_[1]``) or
``(n, C)`` logits; the linear starts, the temperatures and the kernel heads
are all judged by these, paired sample by sample.
"""

import numpy as np
import torch

from ..training._stopping import significantly_lower
from ._heads import classification_losses

# Standard errors of the paired difference by which a start or heads chosen
# for their log-loss may be less accurate than what they replace.
N_STANDARD_ERRORS = 1.0


def score_losses(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-sample log-loss of scores (n, 1) (logistic) or logits (n, C) (cross-entropy),
    in float64: :func:`~._heads.classification_losses` on NumPy arrays."""
    losses = classification_losses(
        torch.as_tensor(scores, dtype=torch.float64), torch.as_tensor(labels, dtype=torch.long)
    )
    return losses.numpy()


def score_errors(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-sample misclassification (n,), 0 or 1, of scores (n, 1) or logits (n, C)."""
    scores = np.asarray(scores)
    predicted = (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(axis=1)
    return (predicted != labels).astype(np.float64)


def less_accurate(errors, reference_errors, weights=None, n_effective=None) -> bool:
    """Whether ``errors`` (0/1 per sample) exceed ``reference_errors`` on the same
    samples by more than ``N_STANDARD_ERRORS`` standard errors of the paired
    difference: a lower log-loss must not be bought with accuracy."""
    return significantly_lower(
        torch.as_tensor(reference_errors),
        torch.as_tensor(errors),
        N_STANDARD_ERRORS,
        None if weights is None else torch.as_tensor(weights),
        n_effective,
    )
