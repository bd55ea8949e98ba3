"""The classifier's training: the log-loss of its scores over the training
queries (each left out of its own prompt), a penalty on the interaction
terms, and the held-out log-loss that chooses between its starts."""

import numpy as np
import torch

from ..attention._device import as_tensor
from ..attention._threads import in_timing_probe
from ..theory.lda import class_statistics
from ..training._selection import Selection, fit_starts
from ..training._solvers import TrainingSettings, resolve_solver
from ..training._units import rms_scale
from ..training._validation import prompt_positions
from ._heads import (
    _SCALE_POWER,
    classification_losses,
    classifier_scores,
    classifier_tokens,
    coordinate_history,
)

# How much better on validation (standard errors of the per-sample difference)
# trained heads must be to replace LDA. Two, not the usual one: log-loss has a
# heavy tail that a small validation set cannot see. On iris (12 validation
# points, no error among them) overconfident trained heads passed one
# standard error in 4 folds of 5 and tripled the held-out log-loss of LDA.
# The stall of the held-out log-loss also stops L-BFGS: on separable data the
# logistic loss has no finite minimiser, and L-BFGS ran its 300 iterations
# while the heads grew overconfident (C1, 1,600 points: 2.3 s, 0.9 s now).
_SELECTION = Selection(start=2.0, checkpoint=2.0)


def train_heads(
    X,
    labels,
    n_classes,
    prompt_indices,
    validation_rows,
    starts,
    reference,
    settings,
    random_state,
    device,
):
    """Train from each start (``fit_starts``, shared by every estimator).

    ``settings`` holds the classifier's training parameters (a
    ``_bilinear_fit.BilinearSettings``); returns the ``FitOutcome`` and the
    kept run's history (the loss and, for two classes, the effective
    coordinates per evaluation).
    """
    train_rows = np.setdiff1d(
        np.arange(len(X)), validation_rows if validation_rows is not None else []
    )
    scale = rms_scale(X[prompt_indices])
    features = as_tensor(X / scale, device, torch.float32)
    targets = as_tensor(labels, device)
    prompt = classifier_tokens(
        features[as_tensor(prompt_indices, device)],
        targets[as_tensor(prompt_indices, device)],
        n_classes,
    )
    rows = as_tensor(train_rows, device)
    exclude = as_tensor(prompt_positions(prompt_indices, len(X))[train_rows], device)
    queries, query_targets = features[rows], targets[rows]
    if validation_rows is not None:
        validation = as_tensor(validation_rows, device)
        validation_features, validation_targets = features[validation], targets[validation]
    solver = resolve_solver(
        settings.solver, len(train_rows), len(prompt_indices), settings.n_heads, prompt.shape[1]
    )
    training = TrainingSettings.of(vars(settings), solver, "SoftmaxAttentionClassifier")
    binary = n_classes == 2
    snapshots = {}

    def objective(name, trained):
        recorded = snapshots.setdefault(name, [])

        def loss_on(batch):
            scores = classifier_scores(
                trained, queries[batch], prompt, exclude[batch], settings.batch_size
            )
            # a training step: not a final score, not a thread-count probe
            if binary and torch.is_grad_enabled() and not in_timing_probe():
                recorded.append({k: v.detach().clone() for k, v in trained.items()})
            loss = classification_losses(scores, query_targets[batch]).mean()
            if settings.alpha:
                loss = loss + settings.alpha * (
                    (trained["U11"] ** 2).sum() + (trained["u12"] ** 2).sum()
                )
            return loss

        def validation_losses(limit=None):
            scores = classifier_scores(
                trained, validation_features[:limit], prompt, None, settings.batch_size
            )
            return classification_losses(scores, validation_targets[:limit])

        return loss_on, validation_losses if validation_rows is not None else None

    outcome = fit_starts(
        starts,
        reference,
        objective,
        training,
        scale=scale,
        powers=_SCALE_POWER,
        n_queries=len(train_rows),
        validate=validation_rows is not None,
        selection=_SELECTION,
        random_state=random_state,
        device=device,
    )
    history = {"loss": outcome.history}
    if binary and outcome.trained and snapshots.get(outcome.start):
        statistics = class_statistics(
            X[prompt_indices].astype(np.float64), 2 * labels[prompt_indices] - 1
        )
        history.update(coordinate_history(snapshots[outcome.start], statistics, scale))
    return outcome, history
