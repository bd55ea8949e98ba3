"""Minibatch Adam over training queries, shared by the attention estimators."""

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

# Steps whose losses are averaged before comparing: one minibatch loss is too
# noisy to tell a plateau from a slope.
CHECK_BLOCK = 10


class PlateauStop:
    """Early stopping on a plateau of the block-averaged training loss.

    Every ``CHECK_BLOCK`` steps the mean loss of the block is compared with
    the best block so far (scikit-learn's MLP rule, per block instead of per
    epoch); ``n_iter_no_change`` blocks in a row that fail to improve on it
    by ``tol`` stop training. ``tol=None`` never stops.
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
                stacklevel=4,
            )


def minibatch_adam(
    loss_on: Callable[[torch.Tensor], torch.Tensor],
    parameters: list[torch.Tensor],
    n_queries: int,
    *,
    max_iter: int,
    learning_rate: float,
    batch_size: int,
    random_state: np.random.RandomState,
    device: torch.device,
    verbose: int = 0,
    name: str = "",
    resume: list | None = None,
    tol: float | None = None,
    n_iter_no_change: int = 5,
) -> np.ndarray:
    """Minimise ``loss_on(query_indices)`` with Adam on a cosine learning-rate decay.

    Each iteration draws ``batch_size`` training queries, walking through a
    fresh random permutation every epoch so that every query is used equally.
    The decay to zero removes most of the minibatch noise from the final
    parameters, which matters when the target is a risk within 1-2% of Bayes.

    Parameters
    ----------
    loss_on : callable
        Maps a 1-D int64 tensor of query indices to a scalar loss.
    parameters : list of Tensor
        Leaf tensors with ``requires_grad=True``, updated in place.
    n_queries : int
    max_iter : int
    learning_rate : float
    batch_size : int
    random_state : RandomState
        Seeds the permutations, so a fixed ``random_state`` gives identical runs.
    device : torch.device
    verbose : int, default=0
        Print the loss about ten times during the run when positive, every
        iteration when above 1.
    name : str
        Prefix of the progress lines.
    resume : list of dict, default=None
        Adam moments to continue from (``partial_fit``), one dict of NumPy
        arrays per parameter; then the step size stays constant (there is no
        horizon to decay over) and the list is updated in place with the new
        moments. An empty list starts fresh moments and is filled.
    tol : float, default=None
        Stop early on a plateau of the loss (see `PlateauStop`) and warn with
        ``ConvergenceWarning`` if ``max_iter`` comes first; ``None`` runs
        exactly ``max_iter`` iterations. The learning-rate decay is planned
        over ``max_iter`` either way.
    n_iter_no_change : int, default=5
        Blocks without improvement that stop training, with ``tol``.

    Returns
    -------
    ndarray of shape (n_iter,)
        The minibatch loss of every iteration run (``max_iter`` of them
        unless training stopped early).
    """
    optimizer = torch.optim.Adam(parameters, lr=learning_rate)
    if resume:
        for parameter, saved in zip(parameters, resume, strict=True):
            optimizer.state[parameter] = {
                # Adam keeps its step counter on the CPU
                key: torch.as_tensor(value, device="cpu" if key == "step" else device)
                for key, value in saved.items()
            }
    generator = torch.Generator().manual_seed(int(random_state.randint(2**31 - 1)))
    batch_size = min(batch_size, n_queries)
    # The permutation is drawn on the CPU (a seeded generator gives the same
    # stream on every machine) and moved once per epoch, not once per step.
    order = torch.randperm(n_queries, generator=generator).to(device)
    cursor = 0
    # Losses stay on the device: no host round trip per iteration on a GPU.
    losses = torch.empty(max_iter, device=device)
    report_every = 1 if verbose > 1 else max(1, max_iter // 10)
    plateau = PlateauStop(tol, n_iter_no_change)
    n_run = max_iter
    for iteration in range(max_iter):
        if cursor + batch_size > n_queries:
            order, cursor = torch.randperm(n_queries, generator=generator).to(device), 0
        batch = order[cursor : cursor + batch_size]
        cursor += batch_size
        if resume is None:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate * 0.5 * (1 + math.cos(math.pi * iteration / max_iter))
        optimizer.zero_grad(set_to_none=True)
        loss = loss_on(batch)
        loss.backward()
        optimizer.step()
        losses[iteration] = loss.detach()
        if verbose and (iteration % report_every == 0 or iteration == max_iter - 1):
            print(f"[{name}] iteration {iteration + 1}/{max_iter}  loss {loss.item():.6g}")
        if plateau.should_stop(losses, iteration):
            n_run = iteration + 1
            if verbose:
                print(f"[{name}] loss stopped improving; stopping at iteration {n_run}")
            break
    plateau.warn_if_unconverged(max_iter, name)
    if resume is not None:
        resume[:] = [
            {key: value.detach().cpu().numpy() for key, value in optimizer.state[p].items()}
            for p in parameters
        ]
    return losses[:n_run].cpu().numpy().astype(np.float64)
