"""The fit every trained attention estimator runs: hold out, start, train, fall back, refit.

The classifier's bilinear heads and the softmax denoisers train the same
way (user guide, "Linear when it can, by default"):

1. hold out ``validation_fraction`` of the rows (``early_stopping``);
2. choose the prompt among the rows left to train on;
3. build the starts on those rows, and the untrained linear start, the
   reference every trained start must beat on the held-out rows;
4. train from each start and keep what validates best (``fit_starts``,
   behind the estimator's ``train`` callable);
5. where the untrained linear start is kept, build it again from every
   row, with every row in its prompt (trained heads keep the prompt they
   were validated with).

:func:`fit_with_linear_fallback` is that sequence; what differs between the
estimators (their starts, their loss, how a prompt is drawn) comes in as
callables, and their parameters as a :class:`SequencePlan` of values.
"""

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._selection import validation_split


@dataclass(frozen=True)
class SequencePlan:
    """The estimator's parameters the sequence reads.

    ``reference`` names the untrained linear start (``None`` where the model
    has none); ``by_default`` says whether falling back on it is the
    estimator's choice (``init="auto"``), which is silent, rather than the
    loss of an explicitly asked start, which warns.
    """

    estimator: str
    init: str
    start_names: tuple | None
    reference: str | None
    by_default: bool
    max_iter: int
    early_stopping: object
    validation_fraction: float
    prompt_size: int | None


class SequenceOutcome(NamedTuple):
    """The kept start's name and parameters, its prompt and training record."""

    start: str
    parameters: dict
    prompt_indices: np.ndarray
    history: object
    n_iter: int


def fit_with_linear_fallback(
    n_samples: int,
    plan: SequencePlan,
    random_state: np.random.RandomState,
    *,
    choose_prompt: Callable,
    build_starts: Callable,
    train: Callable,
    stratify: np.ndarray | None = None,
    empty_history=None,
    stacklevel: int = 5,
) -> SequenceOutcome:
    """Run the shared fit sequence on ``n_samples`` training rows.

    Parameters
    ----------
    n_samples : int
    plan : SequencePlan
    random_state : RandomState
        Draws, in order, the held-out rows, the prompt and the starts' seed.
    choose_prompt : callable
        ``choose_prompt(rows, random_state)``: the prompt's row indices among
        ``rows``.
    build_starts : callable
        ``build_starts(rows, prompt_indices, names, seed)``: start name ->
        parameters fitted on the training ``rows`` (``names=None``: the
        estimator's own). A start that cannot be built may come back under
        another name, with the estimator's warning.
    train : callable
        ``train(starts, reference, prompt_indices, validation_rows)``: the
        ``FitOutcome`` of training from ``starts`` against ``reference``
        (``(name, parameters)`` or ``None``) and its history.
    stratify : ndarray, optional
        Labels that the held-out split keeps in proportion.
    empty_history : object
        The history of a fit that did not train.
    stacklevel : int
        Of the warning, so that it points at the user's call of ``fit``.

    Returns
    -------
    SequenceOutcome
    """
    early_stopping = plan.early_stopping if plan.max_iter > 0 else False
    train_rows, validation_rows = validation_split(
        n_samples, early_stopping, plan.validation_fraction, random_state, stratify
    )
    prompt_indices = choose_prompt(train_rows, random_state)
    seed = random_state.randint(2**31 - 1)
    starts = build_starts(train_rows, prompt_indices, plan.start_names, seed)
    reference = None
    if plan.reference is not None:
        built = starts
        if plan.reference not in starts:
            built = build_starts(train_rows, prompt_indices, (plan.reference,), seed)
        reference = (plan.reference, built[plan.reference])
    skip_training = plan.max_iter == 0 or (
        validation_rows is None and plan.early_stopping == "auto" and plan.by_default
    )
    if skip_training:
        # the reference when falling back on it is the estimator's choice,
        # else the start asked for, untrained
        chosen, parameters = reference if plan.by_default else next(iter(starts.items()))
        trained = False
        history, n_iter = empty_history, 0
    else:
        outcome, history = train(starts, reference, prompt_indices, validation_rows)
        chosen, parameters, trained = outcome.start, outcome.parameters, outcome.trained
        n_iter = outcome.n_iter
        if not trained and not plan.by_default:
            warnings.warn(
                f"{plan.estimator}: trained from init={plan.init!r}, the parameters scored "
                "worse on the held-out points than the untrained linear start, which is "
                f"kept (init_={chosen!r}). Use init='auto', or early_stopping=False to keep "
                "the trained parameters anyway.",
                UserWarning,
                stacklevel=stacklevel,
            )
    if validation_rows is not None and not trained:
        # The untrained start again, from every row. Trained heads keep the
        # prompt they were validated with: adding the held-out rows to it
        # afterwards cost trained XOR heads up to 22 points of accuracy.
        if plan.prompt_size is None:
            prompt_indices = np.arange(n_samples)
        parameters = build_starts(np.arange(n_samples), prompt_indices, (chosen,), seed)[chosen]
    return SequenceOutcome(chosen, parameters, prompt_indices, history, n_iter)
