"""The mixture algebra: validation, PSD clipping and the posterior mean."""

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import multivariate_normal

from sk_softmix.theory import _mixture
from sk_softmix.theory._mixture import (
    check_mixture,
    check_noise_variance,
    covariance_sqrt,
    posterior_mean,
    posterior_spread,
    posterior_weights,
    psd_part,
)


def _random_spd(rng, p, scale=1.0):
    A = rng.standard_normal((p, p))
    return scale * (A @ A.T / p + 0.1 * np.eye(p))


def _exact_parameters(covariances, noise_variance):
    """S_k = Gamma_k + xi^2 I for the exact Bayes denoiser."""
    p = covariances.shape[-1]
    return covariances + noise_variance * np.eye(p), covariances


# --------------------------------------------------------------------------
# check_mixture


def test_check_mixture_covariance_forms():
    means = [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    m, w, c = check_mixture(means, None, 2.0)
    assert m.shape == (3, 2) and m.dtype == np.float64
    np.testing.assert_array_equal(w, np.full(3, 1 / 3))
    np.testing.assert_array_equal(c, np.broadcast_to(2 * np.eye(2), (3, 2, 2)))

    shared = np.array([[2.0, 0.5], [0.5, 1.0]])
    _, _, c = check_mixture(means, [0.2, 0.3, 0.5], shared)
    np.testing.assert_array_equal(c, np.broadcast_to(shared, (3, 2, 2)))

    stack = np.stack([shared, 2 * shared, np.zeros((2, 2))])
    _, _, c = check_mixture(means, [0.2, 0.3, 0.5], stack)
    np.testing.assert_array_equal(c, stack)
    # The returned array is a copy: mutating it leaves the caller's intact.
    c[0] = 0
    assert stack[0, 0, 0] == 2.0


def test_check_mixture_renormalises_rounding_drift():
    _, w, _ = check_mixture([[0.0], [1.0]], [0.5, 0.5 + 1e-10])
    assert w.sum() == pytest.approx(1.0, abs=1e-15)


def test_check_mixture_symmetrises_and_clips_rounding():
    # Asymmetry and a negative eigenvalue at rounding level are repaired.
    cov = np.array([[1.0, 1.0 + 1e-13], [1.0, 1.0]])
    _, _, c = check_mixture([[0.0, 0.0]], None, cov)
    np.testing.assert_array_equal(c[0], c[0].T)
    assert np.linalg.eigvalsh(c[0]).min() >= 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(means=[1.0, 2.0]), r"means must be a 2-D array .* got shape \(2,\)"),
        (dict(means=np.zeros((0, 2))), r"means .* got shape \(0, 2\)"),
        (dict(means=[[np.nan, 0.0]]), "means must contain only finite"),
        (dict(means=[["a", "b"]]), "means must be an array of real numbers"),
        (dict(weights=[1.0]), r"weights must have shape .* \(2,\) .* got shape \(1,\)"),
        (dict(weights=[1.5, -0.5]), "weights must be non-negative"),
        (dict(weights=[0.5, 0.4]), "weights must sum to 1"),
        (dict(weights=[np.inf, 0.5]), "weights must contain only finite"),
        (dict(covariance=-1.0), "scalar covariance .* must be non-negative"),
        (dict(covariance=np.eye(3)), r"covariance must be .* \(2, 2\) .* \(3, 3\)"),
        (dict(covariance=np.ones(2)), r"covariance must be .* got shape \(2,\)"),
        (
            dict(covariance=np.ones((3, 2, 2))),
            r"\(n_components, n_features, n_features\) = \(2, 2, 2\); got shape",
        ),
        (dict(covariance=[[1.0, 0.5], [0.0, 1.0]]), "covariance must be symmetric"),
        (
            dict(covariance=[[1.0, 2.0], [2.0, 1.0]]),
            "covariance must be positive semi-definite; matrix 0 has the eigenvalue",
        ),
    ],
)
def test_check_mixture_errors(kwargs, message):
    arguments = dict(means=[[0.0, 0.0], [1.0, 1.0]], weights=None, covariance=1.0)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        check_mixture(**arguments)


@pytest.mark.parametrize("value", [0.0, -1.0, np.nan, np.inf, "1", None, [1.0]])
def test_check_noise_variance_rejects(value):
    with pytest.raises(ValueError, match="noise_variance"):
        check_noise_variance(value)


def test_check_noise_variance_zero_allowed_on_request():
    assert check_noise_variance(0.0, allow_zero=True) == 0.0
    assert check_noise_variance(np.float32(2.5)) == 2.5


# --------------------------------------------------------------------------
# psd_part and square roots


def test_psd_part_clips_negative_eigenvalues():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 4))
    clipped = psd_part(A)
    symmetric = (A + A.T) / 2
    eigenvalues, eigenvectors = np.linalg.eigh(symmetric)
    expected = eigenvectors @ np.diag(np.maximum(eigenvalues, 0)) @ eigenvectors.T
    # Rounding only: eigendecomposition of a 4x4 matrix of O(1) entries.
    np.testing.assert_allclose(clipped, expected, atol=1e-12)
    np.testing.assert_array_equal(clipped, clipped.T)
    assert np.linalg.eigvalsh(clipped).min() > -1e-12


def test_psd_part_keeps_psd_matrices_and_stacks():
    rng = np.random.default_rng(1)
    stack = np.stack([_random_spd(rng, 3) for _ in range(5)])
    np.testing.assert_allclose(psd_part(stack), stack, atol=1e-12)
    with pytest.raises(ValueError, match=r"shape \(p, p\) or \(n_matrices, p, p\)"):
        psd_part(np.ones((2, 3)))


def test_covariance_sqrt_handles_singular_matrices():
    rng = np.random.default_rng(2)
    v = rng.standard_normal(3)
    stack = np.stack([np.outer(v, v), _random_spd(rng, 3), np.zeros((3, 3))])
    roots = covariance_sqrt(stack)
    np.testing.assert_allclose(roots @ roots.transpose(0, 2, 1), stack, atol=1e-12)


# --------------------------------------------------------------------------
# posterior_mean against independent computations


def test_posterior_mean_matches_1d_numerical_integration():
    """E[X|Z=z] = int x p(x) N(z; x, xi^2) dx / int p(x) N(z; x, xi^2) dx."""
    means = np.array([[-3.0], [0.5], [4.0]])
    weights = np.array([0.2, 0.5, 0.3])
    variances = np.array([0.3, 2.0, 0.8])
    xi2 = 0.7
    covariances = variances[:, None, None] * np.ones((3, 1, 1))
    queries = np.linspace(-8, 9, 35)[:, None]

    # Prior density on a grid wide enough that its mass outside is < 1e-30;
    # the trapezoid rule is spectrally accurate for these smooth integrands.
    x = np.linspace(-25, 25, 200_001)
    prior = sum(
        w * np.exp(-0.5 * (x - m) ** 2 / v) / np.sqrt(2 * np.pi * v)
        for w, m, v in zip(weights, means[:, 0], variances, strict=True)
    )
    likelihood = np.exp(-0.5 * (queries - x) ** 2 / xi2)  # (n, grid)
    numerator = np.trapezoid(x * prior * likelihood, x, axis=1)
    denominator = np.trapezoid(prior * likelihood, x, axis=1)
    expected = numerator / denominator

    noisy, signal = _exact_parameters(covariances, xi2)
    result = posterior_mean(queries, means, weights, noisy, signal)
    assert result.shape == (35, 1)
    # Grid spacing 2.5e-4 leaves quadrature error far below 1e-9.
    np.testing.assert_allclose(result[:, 0], expected, rtol=1e-9, atol=1e-9)


def test_posterior_mean_shared_covariance_closed_form():
    """Section 4 of the paper: f*(z) = Gamma S^-1 z + xi^2 S^-1 sum_k beta_k m_k."""
    rng = np.random.default_rng(3)
    K, p, xi2 = 4, 3, 0.6
    means = 2 * rng.standard_normal((K, p))
    weights = rng.dirichlet(np.ones(K))
    gamma = _random_spd(rng, p)
    S = gamma + xi2 * np.eye(p)
    S_inv = np.linalg.inv(S)
    Z = 3 * rng.standard_normal((50, p))

    logits = (
        np.log(weights) + Z @ S_inv @ means.T - 0.5 * np.einsum("kp,pq,kq->k", means, S_inv, means)
    )
    beta = softmax(logits, axis=1)
    expected = Z @ (gamma @ S_inv).T + xi2 * (beta @ means) @ S_inv.T

    noisy, signal = _exact_parameters(np.broadcast_to(gamma, (K, p, p)), xi2)
    result = posterior_mean(Z, means, weights, noisy, signal)
    # Two float64 evaluations of the same quantities: rounding only.
    np.testing.assert_allclose(result, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(posterior_weights(Z, means, weights, noisy), beta, atol=1e-12)


def test_posterior_mean_two_component_isotropic_form():
    """Section 4 of the paper, Gamma = gamma^2 I and ||m_1|| = ||m_2||."""
    gamma2, xi2 = 1.0, 4.0
    means = np.array([[3.0, 0.0], [0.0, 3.0]])
    weights = np.array([0.3, 0.7])
    Z = np.random.default_rng(4).normal(scale=4, size=(40, 2))
    s = gamma2 + xi2
    beta = softmax(np.log(weights) + Z @ means.T / s, axis=1)
    expected = gamma2 / s * Z + xi2 / s * beta @ means

    noisy, signal = _exact_parameters(gamma2 * np.ones((2, 1, 1)) * np.eye(2), xi2)
    result = posterior_mean(Z, means, weights, noisy, signal)
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


def test_posterior_mean_single_gaussian_is_wiener_filter():
    rng = np.random.default_rng(5)
    p, xi2 = 3, 0.9
    mean = rng.standard_normal(p)
    gamma = _random_spd(rng, p)
    Z = rng.standard_normal((20, p))
    gain = gamma @ np.linalg.inv(gamma + xi2 * np.eye(p))
    expected = mean + (Z - mean) @ gain.T
    noisy, signal = _exact_parameters(gamma[None], xi2)
    result = posterior_mean(Z, mean[None], np.ones(1), noisy, signal)
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)


def test_posterior_weights_match_density_ratios():
    rng = np.random.default_rng(6)
    K, p = 3, 2
    means = rng.standard_normal((K, p))
    weights = np.array([0.1, 0.6, 0.3])
    noisy = np.stack([_random_spd(rng, p) for _ in range(K)])
    Z = rng.standard_normal((10, p))
    densities = np.stack(
        [
            w * multivariate_normal(m, S).pdf(Z)
            for w, m, S in zip(weights, means, noisy, strict=True)
        ],
        axis=1,
    )
    expected = densities / densities.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(posterior_weights(Z, means, weights, noisy), expected, rtol=1e-10)


def test_zero_weight_component_is_ignored():
    rng = np.random.default_rng(7)
    means = rng.standard_normal((3, 2))
    covariances = np.stack([_random_spd(rng, 2) for _ in range(3)])
    noisy, signal = _exact_parameters(covariances, 0.5)
    Z = np.vstack([rng.standard_normal((10, 2)), means[2] + 0.0])
    with_zero = posterior_mean(Z, means, [0.4, 0.6, 0.0], noisy, signal)
    without = posterior_mean(Z, means[:2], [0.4, 0.6], noisy[:2], signal[:2])
    np.testing.assert_allclose(with_zero, without, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("magnitude", [1e6, 1e20, 1e160, 1e300])
def test_posterior_mean_is_finite_for_huge_queries(magnitude):
    rng = np.random.default_rng(8)
    means = np.array([[3.0, 0.0], [0.0, 3.0], [-2.0, -2.0]])
    covariances = np.stack([_random_spd(rng, 2, scale) for scale in (0.5, 1.0, 3.0)])
    noisy, signal = _exact_parameters(covariances, 4.0)
    directions = np.array([[1, 0], [0, 1], [1, 1], [1, -1], [-1, -1], [0.3, -0.7]])
    Z = magnitude * directions
    result = posterior_mean(Z, means, [0.2, 0.0, 0.8], noisy, signal)
    assert np.all(np.isfinite(result))
    assert np.all(np.isfinite(posterior_weights(Z, means, [0.2, 0.0, 0.8], noisy)))


def test_posterior_mean_at_1e6_matches_shared_closed_form():
    # With a shared covariance the logits are linear in z: at |z| = 1e6 the
    # gate saturates and the closed form (computed independently) still holds.
    means = np.array([[3.0, 0.0], [0.0, 3.0]])
    Z = 1e6 * np.array([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [2e-6, 0.0]])
    s = 5.0
    beta = softmax(Z @ means.T / s, axis=1)
    expected = Z / s + 4.0 / s * beta @ means
    noisy, signal = _exact_parameters(np.ones((2, 1, 1)) * np.eye(2), 4.0)
    result = posterior_mean(Z, means, [0.5, 0.5], noisy, signal)
    # Relative to |z| = 1e6, float64 rounding is about 1e-10 per entry.
    np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-9)


def test_posterior_mean_input_errors():
    means = np.zeros((2, 3))
    noisy = np.broadcast_to(np.eye(3), (2, 3, 3))
    with pytest.raises(ValueError, match=r"Z must have shape \(n_samples, 3\)"):
        posterior_mean(np.zeros((4, 2)), means, [0.5, 0.5], noisy, noisy)
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        posterior_mean(np.zeros((4, 3)), means, [1.0], noisy, noisy)
    with pytest.raises(ValueError, match=r"signal_covariances must have shape"):
        posterior_mean(np.zeros((4, 3)), means, [0.5, 0.5], noisy, noisy[:1])
    singular = np.zeros((2, 3, 3))
    with pytest.raises(ValueError, match=r"noisy_covariances\[0\] must be .* definite"):
        posterior_mean(np.zeros((4, 3)), means, [0.5, 0.5], singular, singular)


def test_results_do_not_depend_on_block_size(monkeypatch):
    rng = np.random.default_rng(9)
    means = rng.standard_normal((3, 2))
    covariances = np.stack([_random_spd(rng, 2) for _ in range(3)])
    noisy, signal = _exact_parameters(covariances, 0.5)
    Z = 2 * rng.standard_normal((100, 2))
    args = (Z, means, [0.2, 0.3, 0.5], noisy, signal)
    whole = posterior_mean(*args), posterior_spread(*args)
    monkeypatch.setattr(_mixture, "_BLOCK_ELEMENTS", 7 * means.size)  # 7 rows
    blocked = posterior_mean(*args), posterior_spread(*args)
    for a, b in zip(whole, blocked, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)
