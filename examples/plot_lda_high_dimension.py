"""
Learning LDA in dimension 20: three initialisations
===================================================

Configuration C2 of the paper: ``d = 20``, ``m_1 = e_1``, ``m_{-1} = -e_1``,
``Gamma = I``, balanced classes. In this symmetric balanced case, gradient
flow started at ``U11 = 0``, ``u12 = 0``, ``v22 = 0`` with ``v21`` orthogonal
to the Krylov space ``K = span{m, Gamma m, ...}`` stays on an invariant
subspace where the head is linear, ``f(x) = w^T x`` with ``w = U11 Gamma v21``,
converges exponentially to the Bayes score, and conserves
``||U11||_F^2 - ||v21||^2`` (Theorem 3.6). The paper's Figure 5 shows that an
isotropic ``v21(0) ~ N(0, I)``, which needs no knowledge of ``m`` or
``Gamma``, also reaches a small excess risk quickly, and its Figure 4 that
every parameter drawn from ``N(0, 1)`` does not.

We first run the population dynamics of the theorem with
:func:`sk_softmix.theory.lda_dynamics.population_gradient_descent`, then train
:class:`~sk_softmix.SoftmaxAttentionClassifier` with ``init="zero"`` (its
default) on 3,000 labelled pairs and follow its held-out log-loss.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import norm
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.datasets import make_lda
from sk_softmix.theory.lda import effective_coordinates, effective_score
from sk_softmix.theory.lda_dynamics import invariant_subspace_start, population_gradient_descent

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

d = 20
e1 = np.eye(d)[0]
means = np.array([-e1, e1])  # m_{-1}, then m_1 (configuration C2)
covariance = np.eye(d)
w_star = 2 * e1  # the Bayes score is w*^T x with w* = Gamma^{-1} (m_1 - m_{-1}), b* = 0

# %%
# The dynamics of Theorem 3.6
# ---------------------------
# The population is stood for by 20,000 points: 10,000 draws and their
# mirror images ``(-x, -y)``, which keeps the symmetry ``m_1 = -m_{-1}``
# exact. On this sample gradient descent converges to the sample's own
# optimum, the logistic regression without intercept ``w_hat``, which differs
# from ``w*`` by the sampling error only. Three starts: Theorem 3.6's
# (:func:`~sk_softmix.theory.lda_dynamics.invariant_subspace_start`, ``v21(0)`` projected onto
# ``K^perp``, here ``K = span{e_1}``), the zero start with an unprojected
# Gaussian ``v21(0)`` (Figure 5), and every entry Gaussian (Figure 4). The
# paper runs stochastic gradient descent with step 1e-2 on fresh samples;
# here it is full-batch gradient descent with the same step on one
# symmetric sample, so the risk curves are smooth.
X, y = make_lda(10_000, means, random_state=0)
X, y = np.vstack([X, -X]), np.concatenate([y, -y])
logistic = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000)
w_hat = logistic.fit(X, y).coef_[0]
best_risk = np.mean(np.logaddexp(0, -y * (X @ w_hat)))

rng = np.random.default_rng(0)
starts = {
    "v21(0) in K-perp (Theorem 3.6)": invariant_subspace_start(e1, covariance, random_state=0),
    "v21(0) ~ N(0, I) (Figure 5)": (np.zeros((d, d)), np.zeros(d), rng.normal(size=d), 0.0),
    "all entries N(0, 1) (Figure 4)": (
        rng.normal(size=(d, d)),
        rng.normal(size=d),
        rng.normal(size=d),
        rng.normal(),
    ),
}
runs = {}
for name, theta in starts.items():
    runs[name] = population_gradient_descent(
        theta, X, y, means, covariance, 0.5, learning_rate=0.01, n_steps=1500
    )

sampling_error = np.linalg.norm(w_hat - w_star) / np.linalg.norm(w_star)
print(f"sampling error of the optimum: ||w_hat - w*|| / ||w*|| = {sampling_error:.3f}")
for name, run in runs.items():
    c = effective_coordinates(*run["theta"], means, covariance, 0.5)
    excess = run["risk"] - best_risk
    gap = np.linalg.norm(c["w"] - w_hat) / np.linalg.norm(w_hat)
    print(f"{name}:")
    shown = " / ".join(f"{value:.1e}" for value in excess[[0, 300, -1]])
    print(f"  risk - optimum after 0 / 300 / 1500 steps: {shown}")
    print(
        f"  final ||w - w_hat|| / ||w_hat|| = {gap:.1e}, b = {c['b']:.3f}, r = {c['r']:.3f}, "
        f"||s|| = {np.linalg.norm(c['s']):.3f}"
    )
    print(f"  balance ||U11||^2 - ||v21||^2: {run['balance'][0]:.4f} -> {run['balance'][-1]:.4f}")

# %%
# From ``K^perp`` the head stays linear (``b = r = s = 0`` throughout) and the
# excess risk falls exponentially to machine precision, while the balance
# moves only by the discretisation error of gradient descent (it is exactly
# conserved by the flow). From an isotropic ``v21(0)`` the first 300 steps
# look the same (6e-5 against 2e-5); the sigmoid term then takes a small
# nonzero part and the excess risk stalls near 1e-8, far below any
# statistical error: the paper's Figure 5, observed, not proved. From every
# entry Gaussian (Figure 4) the head starts with a steep sigmoid
# (``||s|| = 11`` at the end) and a large balance, and after 1,500 steps it is
# still 2e-3 above the optimum, 14% away from it in ``w``.
#
# The estimator, from the zero initialisation
# -------------------------------------------
# ``SoftmaxAttentionClassifier`` trains one head on a finite prompt (its 3,000
# training pairs) with Adam and a small penalty on ``U11`` and ``u12``.
# ``history_`` records the effective coordinates ``(w, b, r, s)`` at every
# step, computed from the prompt's class statistics, so the population score
# ``w^T x + b + r sigmoid(s^T x)`` of the head at each step can be scored on
# held-out points.
X_train, y_train = make_lda(3_000, means, random_state=1)
X_test, y_test = make_lda(20_000, means, random_state=2)
bayes_loss = np.mean(np.logaddexp(0, -y_test * (X_test @ w_star)))
# The paper's model and start as Section 3.3 studies them: heads only
# (residual=False), the zero start with a Gaussian ``v21`` (not Theorem
# 3.6's condition ``v21(0)`` in ``K-perp``), Adam on every training pair (no
# held-out rows, no choice of start): what it shows is observed, not proved.
classifier = SoftmaxAttentionClassifier(
    residual=False,
    init="zero",
    solver="adam",
    early_stopping=False,
    device="cpu",
    random_state=0,
)
classifier.fit(X_train, y_train)


def head_at(step: int) -> dict:
    """Effective coordinates of the (single) head at a training step."""
    coordinates = {key: classifier.history_[key][step, 0] for key in ("w", "b", "r", "s")}
    return coordinates | {"s0": 0.0}  # balanced classes: s0 = log(pi_+ / (1 - pi_+)) = 0


along_training = np.array(
    [
        np.mean(np.logaddexp(0, -y_test * effective_score(X_test, head_at(k))))
        for k in range(classifier.n_iter_)
    ]
)
final_loss = log_loss(y_test, classifier.predict_proba(X_test))
lda = LinearDiscriminantAnalysis().fit(X_train, y_train)
lda_loss = log_loss(y_test, lda.predict_proba(X_test))

print(f"\nheld-out log-loss / Bayes ({len(X_test)} points; Bayes log-loss {bayes_loss:.4f}):")
for k in (0, 20, 50, 100, classifier.n_iter_ - 1):
    print(f"  head at step {k:>3} (population score): {along_training[k] / bayes_loss:.4f}")
print(f"  trained classifier (its 3,000-point prompt): {final_loss / bayes_loss:.4f}")
print(f"  LinearDiscriminantAnalysis on the same data: {lda_loss / bayes_loss:.4f}")
print(
    f"accuracy: classifier {classifier.score(X_test, y_test):.4f}, "
    f"LDA {lda.score(X_test, y_test):.4f}, Bayes {norm.cdf(1.0):.4f}"
)

# %%
# In 50 steps the head is within 4% of the Bayes log-loss, and it ends within
# 2%, a little above linear discriminant analysis fitted on the same 3,000
# points (1.4%): what remains is mostly the cost of estimating 20
# coordinates from the sample, which LDA pays too. (The test accuracies sit
# slightly above the Bayes accuracy only by the chance of the test draw.)

figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
for name, run in runs.items():
    left.semilogy(np.maximum(run["risk"] - best_risk, 1e-16), label=name)
left.set_xlabel("gradient step")
left.set_ylabel("risk - optimal risk (sample)")
left.set_title("Population gradient descent, d = 20 (Figures 4 and 5)")
left.legend()
right.semilogy(along_training / bayes_loss - 1, label="SoftmaxAttentionClassifier (init='zero')")
right.axhline(lda_loss / bayes_loss - 1, color="black", linestyle="--", label="LDA, same data")
right.set_xlabel("Adam step")
right.set_ylabel("held-out log-loss / Bayes - 1")
right.set_title("The estimator along training")
right.legend()
figure.tight_layout()
