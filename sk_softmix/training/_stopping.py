"""When training stops: the validation checkpoint that keeps the best parameters, the
plateau of the training loss, and the paired test that says one loss is lower."""

import math
import warnings
from collections.abc import Callable

import torch
from sklearn.exceptions import ConvergenceWarning

# Steps whose losses are averaged before comparing, and between two
# validation checks of the first-order solvers: one minibatch loss is too
# noisy to tell a plateau from a slope.
CHECK_BLOCK = 10

# Held-out rows scored at each check during training (the first ones of a
# random order); the final choices score every held-out row. Scoring all
# 2,000 held-out rows of a 20,000-point fit every 10 steps cost 80% of the
# training itself (measured on the Figure 2 denoiser).
MONITOR_ROWS = 512


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

    # a stalled validation loss stops training: the plateau of the training
    # loss (tol) is not watched beside it
    stops_on_stall = True

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


# TrialCheck stops a run whose validation loss is more than this fraction
# above the untrained linear start's. Measured on the study's denoising tasks
# (2,000 and 10,000 points, one and two residual heads, by SURE), a fifth of
# the way through Adam's 200 steps: every run that went on to beat the linear
# start was below 1.09 times its loss; on noisy digits, where none did, the
# runs were at 1.29 to 1.97 times.
TRIAL_MARGIN = 0.1


class TrialCheck:
    """The cheap test first: stops a run still well above the reference.

    Checked as a ``ValidationCheckpoint`` is (``check`` at the start and every
    ``CHECK_BLOCK`` first-order steps, or at every L-BFGS evaluation with
    ``checks_per_block=CHECK_BLOCK``). The first check at or after
    ``at_iteration`` iterations compares the mean validation loss on
    ``MONITOR_ROWS`` held-out rows with ``(1 + margin)`` times the reference's
    mean, and stops the run if it is not below; later checks never stop it.
    ``finish`` returns the final per-sample validation losses.
    """

    stops_on_stall = False  # tol's plateau of the training loss still applies

    def __init__(self, validation_losses: Callable, reference_mean: float, at_iteration, margin):
        self.validation_losses = validation_losses
        self.reference_mean = reference_mean
        self.at_iteration = at_iteration
        self.margin = margin
        self.calls = 0
        self.decided = False  # the trial is checked once
        self.stop_reason = None

    def check(self, checks_per_block: int = 1) -> bool:
        self.calls += 1
        # first-order solvers check once before their first step
        done = self.calls if checks_per_block > 1 else (self.calls - 1) * CHECK_BLOCK
        if self.decided or done < self.at_iteration:
            return False
        self.decided = True
        with torch.no_grad():
            mean = float(self.validation_losses(MONITOR_ROWS).double().mean())
        # margin times its size above the reference, whatever its sign (SURE
        # can be negative on nearly noiseless data)
        bar = self.reference_mean + self.margin * abs(self.reference_mean)
        stop = not (mean < bar)
        if stop:
            self.stop_reason = (
                f"validation loss {mean:.4g} after {done} iterations, not below {bar:.4g} "
                f"({1 + self.margin:g} times the untrained linear start's): stopped (the "
                "cheap test first)"
            )
        return stop

    def finish(self) -> torch.Tensor:
        with torch.no_grad():
            return self.validation_losses(None)


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


def significantly_lower(
    losses: torch.Tensor,
    reference: torch.Tensor,
    n_standard_errors: float,
    weights: torch.Tensor | None = None,
    n_effective: float | None = None,
) -> bool:
    """Whether per-sample ``losses`` beat ``reference`` by ``n_standard_errors``.

    The test is on the paired differences (the mean difference plus that many
    standard errors must be negative), so both must be losses of the same
    validation samples. One standard error is the "one-standard-error rule"
    of model selection (Hastie, Tibshirani & Friedman, The Elements of
    Statistical Learning, section 7.10): keep the simpler model unless the
    other is better by more than the noise.

    With ``weights`` (the samples' positive weights) the mean and variance
    are weighted, and the standard error counts Kish's effective number of
    samples ``(sum w)^2 / sum w^2``: equal weights give the unweighted test,
    and multiplying every weight by a constant changes nothing. A sample that
    stands for several observations (a token of repeated rows) is worth more
    than Kish's count gives it: ``n_effective`` then replaces it.
    """
    difference = (losses - reference).double()
    if weights is None:
        if difference.numel() < 2:
            return bool(n_standard_errors == 0 and difference.mean() < 0)
        standard_error = difference.std() / math.sqrt(difference.numel())
        return bool(difference.mean() + n_standard_errors * standard_error < 0)
    weights = torch.as_tensor(weights, dtype=torch.float64, device=difference.device)
    if n_effective is None:
        n_effective = float(weights.sum() ** 2 / weights.square().sum())
    mean = float((weights * difference).sum() / weights.sum())
    if difference.numel() < 2 or n_effective <= 1:
        return bool(n_standard_errors == 0 and mean < 0)
    variance = float((weights * (difference - mean).square()).sum() / weights.sum())
    variance *= n_effective / (n_effective - 1)  # unbiased, as Tensor.std
    standard_error = math.sqrt(variance / n_effective)
    return bool(mean + n_standard_errors * standard_error < 0)
