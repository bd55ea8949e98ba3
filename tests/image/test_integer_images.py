"""Integer images (``uint8`` and the like) in every image function: the
image's own units (``preserve_range=True``) or scikit-image's floats in [0, 1]
(``False``), the result clipped to the range the input could hold, and a
``FutureWarning`` while the default is to change."""

import warnings

import numpy as np
import pytest
from sklearn.preprocessing import FunctionTransformer

from sk_softmix import GaussianMixtureDenoiser
from sk_softmix.image import (
    denoise_image,
    denoise_image_nonlocal,
    denoise_image_wiener,
    wiener_sure,
)

SIGMA = 20.0  # on the 0-255 scale


def _uint8_image(size=32):
    rng = np.random.default_rng(0)
    # blocks at the ends of the range, where an unclipped result leaves it
    clean = np.kron(rng.choice([0.0, 128.0, 255.0], size=(size // 8, size // 8)), np.ones((8, 8)))
    noisy = np.clip(np.round(clean + SIGMA * rng.standard_normal(clean.shape)), 0, 255)
    return noisy.astype(np.uint8), clean


def _functions():
    # one candidate: no SURE search, which the units do not need
    settings = {"second_temperature": 1.0, "collaborative_weight": 0.5, "wiener_variance": 1.0}
    return {
        "wiener": lambda image, scale, **kw: denoise_image_wiener(
            image, (SIGMA * scale) ** 2, **settings, **kw
        ),
        "nonlocal": lambda image, scale, **kw: denoise_image_nonlocal(
            image, (SIGMA * scale) ** 2, max_iter=5, random_state=0, return_model=False, **kw
        ),
        "patches": lambda image, scale, **kw: denoise_image(
            image,
            GaussianMixtureDenoiser(2, noise_variance=(SIGMA * scale) ** 2, random_state=0),
            patch_size=4,
            n_training_patches=49,
            remove_mean=False,
            random_state=0,
            return_model=False,
            **kw,
        ),
    }


@pytest.mark.parametrize("name", ["wiener", "nonlocal", "patches"])
def test_the_images_own_units_with_the_result_clipped_to_its_type(name):
    function = _functions()[name]
    noisy, clean = _uint8_image()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        kept = function(noisy, 1.0, preserve_range=True)
    assert kept.dtype == np.float64 and kept.min() >= 0.0 and kept.max() <= 255.0
    # the float image in the same units gives the same result, up to the clip
    as_floats = function(noisy.astype(np.float64), 1.0)
    np.testing.assert_allclose(kept, np.clip(as_floats, 0, 255))
    if name != "patches":  # a point denoiser on 4 x 4 patches is here for the units only
        assert np.mean((kept - clean) ** 2) < np.mean((noisy - clean) ** 2) / 2


@pytest.mark.parametrize("name", ["wiener", "nonlocal", "patches"])
def test_scikit_images_floats_in_zero_one(name):
    function = _functions()[name]
    noisy, clean = _uint8_image()
    scaled = function(noisy, 1 / 255, preserve_range=False)
    assert scaled.min() >= 0.0 and scaled.max() <= 1.0
    as_floats = function(noisy / 255.0, 1 / 255)
    np.testing.assert_allclose(scaled, np.clip(as_floats, 0, 1))
    # the same denoising as in the image's units, up to the scale
    kept = function(noisy, 1.0, preserve_range=True)
    np.testing.assert_allclose(scaled * 255, kept, atol=1e-6 * 255)


@pytest.mark.parametrize("name", ["wiener", "nonlocal", "patches"])
def test_the_default_warns_that_it_will_change_and_keeps_the_units(name):
    function = _functions()[name]
    noisy, _ = _uint8_image()
    with pytest.warns(FutureWarning, match="preserve_range") as caught:
        default = function(noisy, 1.0)
    assert caught[0].filename == __file__  # points at the call
    np.testing.assert_array_equal(default, function(noisy, 1.0, preserve_range=True))


def test_signed_images_scale_to_minus_one_one():
    noisy, _ = _uint8_image()
    signed = (noisy.astype(np.int16) - 128).astype(np.int8)
    scaled = denoise_image_wiener(
        signed, (SIGMA / 127) ** 2, collaborative_weight=0.0, preserve_range=False
    )
    assert scaled.min() >= -1.0 and scaled.max() <= 1.0 and scaled.min() < -0.5


def test_float_images_are_unchanged_by_preserve_range():
    noisy, _ = _uint8_image()
    image = noisy / 255.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        results = [
            denoise_image_wiener(
                image, (SIGMA / 255) ** 2, collaborative_weight=0.0, preserve_range=value
            )
            for value in (None, True, False)
        ]
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_wiener_sure_takes_the_image_in_the_same_units():
    noisy, _ = _uint8_image()
    own = wiener_sure(noisy, SIGMA**2, random_state=0, preserve_range=True)
    scaled = wiener_sure(noisy, (SIGMA / 255) ** 2, random_state=0, preserve_range=False)
    assert own == pytest.approx(scaled * 255**2, rel=1e-6)


@pytest.mark.parametrize("name", ["nonlocal", "patches"])
def test_the_functions_that_fit_a_model_return_it_on_request(name):
    # the ecosystem's return, the image alone, is to become the default:
    # None keeps the pair and says so; True and False choose without a word
    image = _uint8_image()[0].astype(np.float64)
    call = {
        "nonlocal": lambda **kw: denoise_image_nonlocal(image, 100.0, max_iter=0, **kw),
        "patches": lambda **kw: denoise_image(
            image, FunctionTransformer(), patch_size=3, n_training_patches=30, **kw
        ),
    }[name]
    with pytest.warns(FutureWarning, match="return_model=True to keep the pair") as caught:
        denoised, model = call()
    assert caught[0].filename == __file__  # the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        pair = call(return_model=True)
        alone = call(return_model=False)
    assert isinstance(pair, tuple) and isinstance(alone, np.ndarray)
    np.testing.assert_array_equal(alone, denoised)
    np.testing.assert_array_equal(pair[0], denoised)
