"""The paper's bilinear heads, trained: the classifier's fit with ``head="bilinear"``.

The heads start from ``init`` (LDA in the skip map, or one of the paper's
constructions, ``_starts``), train on the log-loss of the training queries
(``_objective``) and give way to the untrained linear start where it
validates better on held-out pairs. The function reads the classifier's
parameters (the starts and the solver read them too) and returns what the
estimator keeps.
"""

import warnings
from typing import NamedTuple

import numpy as np

from ..training._selection import validation_split
from ._kernel_fit import prompt_with_every_class
from ._objective import train_heads
from ._starts import classifier_starts


class BilinearClassifierFit(NamedTuple):
    """The kept parameters, their prompt, the start kept and its training record."""

    parameters: dict
    prompt_indices: np.ndarray
    init: str
    history: dict
    n_iter: int


def fit_bilinear_classifier(
    classifier, X, labels, n_classes, random_state, device
) -> BilinearClassifierFit:
    """Train the bilinear heads of ``classifier`` on the tokens ``X``, ``labels``
    (in the model's coordinates) and keep the start that validates best."""
    # Trained heads fall back on the untrained linear start (LDA) when it
    # validates better: by choice with init="auto" or "lda", with a
    # warning from the paper's starts.
    reference = "lda" if classifier.residual else None
    by_default = classifier.init in ("auto", "lda") and reference is not None
    early_stopping = classifier.early_stopping if classifier.max_iter > 0 else False
    train_rows, validation_rows = validation_split(
        len(X), early_stopping, classifier.validation_fraction, random_state, labels
    )
    prompt_indices = prompt_with_every_class(
        labels, n_classes, classifier.prompt_size, random_state, train_rows
    )
    head_seed = random_state.randint(2**31 - 1)

    def starts_on_training_rows(names=None):
        return classifier_starts(
            classifier,
            X[train_rows],
            labels[train_rows],
            X[prompt_indices],
            labels[prompt_indices],
            n_classes,
            head_seed,
            names,
        )

    starts = starts_on_training_rows()
    untrained = next(iter(starts))
    reference_start = None
    if reference is not None:
        reference_start = starts.get(reference) or starts_on_training_rows([reference])[reference]
    history, n_iter = {"loss": np.empty(0)}, 0
    skip_training = classifier.max_iter == 0 or (
        validation_rows is None and classifier.early_stopping == "auto" and by_default
    )
    if skip_training:
        chosen, parameters, trained = untrained, starts[untrained], False
    else:
        outcome, history = train_heads(
            classifier,
            X,
            labels,
            n_classes,
            prompt_indices,
            validation_rows,
            starts,
            None if reference is None else (reference, reference_start),
            random_state,
            device,
        )
        chosen, parameters, trained = outcome.start, outcome.parameters, outcome.trained
        n_iter = outcome.n_iter
        if not by_default and chosen == reference and untrained != reference:
            warnings.warn(
                f"SoftmaxAttentionClassifier: trained from init={classifier.init!r}, the "
                "heads scored worse on the held-out points than the untrained "
                "linear start (LDA), which is kept (init_='lda'). Use init='auto', "
                "or early_stopping=False to keep the trained heads anyway.",
                UserWarning,
                stacklevel=5,  # the user's call of fit
            )
    if validation_rows is not None and not trained:
        # The linear start again, from every row. Trained heads keep the
        # prompt they were validated with: adding the held-out rows to it
        # afterwards cost trained XOR heads up to 22 points of accuracy.
        if classifier.prompt_size is None:
            prompt_indices = np.arange(len(X))
        parameters = classifier_starts(
            classifier,
            X,
            labels,
            X[prompt_indices],
            labels[prompt_indices],
            n_classes,
            head_seed,
            [chosen],
        )[chosen]
    parameters["W"] = np.zeros_like(parameters["U11"])  # the paper's score: no key norm
    return BilinearClassifierFit(parameters, prompt_indices, chosen, history, n_iter)
