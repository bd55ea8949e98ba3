"""Image denoising by patches: the patch transform is exact and keeps white
noise white; a denoiser fitted on an image's own patches lowers its error."""

import numpy as np
import pytest
from sklearn.preprocessing import FunctionTransformer

from sk_softmix import BayesDenoiser, GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.image import denoise_image, image_to_patches, patches_to_image


@pytest.mark.parametrize("remove_mean", [True, False])
def test_patches_round_trip_exactly(remove_mean):
    image = np.random.default_rng(0).random((13, 17))
    points, means = image_to_patches(image, patch_size=5, remove_mean=remove_mean)
    assert points.shape == (9 * 13, 24 if remove_mean else 25)
    np.testing.assert_allclose(patches_to_image(points, means, image.shape, 5), image, atol=1e-12)


def test_mean_free_coordinates_keep_white_noise_white():
    # Pure noise of variance 0.04: every coordinate has that variance and none
    # correlates with another (200,000 patches: standard errors about 1e-4).
    noise = 0.2 * np.random.default_rng(1).standard_normal((453, 453))
    points, means = image_to_patches(noise, patch_size=4)
    covariance = np.cov(points, rowvar=False)
    np.testing.assert_allclose(np.diag(covariance), 0.04, rtol=0.02)
    assert np.abs(covariance - np.diag(np.diag(covariance))).max() < 0.002
    assert means.var() == pytest.approx(0.04 / 16, rel=0.05)  # the mean of 16 pixels


def test_identity_denoiser_returns_the_image():
    image = np.random.default_rng(2).random((20, 20))
    out = denoise_image(
        image, FunctionTransformer(), patch_size=3, n_training_patches=30, return_model=False
    )
    np.testing.assert_allclose(out, image, atol=1e-12)


def test_denoisers_fitted_on_the_image_lower_its_error():
    # A piecewise-constant image: 7 x 7 blocks of 6 grey levels, pixel noise
    # 0.1 (blocks of 7 pixels, so that patches of 4 on a grid of step 4 cross edges).
    rng = np.random.default_rng(3)
    clean = np.kron(rng.integers(0, 6, size=(14, 14)) / 5, np.ones((7, 7)))
    noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    noisy_mse = np.mean((noisy - clean) ** 2)
    for denoiser in (
        GaussianMixtureDenoiser(4, noise_variance=0.01, random_state=0),
        SoftmaxAttentionDenoiser(
            key_bias="offset", noise_variance=0.01, max_iter=30, random_state=0
        ),
    ):
        out, fitted = denoise_image(
            noisy, denoiser, patch_size=4, n_training_patches=576, random_state=0, return_model=True
        )
        assert out.shape == clean.shape
        # measured 0.22-0.25 (mixture) and 0.34-0.39 (attention) of the noisy
        # MSE on two such images; the identity keeps 1
        assert np.mean((out - clean) ** 2) < 0.5 * noisy_mse
        assert fitted is not denoiser


def test_training_patches_are_disjoint_and_denoised_with_fit_transform():
    # A prompt-based denoiser must not see a training patch's own copy: the
    # training patches' results are fit_transform's, which leaves each one out
    # of its own prompt. They share no pixel (independent noise, for SURE).
    rng = np.random.default_rng(4)
    image = rng.random((12, 12))
    denoiser = SoftmaxAttentionDenoiser(
        1, init="bayes", noise_variance=0.01, max_iter=0, random_state=0
    )
    out, fitted = denoise_image(
        image, denoiser, patch_size=3, n_training_patches=16, random_state=0, return_model=True
    )
    points, means = image_to_patches(image, 3)
    training = np.flatnonzero((np.abs(points[:, None] - fitted.prompt_[None]).max(-1) == 0).any(1))
    assert len(training) == 16
    tops, lefts = np.divmod(training, 10)  # 10 x 10 patch positions
    assert np.all(tops % 3 == 0) and np.all(lefts % 3 == 0)
    rest = np.setdiff1d(np.arange(100), training)
    denoised = np.empty_like(points)
    denoised[rest] = fitted.transform(points[rest])
    denoised[training] = fitted.fit_transform(fitted.prompt_)[
        [int(np.flatnonzero((fitted.prompt_ == points[t]).all(1))[0]) for t in training]
    ]
    np.testing.assert_allclose(out, patches_to_image(denoised, means, image.shape, 3), atol=1e-10)
    with pytest.raises(ValueError, match="disjoint"):
        denoise_image(image, denoiser, patch_size=3, n_training_patches=17)


def test_bad_images_are_refused():
    denoiser = BayesDenoiser()
    with pytest.raises(ValueError, match="grayscale"):
        denoise_image(np.zeros((5, 5, 3)), denoiser)
    with pytest.raises(ValueError, match="smaller than a patch"):
        denoise_image(np.zeros((5, 5)), denoiser, patch_size=7)
    with pytest.raises(ValueError, match="NaN"):
        denoise_image(np.full((9, 9), np.nan), denoiser)
    with pytest.raises(ValueError, match="patch_size"):  # one pixel has no mean-free part
        denoise_image(np.zeros((9, 9)), denoiser, patch_size=1)
