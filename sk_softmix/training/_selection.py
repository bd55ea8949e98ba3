"""Training from several starts and keeping the one that validates best: the
held-out split, the choice against the untrained linear start, and the loop over starts."""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.model_selection import train_test_split

from ._solvers import TrainingSettings, train, training_threads
from ._stopping import TRIAL_MARGIN, TrialCheck, ValidationCheckpoint, significantly_lower
from ._units import to_data_units, to_training_units


def validation_split(
    n_samples: int,
    early_stopping,
    validation_fraction: float,
    random_state,
    labels: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows to train on and rows to validate on (``None``: no validation).

    ``labels`` stratifies the split (classifiers) and requires every class to
    keep at least 2 training rows, since a training query leaves itself out
    of the prompt. The validation rows come in random order (see
    ``MONITOR_ROWS``). ``early_stopping="auto"`` holds out when that is
    possible; ``True`` raises when it is not.
    """
    everything = np.arange(n_samples)
    if early_stopping is False:
        return everything, None
    n_validation = math.ceil(validation_fraction * n_samples)
    reason = None
    if labels is None:
        if n_samples - n_validation < 2 or n_validation < 2:
            reason = f"{n_samples} samples leave too few to train and to validate on"
    else:
        counts = np.bincount(labels)
        if n_validation < len(counts) or np.any(counts < 3):
            reason = (
                f"a stratified validation set needs at least {len(counts)} samples and "
                "3 samples per class (2 stay in the prompt)"
            )
    if reason is not None:
        if early_stopping is True:
            raise ValueError(
                f"early_stopping=True with validation_fraction={validation_fraction} is "
                f"impossible here: {reason}. Use early_stopping='auto' or False, or a "
                "larger validation_fraction."
            )
        return everything, None
    train, validation = train_test_split(
        everything, test_size=n_validation, stratify=labels, random_state=random_state
    )
    if labels is not None and np.bincount(labels[train], minlength=len(counts)).min() < 2:
        if early_stopping is True:
            raise ValueError(
                f"early_stopping=True with validation_fraction={validation_fraction} leaves "
                "a class fewer than 2 training samples; use a smaller validation_fraction."
            )
        return everything, None
    # the validation rows stay in random order: any prefix is a random subset
    return np.sort(train), validation


def choose_start(
    reference_losses, candidate_losses: dict, n_standard_errors: float, floor=None
) -> str | None:
    """The candidate to keep, or ``None`` for the reference (the linear start).

    The candidate of lowest mean validation loss wins, but it replaces the
    reference only when it is better by ``n_standard_errors``
    (``significantly_lower``; 0: simply lower). ``reference_losses=None``
    (no linear start to fall back to) keeps the best candidate. Where there
    is a reference, a candidate whose losses are not finite, or whose mean
    is below ``floor`` (a value the loss cannot take in expectation), is not
    kept.
    """
    finite = {
        name: losses
        for name, losses in candidate_losses.items()
        if losses is not None
        and bool(torch.isfinite(losses).all())
        and (floor is None or reference_losses is None or float(losses.mean()) >= floor)
    }
    if not finite:
        return None if reference_losses is not None else next(iter(candidate_losses))
    best = min(finite, key=lambda name: float(finite[name].mean()))
    if reference_losses is None or significantly_lower(
        finite[best], reference_losses, n_standard_errors
    ):
        return best
    return None


@dataclass
class Selection:
    """How an estimator uses its held-out rows.

    ``floor``: a mean validation loss below it rules a trained start out
    (``choose_start``): Stein's unbiased risk estimate of a squared error
    cannot be negative in expectation, so a negative held-out mean says the
    estimate fails for that start.
    ``start``: how much better, in standard errors of the per-sample
    validation difference, a trained start must be to replace the untrained
    linear start (``significantly_lower``). ``checkpoint``: the same for an
    earlier checkpoint to replace the final parameters, with a stalled
    validation loss stopping training (``ValidationCheckpoint``); ``None``
    runs every start to its end (Adam's schedule, L-BFGS's convergence test)
    and scores only its final parameters. ``trial``: the cheap test first
    (``TrialCheck``, instead of a checkpoint): a run still well above the
    untrained linear start this fraction of the way through its iterations
    stops there; ``None`` never stops one.
    """

    start: float
    checkpoint: float | None
    trial: float | None = None
    floor: float | None = None


@dataclass
class FitOutcome:
    """What ``fit_starts`` kept."""

    start: str
    parameters: dict  # NumPy, data units
    history: np.ndarray  # training loss per evaluation of the kept run, training units
    n_iter: int  # iterations run over every start
    trained: bool  # False when the untrained linear start was kept


def fit_starts(
    starts: dict,
    reference: tuple | None,
    objective: Callable,
    settings: TrainingSettings,
    *,
    scale: float,
    powers: dict,
    n_queries: int,
    validate: bool,
    selection: Selection,
    random_state: np.random.RandomState,
    device: torch.device,
) -> FitOutcome:
    """Train from each start and keep what validates best.

    Parameters
    ----------
    starts : dict
        Start name -> parameters (NumPy, data units), each trained in turn.
    reference : (str, dict) or None
        Name and parameters of the linear start, kept untrained unless a
        trained start beats it on validation (``choose_start``).
    objective : callable
        ``objective(name, parameters)``, for the start ``name`` and its
        training-unit tensors, returns ``(loss_on, validation_losses)``: the
        training loss of a batch of query indices, and
        ``validation_losses(limit)``, the per-sample losses of the first
        ``limit`` held-out rows (all for None), or None without held-out rows.
    settings : TrainingSettings
    scale : float
        The data's root-mean-square; parameters train as ``value * scale**power``.
    powers : dict
        Parameter name -> power of ``scale``.
    n_queries : int
        Number of training queries.
    validate : bool
        Whether ``validation_losses`` exists (a held-out set was drawn).
        Without it the start of lowest final training loss is kept.
    selection : Selection
        The margins of the two choices.
    random_state : RandomState
    device : torch.device

    Returns
    -------
    FitOutcome
    """
    first_name, first_start = next(iter(starts.items()))
    probe_loss = objective(first_name, to_training_units(first_start, scale, powers, device))[0]
    # the reference's validation, every start's training and the scores all
    # run on the threads that one timed step pays for
    with training_threads(probe_loss, n_queries, settings, device):
        reference_losses = None
        if reference is not None and validate:
            untrained = to_training_units(reference[1], scale, powers, device)
            with torch.no_grad():
                reference_losses = objective(reference[0], untrained)[1](None)
        runs = {}
        for name, start in starts.items():
            trained = to_training_units(start, scale, powers, device)
            loss_on, validation_losses = objective(name, trained)
            checkpoint = None
            if reference_losses is not None and selection.trial is not None:
                checkpoint = TrialCheck(
                    validation_losses,
                    float(reference_losses.double().mean()),
                    at_iteration=max(1, round(selection.trial * settings.max_iter)),
                    margin=TRIAL_MARGIN,
                )
            elif validate and selection.checkpoint is not None:
                checkpoint = ValidationCheckpoint(
                    trained,
                    validation_losses,
                    settings.tol,
                    settings.n_iter_no_change,
                    selection.checkpoint,
                )
            history, n_iter = train(
                loss_on,
                trained,
                n_queries,
                # the solver's progress lines and bar name the start they train
                replace(settings, name=f"{settings.name}, start {name!r}"),
                random_state=random_state,
                device=device,
                checkpoint=checkpoint,
            )
            if checkpoint is not None:
                score = checkpoint.finish()
            elif validate:
                with torch.no_grad():
                    score = validation_losses(None)
            elif len(starts) > 1:
                with torch.no_grad():  # the full training loss decides without validation
                    score = loss_on(torch.arange(n_queries, device=device)).reshape(1)
            else:
                score = torch.zeros(1)
            runs[name] = (trained, history, score, n_iter)
    n_iter = sum(run[3] for run in runs.values())
    scores = {name: run[2] for name, run in runs.items()}
    if validate:
        chosen = choose_start(reference_losses, scores, selection.start, selection.floor)
    else:
        chosen = min(runs, key=lambda name: float(runs[name][2].mean()))
    if settings.verbose and (reference_losses is not None or len(scores) > 1):
        _report_choice(settings, reference, reference_losses, scores, chosen, selection.start)
    if chosen is None:
        return FitOutcome(reference[0], reference[1], np.empty(0), n_iter, False)
    trained, history = runs[chosen][:2]
    return FitOutcome(chosen, to_data_units(trained, scale, powers), history, n_iter, True)


def _report_choice(settings, reference, reference_losses, scores, chosen, n_standard_errors):
    for name, losses in scores.items():
        line = f"[{settings.name}] start {name!r}: loss {float(losses.mean()):.6g}"
        if reference_losses is not None:
            difference = (losses - reference_losses).double()
            error = float(difference.std() / math.sqrt(difference.numel()))
            line += (
                f", {float(difference.mean()):+.3g} +- {error:.3g} against the untrained "
                f"{reference[0]!r} start"
            )
        print(line + (" (validation)" if reference_losses is not None else ""))
    if reference_losses is None:
        why = "the lowest loss" if len(scores) > 1 else "the only start"
    else:
        margin = f" by {n_standard_errors:g} standard errors" if n_standard_errors else ""
        why = (
            f"no trained start's validation loss was below the untrained {reference[0]!r} "
            f"start's{margin}"
            if chosen is None
            else f"the lowest validation loss, below the untrained {reference[0]!r} start's{margin}"
        )
    print(f"[{settings.name}] kept {chosen or reference[0]!r}: {why}")
