"""The iterated Bayes denoiser and its clustering transition (Proposition 4.3 of the paper)."""

import numpy as np
import pytest

from sk_softmix import BayesDenoiser
from sk_softmix.theory.dynamics import fixed_points, iterate, plot_trajectories, separation

CENTRE = np.array([1.0, 2.0])


def point_masses(lam):
    """Two equal-weight point masses at c +- h with ||h|| = lambda (xi = 1)."""
    half_gap = lam * np.array([0.6, 0.8])
    return np.stack([CENTRE + half_gap, CENTRE - half_gap]), half_gap


def oracle(means, gamma2=0.0):
    return BayesDenoiser(means, covariance=gamma2, noise_variance=1.0).fit(np.zeros((1, 2)))


def starts(n=300):
    return CENTRE + np.random.default_rng(0).normal(size=(n, 2)) * 2


def test_weak_separation_sends_every_start_to_the_midpoint():
    means, _ = point_masses(0.8)
    assert separation(means, 0.0, 1.0) == pytest.approx(0.8)
    final = iterate(oracle(means), starts(), 200)[-1]
    # along h the map contracts by at most lambda^2 = 0.64 per step
    np.testing.assert_allclose(final, np.broadcast_to(CENTRE, final.shape), atol=1e-8)
    np.testing.assert_allclose(fixed_points(means, 0.0, 1.0), CENTRE[None, :])


def test_lambda_exactly_one_belongs_to_the_weak_side():
    # Proposition 4.3: the threshold itself is weak separation. At lambda = 1
    # the map along h is u -> tanh(u), whose only fixed point is 0: every start
    # reaches the midpoint, slowly (u_t ~ sqrt(3 / (2 t)), not geometrically).
    half_gap = np.array([1.0, 0.0])  # ||h|| = 1 = xi: lambda is exactly 1
    means = np.stack([CENTRE + half_gap, CENTRE - half_gap])
    assert separation(means, 0.0, 1.0) == 1.0
    np.testing.assert_array_equal(fixed_points(means, 0.0, 1.0), CENTRE[None, :])

    n_steps = 400
    points = starts()
    trajectory = iterate(oracle(means), points, n_steps)
    u = (trajectory - CENTRE) @ half_gap  # (n_steps + 1, n)
    expected = np.empty_like(u)
    expected[0] = u[0]
    for t in range(n_steps):
        expected[t + 1] = np.tanh(expected[t])
    np.testing.assert_allclose(u, expected, atol=1e-12)
    # orthogonal directions vanish after one step (gamma = 0), and along h the
    # starts of both sides meet at the midpoint: no pair of attractors forms
    np.testing.assert_allclose(trajectory[1:, :, 1], CENTRE[1], atol=1e-12)
    assert np.all(np.abs(u[-1]) <= np.sqrt(3 / (2 * n_steps)))
    assert np.all(np.abs(u[-1]) < np.abs(u[n_steps // 2]))


@pytest.mark.parametrize("gamma2", [0.0, 0.5])
def test_strong_separation_splits_the_starts_by_side(gamma2):
    means, half_gap = point_masses(1.5 * np.sqrt(1 + gamma2))
    lam = separation(means, gamma2, 1.0)
    assert lam == pytest.approx(1.5)
    attractors = fixed_points(means, gamma2, 1.0)
    u_star = (attractors[0] - CENTRE) @ half_gap / (half_gap @ half_gap)
    assert np.tanh(lam**2 * u_star) == pytest.approx(u_star, abs=1e-12)
    points = starts()
    side = (points - CENTRE) @ half_gap > 0
    final = iterate(oracle(means, gamma2), points, 100)[-1]
    expected = np.where(side[:, None], attractors[0], attractors[1])
    np.testing.assert_allclose(final, expected, atol=1e-4)


def test_u_star_grows_to_one_with_the_separation():
    values = [
        (fixed_points(point_masses(lam)[0], 0.0, 1.0)[0] - CENTRE) @ point_masses(lam)[1] / lam**2
        for lam in (1.1, 1.5, 3.0)
    ]
    assert 0 < values[0] < values[1] < values[2] < 1
    assert values[2] == pytest.approx(1.0, abs=1e-6)


def test_iterate_shapes_and_bad_input():
    means, _ = point_masses(1.5)
    trajectory = iterate(oracle(means), starts(5), 3)
    assert trajectory.shape == (4, 5, 2)
    np.testing.assert_array_equal(trajectory[0], starts(5))
    with pytest.raises(ValueError, match="n_steps"):
        iterate(oracle(means), starts(5), -1)
    with pytest.raises(ValueError, match="means must have shape"):
        separation(np.zeros((3, 2)), 0.0, 1.0)
    with pytest.raises(ValueError, match="'noise_variance' parameter"):
        fixed_points(means, 0.0, 0.0)


def test_plot_trajectories_draws_every_start():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    means, _ = point_masses(1.5)
    ax = plot_trajectories(oracle(means), starts(12), 20, means=means, noise_variance=1.0)
    assert len(ax.lines) == 12


@pytest.mark.slow
def test_the_transition_is_visible_with_a_fitted_attention_denoiser():
    """Proposition 4.3 through a trained SoftmaxAttentionDenoiser (5,000-point prompt).

    The finite prompt shifts the attractors a little: measured, lambda = 0.8
    collapses every start onto one point at u = 0.11 (the midpoint is u = 0);
    lambda = 1.5 sends 99% of the starts to their own side's attractor at
    u = +-0.985 (u* = 0.9755).
    """
    from sk_softmix import SoftmaxAttentionDenoiser
    from sk_softmix.datasets import make_gaussian_mixture

    points = np.random.default_rng(1).normal(size=(300, 2)) * 2
    for lam in (0.8, 1.5):
        half_gap = lam * np.array([0.6, 0.8])
        means = np.stack([half_gap, -half_gap])  # centred at the origin
        Z, X, _ = make_gaussian_mixture(
            5_000, means, covariance=0.0, noise_variance=1.0, random_state=0
        )
        denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(Z, X)
        final = iterate(denoiser, points, 100)[-1]
        u = final @ half_gap / (half_gap @ half_gap)
        if lam < 1:
            assert np.ptp(final, axis=0).max() < 0.01  # one attractor for every start
            assert abs(u[0]) < 0.3
        else:
            u_star = fixed_points(means, 0.0, 1.0)[0] @ half_gap / (half_gap @ half_gap)
            assert np.all(np.abs(np.abs(u) - u_star) < 0.15)
            assert np.mean(np.sign(u) == np.sign(points @ half_gap)) > 0.95
