"""The solvers every attention estimator trains with: full-batch L-BFGS, Adam on
minibatches and plain gradient descent, over a loss the estimator supplies."""

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

from ..attention._threads import cpu_threads_for_training
from ._stopping import CHECK_BLOCK, PlateauStop, ValidationCheckpoint

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

SOLVERS = ("auto", "lbfgs", "adam", "gd")


@dataclass
class TrainingSettings:
    """The hyperparameters every solver reads, and the estimator's name for its messages."""

    solver: str
    max_iter: int
    learning_rate: float
    batch_size: int
    tol: float | None
    n_iter_no_change: int
    verbose: int
    name: str

    @classmethod
    def of(cls, parameters: dict, solver: str, name: str) -> "TrainingSettings":
        """The settings from an estimator's parameters (``get_params()``),
        with ``solver`` resolved and ``name`` for the messages."""
        return cls(
            solver=solver,
            name=name,
            **{key: parameters[key] for key in _FROM_PARAMETERS},
        )


_FROM_PARAMETERS = ("max_iter", "learning_rate", "batch_size", "tol", "n_iter_no_change", "verbose")


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


def _progress_bar(settings):
    """A progress bar over the iterations on standard error, shown with ``verbose``.

    Beside the loss lines on standard output: in a notebook or a terminal
    the bar says how far a long fit has come, the lines what it reached.
    """
    return tqdm(
        total=settings.max_iter, desc=settings.name, disable=not settings.verbose, leave=False
    )


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
        settings.tol if watch_tol and not _stops_on_stall(checkpoint) else None,
        settings.n_iter_no_change,
    )
    n_run = max_iter
    if checkpoint is not None:
        checkpoint.check()
    with _progress_bar(settings) as bar:
        for iteration in range(max_iter):
            loss = step(iteration)
            losses[iteration] = loss.detach()
            bar.update()
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
                    reason = getattr(checkpoint, "stop_reason", None) or "stopped improving"
                    print(f"[{settings.name}] {reason}; stopping at iteration {n_run}")
                break
    plateau.warn_if_unconverged(max_iter, settings.name)
    return losses[:n_run].cpu().numpy().astype(np.float64), n_run


def _stops_on_stall(checkpoint) -> bool:
    """Whether ``checkpoint`` stops training on a stalled validation loss, in
    place of the plateau of the training loss (``tol``)."""
    return checkpoint is not None and checkpoint.stops_on_stall


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
    bar = _progress_bar(settings)

    def closure():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_on(everything)
        loss.backward()
        losses.append(loss.detach())
        bar.update()
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
            reason = getattr(checkpoint, "stop_reason", None) or "stopped improving"
            print(f"[{settings.name}] {reason}; stopped after {len(losses)} evaluations")
    finally:
        bar.close()
    state = optimizer.state[optimizer._params[0]]
    if (
        not _stops_on_stall(checkpoint)
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
