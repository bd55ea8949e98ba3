"""Denoisers fitted on a handful of points: a bounded result and a warning (issue 41)."""

import warnings

import numpy as np
import pytest

from sk_softmix import GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.denoising._kernel_head import blend_weights
from sk_softmix.theory.affine_maps import best_affine_map, leave_one_out_affine_errors


def _pairs(n, p, seed):
    rng = np.random.default_rng(seed)
    clean = 0.5 * rng.normal(size=(n, p)) + 2.0 * rng.integers(0, 2, size=(n, 1))
    return clean + 0.5 * rng.normal(size=clean.shape), clean


def _messages(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught]


def test_leave_one_out_affine_errors_equal_refitting_without_each_pair():
    noisy, clean = _pairs(12, 3, 0)
    refitted = []
    for i in range(len(noisy)):
        kept = np.arange(len(noisy)) != i
        A, c = best_affine_map(noisy[kept], clean[kept])
        refitted.append(np.sum((clean[i] - A @ noisy[i] - c) ** 2))
    np.testing.assert_allclose(leave_one_out_affine_errors(noisy, clean), refitted, rtol=1e-9)
    # p + 1 points fix an affine map through each of them: nothing is left to check it
    assert np.isinf(leave_one_out_affine_errors(noisy[:4], clean[:4])).all()


def test_blend_weights_stay_a_convex_blend_where_least_squares_would_extrapolate():
    # the vote differs from the affine map by a hair, the residual by a lot:
    # unconstrained least squares puts a weight of 1e4 on the vote
    rng = np.random.default_rng(0)
    residuals = rng.normal(size=(2, 3))
    differences = 1e-4 * residuals[None] + 1e-6 * rng.normal(size=(1, 2, 3))
    (weight,) = blend_weights(differences, residuals)
    assert weight == pytest.approx(1.0)  # the bound binds: on the simplex face
    # two heads: the best convex blend, against a fine grid of the triangle
    differences = np.stack([0.3 * residuals + 0.1, 0.2 * residuals - 0.1])
    weights = blend_weights(differences, residuals)
    assert weights.min() >= 0 and weights.sum() <= 1 + 1e-12

    def loss(w):
        return np.sum((residuals - np.tensordot(w, differences, axes=1)) ** 2)

    grid = [np.array([a, b]) for a in np.linspace(0, 1, 201) for b in np.linspace(0, 1, 201)]
    best_on_grid = min(loss(w) for w in grid if w.sum() <= 1)
    assert loss(weights) <= best_on_grid + 1e-9


def test_weights_below_one_are_the_unconstrained_least_squares_ones():
    rng = np.random.default_rng(1)
    differences = rng.normal(size=(1, 50, 2))
    residuals = 0.4 * differences[0] + 0.1 * rng.normal(size=(50, 2))
    (weight,) = blend_weights(differences, residuals)
    d, r = differences[0].ravel(), residuals.ravel()
    assert weight == pytest.approx(d @ r / (d @ d), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_two_pairs_give_outputs_within_the_affine_map_and_the_targets(seed):
    # before the bound, these fits returned values up to 1e9
    noisy, clean = _pairs(2, 1, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        denoiser = SoftmaxAttentionDenoiser(random_state=0).fit(noisy, clean)
    queries = np.random.default_rng(9).normal(size=(400, 1)) * 3
    A, c = best_affine_map(noisy, clean)
    affine = queries @ A.T + c
    # a convex blend of the affine map and votes, which are averages of the targets
    bound = np.maximum(np.abs(affine), np.abs(clean).max()) + 1e-6
    assert np.all(np.abs(denoiser.transform(queries)) <= bound)


@pytest.mark.parametrize("n_pairs", [3, 4, 5])
def test_a_few_pairs_warn_that_the_affine_map_may_be_worse_than_nothing(n_pairs):
    # fewer than two pairs per coefficient of the map (3 in the plane): always
    for seed in range(5):
        noisy, clean = _pairs(n_pairs, 2, seed)
        denoiser = SoftmaxAttentionDenoiser(random_state=0)
        messages = _messages(lambda d=denoiser, z=noisy, x=clean: d.fit(z, x))
        assert any("worse than doing nothing" in m for m in messages)


def test_many_pairs_do_not_warn_about_the_affine_map():
    noisy, clean = _pairs(300, 2, 0)
    messages = _messages(lambda: SoftmaxAttentionDenoiser(random_state=0).fit(noisy, clean))
    assert not any("worse than doing nothing" in m for m in messages)


def test_gaussian_mixture_on_too_few_points_to_check_uses_one_gaussian_and_says_so():
    noisy, _ = _pairs(4, 2, 0)
    model = GaussianMixtureDenoiser(noise_variance=0.05, random_state=0)
    messages = _messages(lambda: model.fit(noisy))
    assert any("too few to check" in m for m in messages)
    assert model.n_components_ == 1
    single = GaussianMixtureDenoiser(1, noise_variance=0.05, random_state=0).fit(noisy)
    queries = np.random.default_rng(1).normal(size=(50, 2))
    np.testing.assert_allclose(model.transform(queries), single.transform(queries))
    # asked for, the mixture is kept unchecked
    kept = GaussianMixtureDenoiser(noise_variance=0.05, fallback=False, random_state=0)
    assert kept.fit(noisy).n_components_ == 2


def test_a_zero_dimensional_array_noise_variance_is_a_clear_error():
    noisy, _ = _pairs(20, 2, 0)
    with pytest.raises(ValueError, match="noise_variance"):
        SoftmaxAttentionDenoiser(noise_variance=np.array(0.01)).fit(noisy)
