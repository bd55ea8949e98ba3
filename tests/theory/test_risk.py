"""Bayes, best linear and best affine risks against closed forms and samples."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from sk_softmix.datasets import make_gaussian_mixture
from sk_softmix.denoising._bayes import BayesDenoiser
from sk_softmix.theory import risk as risk_module
from sk_softmix.theory._mixture import check_mixture, posterior_spread, posterior_weights
from sk_softmix.theory.risk import bayes_risk, best_affine_risk, best_linear_risk

FIG2 = dict(means=[[3.0, 0.0], [0.0, 3.0]], covariance=1.0, noise_variance=4.0)

# Mixtures that stress the quadrature: unequal weights, anisotropic and
# per-component covariances, well-separated and singular (point-mass) parts.
TASKS = {
    "figure2": FIG2,
    "unequal_1d": dict(
        means=[[-3.0], [0.5], [4.0]],
        weights=[0.2, 0.5, 0.3],
        covariance=np.array([[[0.3]], [[2.0]], [[0.8]]]),
        noise_variance=0.7,
    ),
    "anisotropic_2d": dict(
        means=[[0.0, 0.0], [2.0, 1.0]],
        weights=[0.7, 0.3],
        covariance=np.array([[[3.0, 0.5], [0.5, 0.2]], [[0.1, 0.0], [0.0, 5.0]]]),
        noise_variance=0.3,
    ),
    "point_masses_2d": dict(means=[[0.0, 0.0], [3.0, 0.0]], covariance=0.0),
    "three_d": dict(
        means=[[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, -3.0]],
        covariance=np.diag([1.0, 0.5, 2.0]),
        noise_variance=2.0,
    ),
}


def _conditional_variance(Z, means, weights=None, covariance=1.0, noise_variance=1.0):
    """Per-sample tr Cov(X | Z = z) / p, the Monte Carlo integrand of the risk."""
    means, weights, gammas = check_mixture(means, weights, covariance)
    p = means.shape[1]
    noisy = gammas + noise_variance * np.eye(p)
    within = noise_variance * np.array(
        [np.trace(np.linalg.solve(S, G)) for S, G in zip(noisy, gammas, strict=True)]
    )
    beta = posterior_weights(Z, means, weights, noisy)
    spread = posterior_spread(Z, means, weights, noisy, gammas)
    return (beta @ within + spread) / p


def test_figure2_closed_forms():
    # R_X = (1 + 4.5) I; C = I + Delta Delta^T / 4 has eigenvalues 5.5 and 1.
    linear = 5.5 * 4 / 9.5
    affine = (5.5 * 4 / 9.5 + 1 * 4 / 5) / 2
    assert best_linear_risk(**FIG2) == pytest.approx(linear, rel=1e-14)
    assert best_affine_risk(**FIG2) == pytest.approx(affine, rel=1e-14)
    bayes = bayes_risk(**FIG2)
    # Knowing the component would give the per-component Wiener risk 0.8.
    assert 0.8 < bayes < affine < linear
    assert bayes == pytest.approx(1.4950276099, abs=1e-9)


@pytest.mark.parametrize("name", TASKS)
def test_quadrature_converges_in_node_count(name):
    task = TASKS[name]
    p = len(task["means"][0])
    coarse, fine = {1: (200, 400), 2: (300, 400), 3: (30, 40)}[p]
    a = bayes_risk(**task, method="quadrature", n_nodes=coarse)
    b = bayes_risk(**task, method="quadrature", n_nodes=fine)
    # Measured differences: below 1e-8 relative, except 7e-8 for the
    # anisotropic task, whose sharp gates slow Gauss-Hermite down.
    assert a == pytest.approx(b, rel=2e-7)
    assert bayes_risk(**task) == pytest.approx(b, rel=1e-6)


def test_quadrature_matches_2d_grid_integration_in_1d():
    """p = 1: E (X - f*(Z))^2 on a dense (x, z) grid, independent of the
    posterior algebra."""
    task = TASKS["unequal_1d"]
    means = np.array(task["means"])[:, 0]
    variances = task["covariance"][:, 0, 0]
    xi2 = task["noise_variance"]
    x = np.linspace(-12, 12, 2401)[:, None]  # (nx, 1)
    z = np.linspace(-15, 15, 3001)[None, :]  # (1, nz)
    prior = sum(
        w * np.exp(-0.5 * (x - m) ** 2 / v) / np.sqrt(2 * np.pi * v)
        for w, m, v in zip(task["weights"], means, variances, strict=True)
    )
    joint = prior * np.exp(-0.5 * (z - x) ** 2 / xi2) / np.sqrt(2 * np.pi * xi2)
    marginal = np.trapezoid(joint, x, axis=0)
    posterior_mean = np.trapezoid(x * joint, x, axis=0) / marginal
    risk = np.trapezoid(np.trapezoid((x - posterior_mean) ** 2 * joint, x, axis=0), z[0])
    # Grid spacing 0.01 on smooth Gaussians: trapezoid error well below 1e-7.
    assert bayes_risk(**task) == pytest.approx(risk, rel=1e-7)


@pytest.mark.parametrize("name", ["figure2", "anisotropic_2d", "three_d"])
def test_quadrature_agrees_with_monte_carlo(name):
    task = TASKS[name]
    n = 200_000
    quadrature = bayes_risk(**task, method="quadrature")
    monte_carlo = bayes_risk(**task, method="monte_carlo", n_samples=n, random_state=0)
    # Standard error of the (Rao-Blackwellised) Monte Carlo mean, estimated
    # from an independent sample of the same integrand; 4 SE bounds the
    # deviation with probability > 0.9999.
    Z, _, _ = make_gaussian_mixture(20_000, **task, random_state=1)
    se = _conditional_variance(Z, **task).std() / np.sqrt(n)
    assert abs(monte_carlo - quadrature) < 4 * se


def test_bayes_denoiser_empirical_risk_matches_bayes_risk():
    n = 200_000
    Z, X, _ = make_gaussian_mixture(n, **FIG2, random_state=0)
    denoised = BayesDenoiser(**FIG2).fit(Z).transform(Z)
    losses = np.mean((denoised - X) ** 2, axis=1)  # per-sample squared error / p
    predicted = _conditional_variance(Z, **FIG2)  # E[loss | Z], same samples
    risk = bayes_risk(**FIG2)
    # Paired: loss - E[loss | Z] has mean zero whatever Z's draw, and a
    # standard error about half that of the raw losses; 4 SE each.
    difference = losses - predicted
    assert abs(difference.mean()) < 4 * difference.std() / np.sqrt(n)
    assert abs(losses.mean() - risk) < 4 * losses.std() / np.sqrt(n)
    assert abs(predicted.mean() - risk) < 4 * predicted.std() / np.sqrt(n)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_best_linear_and_affine_risks_match_regression(fit_intercept):
    task = dict(
        means=[[3.0, 1.0], [-1.0, 4.0], [2.0, -2.0]],
        weights=[0.5, 0.3, 0.2],
        covariance=np.array([[1.0, 0.4], [0.4, 0.5]]),
        noise_variance=2.0,
    )
    n = 200_000
    Z_train, X_train, _ = make_gaussian_mixture(n, **task, random_state=0)
    Z_test, X_test, _ = make_gaussian_mixture(n, **task, random_state=1)
    model = LinearRegression(fit_intercept=fit_intercept).fit(Z_train, X_train)
    losses = np.mean((model.predict(Z_test) - X_test) ** 2, axis=1)
    theory = (best_affine_risk if fit_intercept else best_linear_risk)(**task)
    # Out-of-sample MSE: 4 test-set standard errors, plus the fitting excess
    # (about p (p + 1) / n times the risk, ~3e-5 relative here).
    tolerance = 4 * losses.std() / np.sqrt(n) + 1e-4 * theory
    assert abs(losses.mean() - theory) < tolerance


def test_risk_ordering_and_centred_case():
    rng = np.random.default_rng(0)
    for _ in range(5):
        means = 2 * rng.standard_normal((3, 2))
        weights = rng.dirichlet(np.ones(3))
        task = dict(means=means, weights=weights, covariance=0.5, noise_variance=1.5)
        bayes = bayes_risk(**task)
        affine = best_affine_risk(**task)
        linear = best_linear_risk(**task)
        assert bayes < affine <= linear
        # Centring the mixture makes the intercept useless.
        centred = dict(task, means=means - weights @ means)
        assert best_linear_risk(**centred) == pytest.approx(affine, rel=1e-12)


def test_single_gaussian_risks_are_the_wiener_risk():
    gamma = np.array([[2.0, 0.5], [0.5, 1.0]])
    xi2 = 0.8
    task = dict(means=[[1.0, -2.0]], covariance=gamma, noise_variance=xi2)
    S = gamma + xi2 * np.eye(2)
    wiener = np.trace(gamma - gamma @ np.linalg.solve(S, gamma)) / 2
    assert bayes_risk(**task) == pytest.approx(wiener, rel=1e-12)
    assert best_affine_risk(**task) == pytest.approx(wiener, rel=1e-12)
    assert best_linear_risk(**task) > wiener  # the mean needs an intercept


def test_risks_scale_quadratically_without_cancellation():
    # Scaling the whole model by c scales every risk by c^2; with c = 1e4 a
    # formula of the form E||X||^2 - E||f*(Z)||^2 would lose ~8 digits.
    c = 1e4
    task = TASKS["anisotropic_2d"]
    scaled = dict(
        task,
        means=c * np.array(task["means"]),
        covariance=c**2 * task["covariance"],
        noise_variance=c**2 * task["noise_variance"],
    )
    # The same fixed rule at both scales: any difference is rounding.
    quadrature = dict(method="quadrature", n_nodes=60)
    assert bayes_risk(**scaled, **quadrature) == pytest.approx(
        c**2 * bayes_risk(**task, **quadrature), rel=1e-9
    )
    for function in (best_linear_risk, best_affine_risk):
        assert function(**scaled) == pytest.approx(c**2 * function(**task), rel=1e-9)


def test_monte_carlo_in_high_dimension():
    # Far-apart components: the gate never hesitates, and the risk is the
    # per-component Wiener risk gamma^2 xi^2 / (gamma^2 + xi^2) up to e^-600.
    means = np.zeros((2, 5))
    means[0, 0], means[1, 0] = -50.0, 50.0
    risk = bayes_risk(means, covariance=1.0, noise_variance=3.0, random_state=0)
    assert risk == pytest.approx(0.75, rel=1e-12)


def test_quadrature_warns_when_not_converged(monkeypatch):
    monkeypatch.setattr(risk_module, "_QUADRATURE_RTOL", -1.0)
    with pytest.warns(RuntimeWarning, match="quadrature did not converge"):
        bayes_risk(**FIG2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(method="exact"), "'method' parameter"),
        (dict(noise_variance=0.0), "noise_variance"),
        (dict(n_nodes=0, method="quadrature"), "'n_nodes' parameter"),
        (dict(n_nodes=2.5, method="quadrature"), "'n_nodes' parameter"),
        (dict(n_nodes=10_000, method="quadrature"), "n_nodes must satisfy"),
        (dict(n_samples=0, method="monte_carlo"), "'n_samples' parameter"),
        (dict(weights=[0.2, 0.2]), "weights must sum to 1"),
    ],
)
def test_bayes_risk_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bayes_risk(**dict(FIG2, **kwargs))


def test_quadrature_refuses_high_dimension():
    with pytest.raises(ValueError, match="at most 3 features"):
        bayes_risk(np.zeros((2, 4)), method="quadrature")


@pytest.mark.parametrize("function", [best_linear_risk, best_affine_risk])
def test_linear_risk_errors(function):
    with pytest.raises(ValueError, match="noise_variance"):
        function(**dict(FIG2, noise_variance=-1.0))
    with pytest.raises(ValueError, match="covariance"):
        function(**dict(FIG2, covariance=np.eye(3)))
