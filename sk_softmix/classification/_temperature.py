"""A read-out temperature: the classifier's scores scaled to be calibrated.

The linear starts are fitted to their training folds and the kernel heads'
read-outs to a grid, so the summed score can be over- or under-confident:
logistic regression's penalty shrinks its scores, LDA's fit to its own
training points sharpens them. Multiplying every score by one ``t > 0``
changes no predicted label (the arg-max of the logits, the sign of a binary
score), so a temperature fitted on held-out scores trades nothing for a
lower log-loss (the temperature scaling of Guo et al., 2017). On the KEEL
panel it lowered the log-loss of sonar by 19% and of the separated
clusters by 33% (benchmarks/README.md, section 10).
"""

import numpy as np
import torch

from ..training._stopping import significantly_lower
from ._linear_starts import score_losses

# Temperatures tried, in quarter octaves from 1/4 to 8: 1 is on the grid,
# so a calibrated score keeps its scale.
TEMPERATURES = 2.0 ** np.arange(-2.0, 3.01, 0.25)


def best_temperature(scores, labels, weights=None) -> float:
    """The temperature of the grid that minimises the (weighted) mean log-loss of
    ``t * scores`` (n, width), on held-out ``scores``; 1 where it ties."""
    losses = [np.average(score_losses(t * scores, labels), weights=weights) for t in TEMPERATURES]
    # the first of the ties counted from 1, so that an exact tie keeps the scale
    order = np.argsort(np.abs(np.log2(TEMPERATURES)), kind="stable")
    return float(TEMPERATURES[order[np.argmin(np.asarray(losses)[order])]])


def calibrated_losses(scores, labels, weights=None):
    """Per-sample log-losses (n,) of held-out ``scores`` at their own
    :func:`best_temperature`: a start's, judged against heads whose score has
    a temperature of its own."""
    return score_losses(best_temperature(scores, labels, weights) * scores, labels)


# Standard errors by which a temperature must lower the out-of-fold log-loss
# of a start kept alone: its out-of-fold scores come from fits on four fifths
# of the rows, the start kept from a fit on all of them, and a temperature
# fitted on the former made the latter worse where its gain was small (LDA
# on wine and iris: log-loss up 17% and 6%). Where it is large, it carries
# over (anes96, LDA kept: 0.272 -> 0.246 on new data).
N_STANDARD_ERRORS = 2.0


def start_temperature(scores, labels, weights=None, n_effective=None) -> float:
    """The temperature of a start kept alone, from its out-of-fold ``scores``:
    :func:`best_temperature` where it lowers their log-loss by
    ``N_STANDARD_ERRORS`` standard errors of the paired difference, else 1."""
    temperature = best_temperature(scores, labels, weights)
    if temperature == 1.0:
        return 1.0
    lower = significantly_lower(
        torch.as_tensor(score_losses(temperature * scores, labels)),
        torch.as_tensor(score_losses(scores, labels)),
        N_STANDARD_ERRORS,
        None if weights is None else torch.as_tensor(weights),
        n_effective,
    )
    return temperature if lower else 1.0
