"""The paper's bilinear heads, trained: the classifier's fit with ``head="bilinear"``.

The heads start from ``init`` (LDA in the skip map, or one of the paper's
constructions, ``_starts``), train on the log-loss of the training queries
(``_objective``) and give way to the untrained linear start where it
validates better on held-out pairs: the fit sequence every trained
estimator shares (``training._sequence``). A plain function of the tokens
and a :class:`BilinearSettings`; the estimator sets its fitted attributes
from the :class:`BilinearClassifierFit` it returns.
"""

from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from ..training._sequence import SequencePlan, fit_with_linear_fallback
from ._kernel_fit import prompt_with_every_class
from ._objective import train_heads
from ._starts import classifier_starts

# what trains the paper's bilinear heads, and nothing else: set with kernel
# heads, they warn
BILINEAR_TRAINING_PARAMETERS = (
    "max_iter",
    "learning_rate",
    "alpha",
    "solver",
    "validation_fraction",
    "tol",
    "n_iter_no_change",
    "batch_size",
)


@dataclass(frozen=True)
class BilinearSettings:
    """The classifier's parameters that the bilinear heads' fit reads."""

    n_heads: int
    residual: bool
    init: str
    prompt_size: int | None
    max_iter: int
    learning_rate: float
    alpha: float
    solver: str
    early_stopping: object
    validation_fraction: float
    tol: float | None
    n_iter_no_change: int
    batch_size: int
    verbose: int

    @classmethod
    def of(cls, parameters: dict):
        """The settings from the classifier's ``get_params()``."""
        return cls(**{field.name: parameters[field.name] for field in fields(cls)})


class BilinearClassifierFit(NamedTuple):
    """The kept parameters, their prompt, the start kept and its training record."""

    parameters: dict
    prompt_indices: np.ndarray
    init: str
    history: dict
    n_iter: int


def fit_bilinear_classifier(
    X, labels, n_classes, settings: BilinearSettings, random_state, device
) -> BilinearClassifierFit:
    """Train bilinear heads on the tokens ``X``, ``labels`` (in the model's
    coordinates) and keep the start that validates best."""
    # Trained heads fall back on the untrained linear start (LDA) when it
    # validates better: by choice with init="auto" or "lda", with a
    # warning from the paper's starts.
    reference = "lda" if settings.residual else None
    plan = SequencePlan(
        estimator="SoftmaxAttentionClassifier",
        init=settings.init,
        start_names=None,
        reference=reference,
        by_default=settings.init in ("auto", "lda") and reference is not None,
        max_iter=settings.max_iter,
        early_stopping=settings.early_stopping,
        validation_fraction=settings.validation_fraction,
        prompt_size=settings.prompt_size,
    )

    def choose_prompt(rows, random_state):
        return prompt_with_every_class(labels, n_classes, settings.prompt_size, random_state, rows)

    def build_starts(rows, prompt_indices, names, seed):
        return classifier_starts(
            settings.init,
            settings.residual,
            settings.n_heads,
            X[rows],
            labels[rows],
            X[prompt_indices],
            labels[prompt_indices],
            n_classes,
            seed,
            names,
        )

    def train(starts, reference, prompt_indices, validation_rows):
        return train_heads(
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
        )

    outcome = fit_with_linear_fallback(
        len(X),
        plan,
        random_state,
        choose_prompt=choose_prompt,
        build_starts=build_starts,
        train=train,
        stratify=labels,
        empty_history={"loss": np.empty(0)},
        stacklevel=6,  # the user's call of fit
    )
    parameters = dict(outcome.parameters)
    parameters["W"] = np.zeros_like(parameters["U11"])  # the paper's score: no key norm
    return BilinearClassifierFit(
        parameters, outcome.prompt_indices, outcome.start, outcome.history, outcome.n_iter
    )
