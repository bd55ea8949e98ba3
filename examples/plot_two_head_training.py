"""
Learning the two-head Bayes denoiser
====================================

Two clusters in the plane, ``m_1 = (3, 0)`` and ``m_2 = (0, 3)``, with
``gamma = 1``, seen through heavy noise ``xi = 2``: the paper's Figure 2
task. The Bayes denoiser ``E[X | Z]`` shrinks the observation *and* decides
which cluster it came from, a query-dependent choice. Two softmax heads
represent it exactly, while no linear-attention predictor gets below the
risk of the best linear estimator, here 55% above Bayes (Theorem 4.1).

The paper trains two heads on the population (an infinite prompt) by
online stochastic gradient descent, step ``2e-3``, gradient norm clipped at
10, and watches the excess risk ``E||f(Z) - f*(Z)||^2``, computed by
Gauss-Hermite quadrature, go to nearly zero. This example differs on
purpose, because an estimator has a finite prompt:
:class:`~sk_softmix.SoftmaxAttentionDenoiser` trains two plain heads
(``residual=False``, the form of Theorem 4.1) from a random start with its
own optimiser (Adam) on a prompt of 3,000 noisy points, and the excess risk
is measured on 2,000 fresh points after every pass over the data. Its
floor is therefore the finite prompt's, not zero.
"""

import matplotlib.pyplot as plt
import numpy as np

from sk_softmix import BayesDenoiser, LinearAttentionDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.theory.risk import bayes_risk, best_linear_risk

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

task = {"means": np.array([[3.0, 0.0], [0.0, 3.0]]), "covariance": 1.0, "noise_variance": 4.0}
Z, X, labels = make_gaussian_mixture(3_000, **task, random_state=0)
Z_test, _, _ = make_gaussian_mixture(2_000, **task, random_state=1)

# %%
# Measuring the excess risk
# -------------------------
# Since ``f*`` is the conditional mean, the excess risk of any ``f`` is
# ``E||f(Z) - f*(Z)||^2``: it needs no clean points and carries none of their
# noise, so 2,000 test points measure even a 0.1% excess. We report it per
# entry and relative to the Bayes risk, i.e. ``MSE / Bayes - 1``.
bayes = bayes_risk(**task)  # per entry, by Gauss-Hermite quadrature
target = BayesDenoiser(**task).fit(Z_test).transform(Z_test)


def relative_excess(denoiser) -> float:
    return float(np.mean((denoiser.transform(Z_test) - target) ** 2) / bayes)


# %%
# Training from a random start
# ----------------------------
# ``partial_fit`` runs one pass over the data (12 Adam steps of 256 queries)
# and keeps the optimiser's state, so a loop of passes is one training run
# that we can stop and measure; the step size follows a cosine decay set
# pass by pass. ``history_`` collects the minibatch loss of every step.
n_passes, peak_step = 50, 0.03
denoiser = SoftmaxAttentionDenoiser(
    n_heads=2, residual=False, init="random", device="cpu", random_state=0
)
steps, excess = [], []
for k in range(n_passes):
    denoiser.set_params(learning_rate=peak_step * 0.5 * (1 + np.cos(np.pi * k / n_passes)))
    denoiser.partial_fit(Z, X)
    steps.append(denoiser.n_iter_)
    excess.append(relative_excess(denoiser))

# %%
# Two references: the construction of Theorem 4.1 with the means and
# variances estimated from this prompt (``init="bayes"``, no training), and a
# trained linear-attention denoiser, which cannot beat the best linear
# estimator.
construction = SoftmaxAttentionDenoiser(
    n_heads=2, residual=False, noise_variance=4.0, max_iter=0, device="cpu", random_state=0
).fit(Z)
linear = LinearAttentionDenoiser(device="cpu", random_state=0).fit(Z, X)
references = {
    "best linear estimator (population)": best_linear_risk(**task) / bayes - 1,
    "LinearAttentionDenoiser, trained": relative_excess(linear),
    "Theorem 4.1 construction on this prompt": relative_excess(construction),
}

print(f"Bayes risk per entry: {bayes:.4f}")
print("two softmax heads from a random start, relative excess risk (MSE / Bayes - 1):")
for k in (0, 4, 9, 24, n_passes - 1):
    print(f"  after {steps[k]:>3} steps: {excess[k]:.4f}")
last_pass = denoiser.history_[-(steps[-1] - steps[-2]) :]
print(f"  mean training loss over the last pass (history_): {last_pass.mean():.4f}")
for name, value in references.items():
    print(f"{name}: {value:.4f}")

# %%
# The trained heads end within half a percent of the Bayes risk, below the
# construction evaluated on this finite prompt (whose exponential weights
# feel the prompt's noise; see the Notes of
# :class:`~sk_softmix.SoftmaxAttentionDenoiser`), and two orders of magnitude
# below anything linear attention can reach.

figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
shown = slice(0, 600)
left.scatter(*Z[shown].T, s=4, color="tab:gray", alpha=0.5, label="noisy Z")
left.scatter(*X[shown].T, s=4, c=labels[shown], cmap="coolwarm", label="clean X")
left.scatter(*task["means"].T, marker="x", color="black", s=60)
left.set_aspect("equal")
left.set_title("Clean points and their noisy observations")
left.legend(loc="lower left")
right.semilogy(steps, excess, marker=".", label="two softmax heads, random start")
for (name, value), style in zip(references.items(), ("--", ":", "-."), strict=True):
    right.axhline(value, linestyle=style, color="black", linewidth=1, label=name)
right.set_xlabel("Adam step")
right.set_ylabel("MSE / Bayes - 1 (held out)")
right.set_title("Excess risk along training")
right.legend(fontsize=8)
figure.tight_layout()
