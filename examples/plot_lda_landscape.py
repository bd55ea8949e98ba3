"""
Gradient descent on the LDA landscape: two Bayes manifolds
==========================================================

On two Gaussian classes with a shared covariance, one softmax head is the
effective predictor ``f(x) = w^T x + b + r sigmoid(s0 + s^T x)`` (eq. 6-7 of
Gabet, Boursier & Boyer, 2026). Every critical point of its logistic risk in
these coordinates is a global minimum, and the minimisers form two affine
families (Theorem 3.1): ``E1``, where ``r = 0`` removes the sigmoid (any
``s``), and ``E2``, where ``s = 0`` makes it a constant absorbed in the bias
(any ``r``). Near the first (regular, Morse-Bott) family gradient descent
converges exponentially (Theorem 3.5); near the second the risk has ``d``
extra flat directions, and the paper observes (without proving it) that
convergence there is much slower. This is the paper's
Figure 1, on its configuration C1: ``d = 2``, ``m_1 = (1, 0)``,
``m_{-1} = (0, 1)``, ``Gamma = I``, ``pi_+ = 0.6``.

:func:`sk_softmix.theory.lda_dynamics.population_gradient_descent` averages the risk over a
sample of the population. The paper integrates by Gauss-Hermite quadrature;
here a deterministic equal-weight sample plays that role (see below), and the
step size is 1 rather than the paper's ``1e-4``, so that a few thousand
steps show the whole picture in a few seconds.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.special import expit
from scipy.stats import norm

from sk_softmix.theory.lda import (
    effective_coordinates,
    effective_score,
    lda_construction,
    lda_coordinates,
)
from sk_softmix.theory.lda_dynamics import population_gradient_descent

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

means = np.array([[0.0, 1.0], [1.0, 0.0]])  # m_{-1}, then m_1 (configuration C1)
covariance = np.eye(2)
prior = 0.6
w_star, b_star = lda_coordinates(means, covariance, prior)
gate = expit(np.log(prior / (1 - prior)))  # sigmoid(s0), the constant gate on E2

# %%
# A stand-in for the population
# -----------------------------
# At the Bayes parameters a random sample of 10,000 points leaves gradients
# of order 1e-2, and the risk is so flat along its minimisers (it even has
# minimising sequences at infinity, Proposition 3.4) that the parameters
# would drift accordingly. Instead, each class is a polar grid: 32 equally
# spaced angles and, as radii, the mean of the radius law of ``N(0, I_2)``
# over each of ``n_shells`` equal-probability shells. Every point has the same
# weight, as ``population_gradient_descent`` assumes, and on these 8,000
# points the gradient at the Bayes parameters is about 6e-6.


def polar_sample(n_shells: int, n_angles: int = 32) -> np.ndarray:
    """``n_shells * n_angles`` equal-weight points standing for ``N(0, I_2)``."""
    edges = np.sqrt(-2 * np.log1p(-np.arange(n_shells) / n_shells))  # inner radii
    outer = np.append(edges[1:], np.inf)
    tail = np.zeros(n_shells)
    tail[:-1] = outer[:-1] * np.exp(-(outer[:-1] ** 2) / 2)
    # E[R | shell] for the Rayleigh law, times the shell's probability 1/n_shells
    radii = n_shells * (
        edges * np.exp(-(edges**2) / 2)
        - tail
        + np.sqrt(2 * np.pi) * (norm.sf(edges) - norm.sf(outer))
    )
    angles = 2 * np.pi * (np.arange(n_angles) + 0.5) / n_angles
    circle = np.column_stack([np.cos(angles), np.sin(angles)])  # (n_angles, 2)
    return (radii[:, None, None] * circle[None]).reshape(-1, 2)


# 40% of the points in class -1 and 60% in class +1, as pi_+ = 0.6 asks
negatives, positives = means[0] + polar_sample(100), means[1] + polar_sample(150)
X = np.vstack([negatives, positives])
y = np.concatenate([-np.ones(len(negatives)), np.ones(len(positives))])


def distances(theta) -> tuple[float, float]:
    """Euclidean distances of the effective coordinates to ``E1`` and ``E2``."""
    c = effective_coordinates(*theta, means, covariance, prior)
    w_gap = np.sum((c["w"] - w_star) ** 2)
    to_e1 = np.sqrt(w_gap + (c["b"] - b_star) ** 2 + c["r"] ** 2)
    # E2 = {(w*, b* - r gate, r, 0)}: in the (b, r) plane, a line of direction (-gate, 1)
    to_e2 = np.sqrt(
        w_gap + c["s"] @ c["s"] + (c["b"] - b_star + gate * c["r"]) ** 2 / (1 + gate**2)
    )
    return float(to_e1), float(to_e2)


def descend(theta, n_steps: int, every: int = 25):
    """Run gradient descent, recording the parameters every ``every`` steps.

    ``population_gradient_descent`` returns the final parameters only; plain
    gradient descent has no state besides them, so chaining short runs is
    the same as one long run.
    """
    path = [theta]
    for _ in range(n_steps // every):
        run = population_gradient_descent(
            path[-1], X, y, means, covariance, prior, learning_rate=1.0, n_steps=every
        )
        path.append(run["theta"])
    return path


# %%
# Near each Bayes manifold (Figure 1)
# -----------------------------------
# Two starting points in the spirit of the paper's Table 3: a point of
# ``Theta_1`` (``r = 0``, ``s != 0``) and the construction of Lemma B.3, which
# lies on ``Theta_2`` (``s = 0``), each moved by Gaussian noise of standard
# deviation 0.1 on every entry.
on_theta1 = (
    np.outer(w_star, [1.0, 0.0]) / (2 * b_star),  # U11: w = U11 v21 = w*
    np.array([2.0, 2.0]),  # u12: a steep gate, s = (5.2, 2.8)
    np.array([2 * b_star, 0.0]),  # v21
    -b_star,  # v22: b = b*, r = 0
)
on_theta2 = lda_construction(means, covariance, prior)
rng = np.random.default_rng(0)
n_steps, every = 2000, 25
steps = np.arange(0, n_steps + 1, every)
curves = {}
for name, target, theta in [("Theta_1", 0, on_theta1), ("Theta_2", 1, on_theta2)]:
    start = tuple(np.asarray(p) + 0.1 * rng.normal(size=np.shape(p)) for p in theta)
    curves[name] = np.array([distances(t)[target] for t in descend(start, n_steps, every)])

print("effective distance to the nearby Bayes manifold")
print(f"{'step':>6} {'to E1 (near Theta_1)':>22} {'to E2 (near Theta_2)':>22}")
for k in (0, 250, 500, 1000, 2000):
    i = k // every
    print(f"{k:>6} {curves['Theta_1'][i]:>22.2e} {curves['Theta_2'][i]:>22.2e}")

# %%
# The distance to ``E1`` is a straight line on the log scale: it falls by
# three orders of magnitude in 500 steps, down to about 3e-4, the accuracy of
# the stand-in sample (a finer sample lowers that floor). The distance to
# ``E2`` first grows, and after 2,000 steps it is still 0.34, above where it
# started. This is what the paper reports as observed; the flat directions
# transverse to ``Theta_2`` are consistent with it, but no theorem of the
# paper says that convergence there must be slow.
#
# From random starting points
# ---------------------------
# The picture of the whole landscape: from Gaussian starting parameters, each
# run ends on one of the two families. In the plane of the sigmoid's
# amplitude ``r`` and slope ``||s||`` they are the two axes: ``E1`` is
# ``r = 0`` and ``E2`` is ``s = 0`` (both also have ``w = w*``).
starts = [
    (rng.normal(size=(2, 2)), rng.normal(size=2), rng.normal(size=2), rng.normal())
    for _ in range(6)
]
paths = []
print("\nfrom random starts, after 1,500 steps:")
for k, theta in enumerate(starts):
    path = descend(theta, 1500, every)
    coords = [effective_coordinates(*t, means, covariance, prior) for t in path]
    paths.append(np.array([(c["r"], np.linalg.norm(c["s"])) for c in coords]))
    to_e1, to_e2 = distances(path[-1])
    nearest = "E1" if to_e1 < to_e2 else "E2"
    print(
        f"  run {k}: r = {paths[-1][-1, 0]:+.3f}, ||s|| = {paths[-1][-1, 1]:.3f}, "
        f"distance to E1 {to_e1:.1e}, to E2 {to_e2:.1e} -> {nearest}"
    )

# %%
# Runs that reach a steep sigmoid (``||s||`` of 2.6 and 3.4) land on ``E1``
# within about 1e-3, as fast as above. Those with a shallow one (``||s||``
# near 1.3) approach ``E1`` slowly: at ``s = 0`` the two families meet and
# the curvature normal to ``E1`` vanishes. One run, with a large amplitude
# ``r``, heads for ``E2`` instead, its slope ``||s||`` shrinking slowly.

# %%
# The two families, checked
# -------------------------
# Every point of ``E1`` and of ``E2`` is the Bayes score itself, whatever its
# free coordinate: its risk on the stand-in sample equals that of
# ``w*^T x + b*`` to rounding.
s0 = np.log(prior / (1 - prior))


def risk_of(coordinates) -> float:
    return float(np.mean(np.logaddexp(0, -y * effective_score(X, coordinates))))


bayes_point = {"w": w_star, "b": b_star, "r": 0.0, "s": np.zeros(2), "s0": s0}
for free in (-3.0, 0.5, 4.0):
    on_e1 = dict(bayes_point, s=np.array([free, -free]))
    on_e2 = dict(bayes_point, b=b_star - free * gate, r=free)
    gaps = (risk_of(on_e1) - risk_of(bayes_point), risk_of(on_e2) - risk_of(bayes_point))
    print(f"free coordinate {free:+.1f}: risk - Bayes on E1 {gaps[0]:+.1e}, on E2 {gaps[1]:+.1e}")

# %%
# Minimising sequences at infinity (Proposition 3.4)
# --------------------------------------------------
# The landscape has no bad critical point, but it is not coercive: for any
# ``c``, ``zeta_R = (w* - sigma'(s0) c, b* - sigma(s0) R, R, c / R)`` cancels
# the constant and the linear part of ``R sigmoid(s0 + c^T x / R)`` with its
# affine part, so its score tends to the Bayes score as ``R`` grows while its
# coordinates run off to infinity. Nothing in the landscape alone keeps
# gradient descent bounded.
c = np.array([1.5, -2.0])
slope = gate * (1 - gate)  # sigma'(s0)
print(f"\n{'R':>7} {'|zeta_R|':>9} {'risk - Bayes':>13} {'mean |f - f*|':>14}")
for R in (1.0, 10.0, 100.0, 1000.0):
    zeta = {"w": w_star - slope * c, "b": b_star - gate * R, "r": R, "s": c / R, "s0": s0}
    size = np.sqrt(zeta["w"] @ zeta["w"] + zeta["b"] ** 2 + R**2 + zeta["s"] @ zeta["s"])
    gap = np.mean(np.abs(effective_score(X, zeta) - effective_score(X, bayes_point)))
    print(f"{R:>7.0f} {size:>9.1f} {risk_of(zeta) - risk_of(bayes_point):>13.2e} {gap:>14.2e}")

# %%
# The gap to the Bayes score shrinks like ``1/R`` (the second-order term of
# the sigmoid, ``sigma''(s0) (c^T x)^2 / (2R)``), and the excess risk, second
# order at the minimiser, like ``1/R^2`` (4e-9 at ``R = 1000``), while the
# parameters grow like ``R``. On the families themselves the risk equals the
# Bayes risk to rounding, whatever the free coordinate.

figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
for name, curve in curves.items():
    left.semilogy(steps, curve, label=f"start near {name}")
left.set_xlabel("gradient step")
left.set_ylabel("effective distance to E1 or E2")
left.set_title("Near the two Bayes manifolds (Figure 1)")
left.legend()
for path in paths:
    (line,) = right.plot(path[:, 0], path[:, 1], linewidth=1)
    right.plot(*path[0], "o", color=line.get_color())
    right.plot(*path[-1], "x", color=line.get_color(), markersize=9)
right.axvline(0, color="black", linewidth=0.8)
right.axhline(0, color="black", linewidth=0.8)
right.set_xlabel("sigmoid amplitude r  (E1: r = 0)")
right.set_ylabel("sigmoid slope ||s||  (E2: s = 0)")
right.set_title("Random starts (o) and where they are after 1,500 steps (x)")
figure.tight_layout()
