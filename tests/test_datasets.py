"""make_gaussian_mixture: shapes, reproducibility and the sampled law."""

import numpy as np
import pytest

from sk_softmix.datasets import make_gaussian_mixture


def test_shapes_dtypes_and_reproducibility():
    means = [[3.0, 0.0, 1.0], [0.0, 3.0, -1.0]]
    Z, X, labels = make_gaussian_mixture(50, means, random_state=0)
    assert Z.shape == X.shape == (50, 3)
    assert labels.shape == (50,)
    assert Z.dtype == X.dtype == np.float64
    assert np.issubdtype(labels.dtype, np.integer)
    assert set(np.unique(labels)) <= {0, 1}
    again = make_gaussian_mixture(50, means, random_state=0)
    for first, second in zip((Z, X, labels), again, strict=True):
        np.testing.assert_array_equal(first, second)
    other = make_gaussian_mixture(50, means, random_state=1)
    assert not np.array_equal(Z, other[0])
    rng = np.random.RandomState(0)
    np.testing.assert_array_equal(make_gaussian_mixture(50, means, random_state=rng)[0], Z)


def test_clean_points_do_not_depend_on_noise_level():
    means = [[1.0, 2.0], [-1.0, 0.0]]
    _, X_low, labels_low = make_gaussian_mixture(20, means, noise_variance=0.1, random_state=3)
    _, X_high, labels_high = make_gaussian_mixture(20, means, noise_variance=9.0, random_state=3)
    np.testing.assert_array_equal(X_low, X_high)
    np.testing.assert_array_equal(labels_low, labels_high)
    Z, X, _ = make_gaussian_mixture(20, means, noise_variance=0.0, random_state=3)
    np.testing.assert_array_equal(Z, X)


def test_sampled_law_matches_the_mixture():
    n = 100_000
    means = np.array([[3.0, 0.0], [0.0, 3.0], [-2.0, -2.0]])
    weights = np.array([0.2, 0.5, 0.3])
    covariances = np.array(
        [[[1.0, 0.5], [0.5, 2.0]], [[0.3, 0.0], [0.0, 0.3]], [[2.0, -1.0], [-1.0, 1.0]]]
    )
    xi2 = 1.5
    Z, X, labels = make_gaussian_mixture(n, means, weights, covariances, xi2, random_state=0)

    # Label frequencies: binomial standard error sqrt(w (1 - w) / n) <= 1.6e-3;
    # 4 standard errors.
    frequencies = np.bincount(labels, minlength=3) / n
    np.testing.assert_allclose(frequencies, weights, atol=4 * 1.6e-3)

    for k in range(3):
        rows = X[labels == k]
        # Means: standard error sqrt(var / n_k) <= sqrt(2 / 20000) = 0.01.
        np.testing.assert_allclose(rows.mean(axis=0), means[k], atol=0.04)
        # Covariance entries: standard error about var * sqrt(2 / n_k) <= 0.02.
        np.testing.assert_allclose(np.cov(rows.T), covariances[k], atol=0.08)

    noise = Z - X
    # Noise: mean 0 (SE sqrt(1.5 / 1e5) = 0.004) and covariance xi^2 I
    # (SE about 1.5 * sqrt(2 / 1e5) = 0.007); 4 standard errors.
    np.testing.assert_allclose(noise.mean(axis=0), 0.0, atol=0.016)
    np.testing.assert_allclose(np.cov(noise.T), xi2 * np.eye(2), atol=0.028)
    # Independent of the clean points: cross-covariance SE about 0.005.
    cross = (noise - noise.mean(0)).T @ (X - X.mean(0)) / n
    np.testing.assert_allclose(cross, 0.0, atol=0.03)


def test_singular_covariance_gives_degenerate_samples():
    # Gamma = v v^T: the clean points lie on the line m + t v.
    v = np.array([1.0, 2.0])
    _, X, _ = make_gaussian_mixture(200, [[1.0, -1.0]], covariance=np.outer(v, v), random_state=0)
    offsets = X - [1.0, -1.0]
    np.testing.assert_allclose(offsets[:, 0] * v[1] - offsets[:, 1] * v[0], 0.0, atol=1e-12)


def test_zero_weight_component_is_never_drawn():
    _, _, labels = make_gaussian_mixture(
        1000, [[0.0], [1.0], [2.0]], weights=[0.5, 0.0, 0.5], random_state=0
    )
    assert not np.any(labels == 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_samples=0), "'n_samples' parameter"),
        (dict(n_samples=2.5), "'n_samples' parameter"),
        (dict(means=[0.0, 1.0]), "means must be a 2-D array"),
        (dict(weights=[0.5, 0.6]), "weights must sum to 1"),
        (dict(covariance=[[1.0, 3.0], [3.0, 1.0]]), "positive semi-definite"),
        (dict(noise_variance=-1.0), "noise_variance"),
        (dict(noise_variance=np.nan), "noise_variance"),
    ],
)
def test_errors(kwargs, message):
    arguments = dict(n_samples=10, means=[[0.0, 0.0], [1.0, 1.0]])
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_gaussian_mixture(**arguments)


def test_gaussian_mixture_sample_names_its_pieces_and_unpacks_noisy_first():
    sample = make_gaussian_mixture(
        4000, [[3.0, 0.0], [0.0, 3.0]], noise_variance=4.0, random_state=0
    )
    Z, X, labels = sample
    assert Z is sample.noisy and X is sample.clean and labels is sample.labels
    # the noisy view is the clean one plus noise of variance xi^2 = 4: the
    # sample variance of 8,000 entries is within 5 standard errors (0.063 each)
    assert abs(np.var(sample.noisy - sample.clean) - 4.0) < 5 * 4.0 * np.sqrt(2 / 8000)
