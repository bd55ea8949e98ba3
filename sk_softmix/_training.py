"""Training shared by the attention estimators.

Every attention estimator fits the same way: its parameters are moved to
units where the prompt has root-mean-square 1 (an exact symmetry of the
models), one of three solvers minimises a training loss over the training
queries, a held-out validation set keeps the best parameters seen, and the
start that validates best is chosen. The estimators supply the loss, the
validation loss and the starts; this module supplies the rest.
"""

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from ._threads import cpu_threads_for_training

# Steps whose losses are averaged before comparing, and between two
# validation checks of the first-order solvers: one minibatch loss is too
# noisy to tell a plateau from a slope.
CHECK_BLOCK = 10

# solver="auto" takes full-batch L-BFGS while one evaluation of the loss
# costs at most this many (query, token, head, feature) products, Adam above:
# about 15 ms per evaluation with its gradient on 2 CPU cores, a few seconds
# for a run (measured: 23 ms for 1,800 queries over 2,000 tokens, 2 heads, p = 2).
LBFGS_MAX_PRODUCTS = 2**23


# partial_fit decays its step as learning_rate / (1 + t / PARTIAL_FIT_DECAY)**2
# over the Adam steps t taken by all calls so far: an inverse-scaling schedule
# (scikit-learn's "invscaling", shifted so that the first few hundred steps
# keep most of the step) that needs no horizon. Meta-training over 200 tasks
# of 2,000 points, in context on fresh tasks (MSE / Bayes, seeds 0-2): a
# constant step 1.107; 1 / (1 + t/100) 1.048-1.050; this one 1.044-1.045.
PARTIAL_FIT_DECAY = 300

# Held-out rows scored at each check during training (the first ones of a
# random order); the final choices score every held-out row. Scoring all
# 2,000 held-out rows of a 20,000-point fit every 10 steps cost 80% of the
# training itself (measured on the Figure 2 denoiser).
MONITOR_ROWS = 512

SOLVERS = ("auto", "lbfgs", "adam", "gd")


def rms_scale(X: np.ndarray) -> float:
    """Root-mean-square of the entries of ``X``, or 1 for an all-zero ``X``.

    Training runs on data divided by this scale, where every model of the
    package has the same form with rescaled parameters.
    """
    # Divided by its largest entry first: squares of entries beyond 1e154
    # overflow float64 and those below 1e-162 vanish, at any data scale.
    largest = float(np.max(np.abs(X))) if np.size(X) else 0.0
    if not largest > 0:
        return 1.0
    return largest * math.sqrt(float(np.mean(np.square(X / largest, dtype=np.float64))))


# Scales whose square float64 still holds with room for the parameters
# (U scales as 1 / scale**2, a noise variance as scale**2).
SMALLEST_SCALE, LARGEST_SCALE = 1e-151, 1e151


def checked_scale(X: np.ndarray, estimator_name: str) -> float:
    """``rms_scale(X)``, or a ``ValueError`` naming a scale float64 cannot serve.

    Every estimator is scale-equivariant, ``f(cX) = c f(X)``, by working on
    ``X / scale``; its fitted parameters and noise variance then hold powers
    of ``scale`` up to the square, which leave float64 beyond about 1e+-154.
    """
    scale = rms_scale(X)
    if not SMALLEST_SCALE <= scale <= LARGEST_SCALE:
        raise ValueError(
            f"{estimator_name}: the root-mean-square of X is {scale:.3g}, outside "
            f"[{SMALLEST_SCALE:g}, {LARGEST_SCALE:g}]: parameters that scale with its "
            "square (interaction matrices, the noise variance) cannot be represented "
            "in float64. Rescale X: the estimators are scale-equivariant (a "
            "denoiser's output scales with X, a classifier's predictions do not "
            "change)."
        )
    return scale


@dataclass
class TrainingSettings:
    """The hyperparameters every solver reads, taken from the estimator."""

    solver: str
    max_iter: int
    learning_rate: float
    batch_size: int
    tol: float | None
    n_iter_no_change: int
    verbose: int
    name: str

    @classmethod
    def of(cls, estimator, solver: str) -> "TrainingSettings":
        return cls(
            solver=solver,
            max_iter=estimator.max_iter,
            learning_rate=estimator.learning_rate,
            batch_size=estimator.batch_size,
            tol=estimator.tol,
            n_iter_no_change=estimator.n_iter_no_change,
            verbose=estimator.verbose,
            name=type(estimator).__name__,
        )


def resolve_solver(
    solver: str, n_queries: int, prompt_length: int, n_heads: int, width: int
) -> str:
    """``"auto"``: full-batch L-BFGS for small problems, Adam otherwise.

    Like ``LogisticRegression`` and ``MLPClassifier``, which use lbfgs for
    small data: a full-batch quasi-Newton step is worth its cost while one
    pass over every training query is cheap. ``width`` is the token size.
    """
    if solver != "auto":
        return solver
    products = n_queries * prompt_length * n_heads * width
    return "lbfgs" if products <= LBFGS_MAX_PRODUCTS else "adam"


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


class ValidationCheckpoint:
    """Keeps the parameters of lowest validation loss, and says when to stop.

    ``validation_losses(limit)`` returns the per-sample validation losses of
    the current parameters on the first ``limit`` held-out rows (all for
    None). Each ``check`` compares their mean on ``MONITOR_ROWS`` rows with
    the best so far; ``n_iter_no_change`` checks in a row that fail to beat
    it by ``tol`` (0 when None) stop training, as scikit-learn's MLP does
    with ``early_stopping=True`` (L-BFGS is checked at every evaluation and
    waits ten times as many). At the end (``finish``), on every held-out
    row, the final parameters stay unless the best checkpoint is better by
    ``n_standard_errors`` (``significantly_lower``).
    """

    def __init__(
        self,
        parameters: dict,
        validation_losses: Callable,
        tol,
        n_iter_no_change: int,
        n_standard_errors: float,
    ):
        self.parameters = parameters
        self.validation_losses = validation_losses
        self.tol = 0.0 if tol is None else tol
        self.n_iter_no_change = n_iter_no_change
        self.n_standard_errors = n_standard_errors
        self.best_mean = math.inf
        self.best_state = None
        self.checks_without_improvement = 0

    def check(self, checks_per_block: int = 1) -> bool:
        """Record the current parameters if best; whether training should stop.

        Training stops after ``n_iter_no_change * checks_per_block`` checks
        in a row without improvement.
        """
        with torch.no_grad():
            losses = self.validation_losses(MONITOR_ROWS)
        mean = float(losses.mean())  # one host round trip per check
        if not math.isfinite(mean):
            self.checks_without_improvement += 1
            return self.checks_without_improvement >= self.n_iter_no_change * checks_per_block
        improved_enough = mean < self.best_mean - self.tol
        if mean < self.best_mean:
            self.best_mean = mean
            self.best_state = {k: v.detach().clone() for k, v in self.parameters.items()}
        self.checks_without_improvement = (
            0 if improved_enough else (self.checks_without_improvement + 1)
        )
        return self.checks_without_improvement >= self.n_iter_no_change * checks_per_block

    def finish(self) -> torch.Tensor:
        """Keep the final parameters unless the best checkpoint is significantly better.

        Returns the per-sample validation losses of the parameters kept.
        """
        with torch.no_grad():
            final = self.validation_losses(None)
            if self.best_state is None:
                return final
            final_state = {k: v.detach().clone() for k, v in self.parameters.items()}
            self._load(self.best_state)
            best = self.validation_losses(None)
        if bool(torch.isfinite(final).all()) and not significantly_lower(
            best, final, self.n_standard_errors
        ):
            self._load(final_state)
            return final
        return best

    def _load(self, state):
        with torch.no_grad():
            for name, value in self.parameters.items():
                value.copy_(state[name])


class PlateauStop:
    """Early stopping on a plateau of the block-averaged training loss.

    Used when there is no validation set. Every ``CHECK_BLOCK`` steps the
    mean loss of the block is compared with the best block so far
    (scikit-learn's MLP rule, per block instead of per epoch);
    ``n_iter_no_change`` blocks in a row that fail to improve on it by
    ``tol`` stop training. ``tol=None`` never stops.
    """

    def __init__(self, tol, n_iter_no_change):
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.best = math.inf
        self.blocks_without_improvement = 0
        self.stopped = False

    def should_stop(self, losses: torch.Tensor, iteration: int) -> bool:
        """Whether to stop after ``iteration`` (0-based), given losses so far."""
        if self.tol is None or (iteration + 1) % CHECK_BLOCK:
            return False
        # one host round trip per block, and only when early stopping is on
        block_mean = losses[iteration + 1 - CHECK_BLOCK : iteration + 1].mean().item()
        if block_mean < self.best - self.tol:
            self.blocks_without_improvement = 0
        else:
            self.blocks_without_improvement += 1
        self.best = min(self.best, block_mean)
        self.stopped = self.blocks_without_improvement >= self.n_iter_no_change
        return self.stopped

    def warn_if_unconverged(self, n_steps: int, name: str) -> None:
        """Warn like scikit-learn when ``max_iter`` ran out before the plateau."""
        if self.tol is not None and not self.stopped and n_steps > 0:
            warnings.warn(
                f"{name}: max_iter={n_steps} steps ran out before the training loss "
                f"stopped improving by tol={self.tol:g} (over {self.n_iter_no_change} "
                f"blocks of {CHECK_BLOCK} steps); increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=5,
            )


def train(
    loss_on: Callable[[torch.Tensor], torch.Tensor],
    parameters: dict,
    n_queries: int,
    settings: TrainingSettings,
    *,
    random_state: np.random.RandomState,
    device: torch.device,
    checkpoint: ValidationCheckpoint | None = None,
    resume: list | None = None,
    steps_done: int = 0,
) -> tuple[np.ndarray, int]:
    """Minimise ``loss_on(query_indices)`` over ``parameters`` with the chosen solver.

    Parameters
    ----------
    loss_on : callable
        Maps a 1-D int64 tensor of training-query indices to a scalar loss.
    parameters : dict of Tensor
        Leaf tensors with ``requires_grad=True``, updated in place.
    n_queries : int
        Number of training queries.
    settings : TrainingSettings
        ``solver`` is ``"lbfgs"`` (full batch, strong-Wolfe line search),
        ``"adam"`` (minibatches, cosine decay of the step over ``max_iter``)
        or ``"gd"`` (full batch, constant step).
    random_state : RandomState
        Seeds the minibatches.
    device : torch.device
    checkpoint : ValidationCheckpoint, default=None
        With one, the validation loss is checked at the start and every
        ``CHECK_BLOCK`` steps (every evaluation for L-BFGS), Adam and
        gradient descent stop once it stalls, and the caller settles on the
        final or the best parameters (``ValidationCheckpoint.finish``).
        Without one, ``settings.tol`` stops on a plateau of the training loss.
    resume : list of dict, default=None
        Adam moments to continue from (``partial_fit``): then one pass runs
        with the step decayed over ``steps_done + t`` (see
        ``PARTIAL_FIT_DECAY``) and the list is updated in place.
    steps_done : int, default=0
        Adam steps already taken by earlier ``partial_fit`` calls.

    Returns
    -------
    losses : ndarray of shape (n_evaluations,)
        The training loss at every evaluation (one per step for Adam and
        gradient descent, one per function evaluation for L-BFGS).
    n_iter : int
        Iterations run: steps, or L-BFGS iterations (at most ``max_iter``).
    """
    solvers = {"lbfgs": _lbfgs, "adam": _adam, "gd": _gradient_descent}
    return solvers[settings.solver](
        loss_on,
        list(parameters.values()),
        n_queries,
        settings,
        random_state=random_state,
        device=device,
        checkpoint=checkpoint,
        resume=resume,
        steps_done=steps_done,
    )


def training_threads(loss_on, n_queries: int, settings: TrainingSettings, device):
    """The thread count for training, from one timed step's forward pass.

    Wraps everything a fit computes with ``loss_on`` (see
    ``cpu_threads_for_training``); the step's batch is every query for the
    full-batch solvers, ``batch_size`` of them for Adam.
    """
    full_batch = settings.solver in ("lbfgs", "gd")
    batch = torch.arange(n_queries if full_batch else min(settings.batch_size, n_queries))
    return cpu_threads_for_training(device, lambda: loss_on(batch.to(device)))


def _report(settings, iteration, loss, total):
    print(f"[{settings.name}] iteration {iteration}/{total}  loss {float(loss.detach()):.6g}")


def _adam(
    loss_on,
    parameters,
    n_queries,
    settings,
    *,
    random_state,
    device,
    checkpoint,
    resume,
    steps_done,
):
    """Minibatch Adam; each epoch walks a fresh random permutation of the queries.

    ``fit`` decays the step to zero on a cosine over ``max_iter``, which
    removes most of the minibatch noise from the final parameters (what
    separates 1% from 3% above Bayes); ``partial_fit`` (``resume``) decays it
    over all its calls (``PARTIAL_FIT_DECAY``).
    """
    optimizer = torch.optim.Adam(parameters, lr=settings.learning_rate)
    if resume:
        for parameter, saved in zip(parameters, resume, strict=True):
            optimizer.state[parameter] = {
                # Adam keeps its step counter on the CPU. A copy: Adam updates its
                # moments in place, and the saved arrays must survive an
                # interrupted call (and a shallow copy of the estimator).
                key: torch.tensor(value, device="cpu" if key == "step" else device)
                for key, value in saved.items()
            }
    generator = torch.Generator().manual_seed(int(random_state.randint(2**31 - 1)))
    batch_size = min(settings.batch_size, n_queries)
    # The permutation is drawn on the CPU (a seeded generator gives the same
    # stream on every machine) and moved once per epoch, not once per step.
    epoch = {"order": torch.randperm(n_queries, generator=generator).to(device), "cursor": 0}

    def step(iteration):
        if epoch["cursor"] + batch_size > n_queries:
            epoch["order"] = torch.randperm(n_queries, generator=generator).to(device)
            epoch["cursor"] = 0
        batch = epoch["order"][epoch["cursor"] : epoch["cursor"] + batch_size]
        epoch["cursor"] += batch_size
        if resume is None:
            rate = 0.5 * (1 + math.cos(math.pi * iteration / settings.max_iter))
        else:
            rate = 1 / (1 + (steps_done + iteration) / PARTIAL_FIT_DECAY) ** 2
        for group in optimizer.param_groups:
            group["lr"] = settings.learning_rate * rate
        optimizer.zero_grad(set_to_none=True)
        loss = loss_on(batch)
        loss.backward()
        optimizer.step()
        return loss

    # partial_fit is one pass by definition: no plateau test
    result = _first_order_loop(step, settings, device, checkpoint, watch_tol=resume is None)
    if resume is not None:
        resume[:] = [
            {key: value.detach().cpu().numpy().copy() for key, value in optimizer.state[p].items()}
            for p in parameters
        ]
    return result


def _gradient_descent(
    loss_on,
    parameters,
    n_queries,
    settings,
    *,
    random_state,
    device,
    checkpoint,
    resume,
    steps_done,
):
    """Full-batch gradient descent with a constant step (the dynamics of Section 3.3)."""
    everything = torch.arange(n_queries, device=device)

    def step(iteration):
        loss = loss_on(everything)
        gradients = torch.autograd.grad(loss, parameters)
        with torch.no_grad():
            for tensor, gradient in zip(parameters, gradients, strict=True):
                tensor -= settings.learning_rate * gradient
        return loss

    return _first_order_loop(step, settings, device, checkpoint, watch_tol=True)


def _first_order_loop(step, settings, device, checkpoint, *, watch_tol):
    """Run ``step(iteration)`` up to ``max_iter`` times, with progress and stopping.

    A validation ``checkpoint`` is checked at the start (the start itself is
    a candidate) and every ``CHECK_BLOCK`` steps and stops training once it
    stalls; without one, ``tol`` (when ``watch_tol``) stops on a plateau of
    the training loss and warns if ``max_iter`` runs out first. Returns the
    losses of the steps run and their number.
    """
    max_iter = settings.max_iter
    # Losses stay on the device: no host round trip per iteration on a GPU.
    losses = torch.empty(max_iter, device=device)
    report_every = 1 if settings.verbose > 1 else max(1, max_iter // 10)
    plateau = PlateauStop(
        settings.tol if watch_tol and checkpoint is None else None, settings.n_iter_no_change
    )
    n_run = max_iter
    if checkpoint is not None:
        checkpoint.check()
    for iteration in range(max_iter):
        loss = step(iteration)
        losses[iteration] = loss.detach()
        if settings.verbose and (iteration % report_every == 0 or iteration == max_iter - 1):
            _report(settings, iteration + 1, loss, max_iter)
        stop = plateau.should_stop(losses, iteration)
        if checkpoint is not None and (
            (iteration + 1) % CHECK_BLOCK == 0 or iteration == max_iter - 1
        ):
            stop = checkpoint.check()
        if stop:
            n_run = iteration + 1
            if settings.verbose:
                print(f"[{settings.name}] stopped improving; stopping at iteration {n_run}")
            break
    plateau.warn_if_unconverged(max_iter, settings.name)
    return losses[:n_run].cpu().numpy().astype(np.float64), n_run


class _Stalled(Exception):
    """Raised from L-BFGS's closure when the validation loss has stalled."""


def _lbfgs(
    loss_on,
    parameters,
    n_queries,
    settings,
    *,
    random_state,
    device,
    checkpoint,
    resume,
    steps_done,
):
    """Full-batch L-BFGS with a strong-Wolfe line search, every query every step."""
    everything = torch.arange(n_queries, device=device)
    optimizer = torch.optim.LBFGS(
        parameters,
        lr=1.0,
        max_iter=settings.max_iter,
        history_size=20,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-7,
        tolerance_change=1e-9 if settings.tol is None else settings.tol,
    )
    losses = []

    def closure():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_on(everything)
        loss.backward()
        losses.append(loss.detach())
        if settings.verbose > 1 or (settings.verbose and len(losses) % 10 == 1):
            _report(settings, len(losses), loss, settings.max_iter)
        # every evaluation is checked, so the patience is counted in
        # evaluations: n_iter_no_change blocks of CHECK_BLOCK, as for Adam
        if checkpoint is not None and checkpoint.check(CHECK_BLOCK):
            raise _Stalled
        return loss

    try:
        optimizer.step(closure)
    except _Stalled:
        if settings.verbose:
            print(f"[{settings.name}] stopped improving after {len(losses)} evaluations")
    state = optimizer.state[optimizer._params[0]]
    if (
        checkpoint is None
        and settings.tol is not None
        and state.get("n_iter", 0) >= settings.max_iter
    ):
        warnings.warn(
            f"{settings.name}: lbfgs ran out of max_iter={settings.max_iter} iterations "
            f"before the loss changed by less than tol={settings.tol:g}; increase max_iter.",
            ConvergenceWarning,
            stacklevel=5,
        )
    n_iter = int(state.get("n_iter", 0))
    if not losses:
        return np.empty(0), n_iter
    return torch.stack(losses).cpu().numpy().astype(np.float64), n_iter


def significantly_lower(
    losses: torch.Tensor, reference: torch.Tensor, n_standard_errors: float
) -> bool:
    """Whether per-sample ``losses`` beat ``reference`` by ``n_standard_errors``.

    The test is on the paired differences (the mean difference plus that many
    standard errors must be negative), so both must be losses of the same
    validation samples. One standard error is the "one-standard-error rule"
    of model selection (Hastie, Tibshirani & Friedman, The Elements of
    Statistical Learning, section 7.10): keep the simpler model unless the
    other is better by more than the noise.
    """
    difference = (losses - reference).double()
    if difference.numel() < 2:
        return bool(n_standard_errors == 0 and difference.mean() < 0)
    standard_error = difference.std() / math.sqrt(difference.numel())
    return bool(difference.mean() + n_standard_errors * standard_error < 0)


def choose_start(reference_losses, candidate_losses: dict, n_standard_errors: float) -> str | None:
    """The candidate to keep, or ``None`` for the reference (the linear start).

    The candidate of lowest mean validation loss wins, but it replaces the
    reference only when it is better by ``n_standard_errors``
    (``significantly_lower``; 0: simply lower). ``reference_losses=None``
    (no linear start to fall back to) keeps the best candidate.
    """
    finite = {
        name: losses
        for name, losses in candidate_losses.items()
        if losses is not None and bool(torch.isfinite(losses).all())
    }
    if not finite:
        return None if reference_losses is not None else next(iter(candidate_losses))
    best = min(finite, key=lambda name: float(finite[name].mean()))
    if reference_losses is None or significantly_lower(
        finite[best], reference_losses, n_standard_errors
    ):
        return best
    return None


def to_training_units(parameters: dict, scale: float, powers: dict, device) -> dict:
    """Float32 leaf tensors ``value * scale**power``, ready to train."""
    return {
        name: torch.as_tensor(value * scale ** powers[name], dtype=torch.float32, device=device)
        .contiguous()
        .requires_grad_(True)
        for name, value in parameters.items()
    }


def to_data_units(parameters: dict, scale: float, powers: dict) -> dict:
    """NumPy float64 parameters in the data's units (the inverse of the above)."""
    return {
        name: tensor.detach().cpu().numpy().astype(np.float64) / scale ** powers[name]
        for name, tensor in parameters.items()
    }


@dataclass
class Selection:
    """How an estimator uses its held-out rows.

    ``start``: how much better, in standard errors of the per-sample
    validation difference, a trained start must be to replace the untrained
    linear start (``significantly_lower``). ``checkpoint``: the same for an
    earlier checkpoint to replace the final parameters, with a stalled
    validation loss stopping training (``ValidationCheckpoint``); ``None``
    runs every start to its end (Adam's schedule, L-BFGS's convergence test)
    and scores only its final parameters.
    """

    start: float
    checkpoint: float | None


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
            if validate and selection.checkpoint is not None:
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
                settings,
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
        chosen = choose_start(reference_losses, scores, selection.start)
    else:
        chosen = min(runs, key=lambda name: float(runs[name][2].mean()))
    if settings.verbose and (reference_losses is not None or len(scores) > 1):
        _report_choice(settings, reference, reference_losses, scores, chosen)
    if chosen is None:
        return FitOutcome(reference[0], reference[1], np.empty(0), n_iter, False)
    trained, history = runs[chosen][:2]
    return FitOutcome(chosen, to_data_units(trained, scale, powers), history, n_iter, True)


def _report_choice(settings, reference, reference_losses, scores, chosen):
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
    print(f"[{settings.name}] kept {chosen or reference[0]!r}")
