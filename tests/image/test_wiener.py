"""The Wiener image denoiser: gated affine experts over each patch's search window.

The fast stage (tiles, folded aggregation) against a plain loop over every
reference and window patch; closed forms (a constant image is returned
exactly, the identity as the noise vanishes, the image's scale does not
matter); Monte-Carlo SURE against the true error; bad input.
"""

import numpy as np
import pytest
import torch

from sk_softmix.image import _wiener_fit as wiener_fit
from sk_softmix.image import _wiener_head as wiener_head
from sk_softmix.image import denoise_image_wiener, wiener_sure
from sk_softmix.image._wiener_head import reference_positions, wiener_stage


def _reference_stage(noisy, guide, second, k, d, temperature, step):
    """The stage written out: each reference's window, weights, mean,
    covariance, Wiener map, and every window patch's estimate onto its pixels."""
    height, width = noisy.shape
    rows, cols = height - k + 1, width - k + 1
    total, weight = np.zeros_like(noisy), np.zeros_like(noisy)

    def patch(image, y, x):
        return image[y : y + k, x : x + k].ravel()

    for ry in reference_positions(rows, step, "cpu").tolist():
        for rx in reference_positions(cols, step, "cpu").tolist():
            window = [
                (y, x)
                for y in range(ry - d, ry + d + 1)
                for x in range(rx - d, rx + d + 1)
                if 0 <= y < rows and 0 <= x < cols
            ]
            z = np.array([patch(noisy, y, x) for y, x in window])
            g = np.array([patch(guide, y, x) for y, x in window])
            logits = -np.mean((g - patch(guide, ry, rx)) ** 2, axis=1) / temperature
            a = np.exp(logits - logits.max())
            a /= a.sum()
            mean = a @ z
            if second:
                centred = g - a @ g
                C = (centred * a[:, None]).T @ centred
                A = C @ np.linalg.inv(C + np.eye(k * k))
            else:
                centred = z - mean
                C = (centred * a[:, None]).T @ centred
                values, vectors = np.linalg.eigh(C)
                shrink = np.clip(values - 1, 0, None) / np.clip(values, 1e-12, None)
                A = (vectors * shrink) @ vectors.T
            estimates = mean + (z - mean) @ A.T
            for (y, x), estimate, w in zip(window, estimates, a, strict=True):
                total[y : y + k, x : x + k] += w * estimate.reshape(k, k)
                weight[y : y + k, x : x + k] += w
    return total / weight


@pytest.mark.parametrize("second", [False, True])
@pytest.mark.parametrize("step", [1, 3])
def test_fast_stage_equals_the_loop(second, step, monkeypatch):
    rng = np.random.default_rng(0)
    clean = np.kron(rng.normal(size=(4, 5)) * 2, np.ones((4, 3)))  # 16 x 15, blocks
    noisy = clean + rng.normal(size=clean.shape)
    guide = clean + 0.3 * rng.normal(size=clean.shape) if second else noisy
    settings = {"k": 3, "d": 2, "temperature": 1.5, "step": step}
    expected = _reference_stage(noisy, guide, second, **settings)
    monkeypatch.setattr(wiener_head, "TILE_REFERENCES", 3)  # several tiles, ragged ones
    fast = wiener_stage(
        torch.as_tensor(noisy),
        torch.as_tensor(guide),
        second=second,
        patch_size=3,
        search_distance=2,
        temperature=1.5,
        step=step,
    )
    np.testing.assert_allclose(fast.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_constant_image_is_returned_exactly():
    image = np.full((40, 33), 0.37)
    with pytest.warns(UserWarning, match="shows at most about 0"):  # no noise to remove
        denoised = denoise_image_wiener(image, 0.01)
    np.testing.assert_allclose(denoised, image, rtol=0, atol=1e-12)


def _camera_crop(size=96):
    skimage_data = pytest.importorskip("skimage.data")
    return skimage_data.camera()[200 : 200 + size, 200 : 200 + size] / 255.0


def test_identity_as_the_noise_vanishes():
    image = _camera_crop(48)
    # noise far below the image's contrast: every weight on the reference
    # itself, whose group is one patch, the identity
    denoised = denoise_image_wiener(image, 1e-12)
    np.testing.assert_allclose(denoised, image, rtol=0, atol=1e-4)


def test_scale_and_offset_do_not_matter():
    rng = np.random.default_rng(1)
    image = _camera_crop(48) + 0.1 * rng.standard_normal((48, 48))
    base = denoise_image_wiener(image, 0.01, random_state=0)
    scaled = denoise_image_wiener(1e4 * image + 7.0, 1e8 * 0.01, random_state=0)
    np.testing.assert_allclose(scaled, 1e4 * base + 7.0, rtol=1e-5, atol=1e-2)


def test_denoises_a_natural_image_beyond_the_noise():
    rng = np.random.default_rng(2)
    clean = _camera_crop(96)
    noisy = clean + 0.1 * rng.standard_normal(clean.shape)
    denoised = denoise_image_wiener(noisy, 0.01)
    # measured 8.4 times below the noise's error on this crop (29.6 dB on
    # the whole image, scikit-image's non-local means 28.96)
    assert np.mean((denoised - clean) ** 2) < np.mean((noisy - clean) ** 2) / 4
    # the noise estimated from the image's diagonal details
    estimated = denoise_image_wiener(noisy)
    assert np.mean((estimated - clean) ** 2) < 1.3 * np.mean((denoised - clean) ** 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "first_stage, collaborative_weight", [("threshold", 0.5), ("wiener", 0.0), ("threshold", 1.0)]
)
def test_sure_estimates_the_error(first_stage, collaborative_weight):
    # SURE is unbiased; on 128 x 128 pixels it fluctuates by about 10% of the
    # error from draw to draw (the noise's own, and one probe's), so the mean
    # of the paired differences over the draws must be within three of its
    # standard errors of zero, and within 15% of the error
    clean = _camera_crop(128)
    differences, errors = [], []
    for seed in range(4):
        noisy = clean + 0.1 * np.random.default_rng(seed).standard_normal(clean.shape)
        settings = {
            "second_temperature": 1.0,
            "first_stage": first_stage,
            "collaborative_weight": collaborative_weight,
        }
        error = np.mean((denoise_image_wiener(noisy, 0.01, **settings) - clean) ** 2)
        differences.append(wiener_sure(noisy, 0.01, random_state=seed, **settings) - error)
        errors.append(error)
    differences = np.array(differences)
    standard_error = differences.std(ddof=1) / np.sqrt(len(differences))
    assert abs(differences.mean()) < 3 * standard_error
    assert abs(differences.mean()) < 0.15 * np.mean(errors)


def test_the_second_temperature_is_chosen_by_sure(capsys):
    rng = np.random.default_rng(3)
    noisy = _camera_crop(64) + 0.1 * rng.standard_normal((64, 64))
    # a temperature so low that the second stage weighs each reference's
    # own patch alone, against a reasonable one: SURE must tell them apart
    candidates = [0.001, 1.0]
    settings = {"collaborative_weight": 0.0}
    chosen = denoise_image_wiener(
        noisy, 0.01, second_temperature=candidates, verbose=1, random_state=0, **settings
    )
    lines = capsys.readouterr().out.splitlines()
    risks = [float(line.rsplit(" ", 1)[1]) for line in lines if "SURE" in line]
    assert len(risks) == 2 and risks[1] < risks[0]
    np.testing.assert_array_equal(
        chosen, denoise_image_wiener(noisy, 0.01, second_temperature=1.0, **settings)
    )


def test_the_collaborative_weight_is_the_sure_minimum():
    # SURE of (1 - w) g + w c is quadratic in w: the closed form must be the
    # minimum of the same expression over a fine grid of [0, 1]
    rng = np.random.default_rng(7)
    gated = (torch.as_tensor(rng.standard_normal(500)), 40.0)
    collaborative = (torch.as_tensor(0.8 * rng.standard_normal(500) + 0.3), 70.0)
    best = wiener_fit._best_weight(gated, collaborative)

    def sure(w):
        residual = (1 - w) * gated[0] + w * collaborative[0]
        return wiener_fit._risk(residual, (1 - w) * gated[1] + w * collaborative[1], 500)

    grid = np.linspace(0, 1, 1001)
    assert 0 < best < 1
    assert abs(best - grid[np.argmin([sure(w) for w in grid])]) <= 1e-3
    # and clipped to [0, 1] when the minimum lies outside: an expert with the
    # same residual shifted and a much larger divergence is never worth it
    assert wiener_fit._best_weight(gated, (gated[0] + 5.0, gated[1] + 1e3)) == 0.0
    assert wiener_fit._best_weight((gated[0] + 5.0, gated[1] + 1e3), gated) == 1.0


def test_sure_compares_on_crops_spread_over_the_image():
    image = np.arange(400 * 300, dtype=float).reshape(400, 300)
    crops = wiener_fit._crops(image, 192)
    # four quadrant centres, 75 = 300 // 4 on a side (at most a quarter of
    # the smaller side), inside the image
    assert len(crops) == 4 and all(crop.shape == (75, 75) for crop in crops)
    centres = sorted((crop[37, 37] // 300, crop[37, 37] % 300) for crop in crops)
    assert centres == [(100, 75), (100, 225), (300, 75), (300, 225)]
    # a small image: its centre, whole
    (small,) = wiener_fit._crops(image[:40, :50], 192)
    assert small.shape == (40, 50)


def test_the_first_stage_is_chosen_by_sure(capsys):
    rng = np.random.default_rng(5)
    noisy = _camera_crop(64) + 0.1 * rng.standard_normal((64, 64))
    chosen = denoise_image_wiener(
        noisy, 0.01, first_stage="auto", second_temperature=1.0, verbose=1, random_state=0
    )
    lines = [line for line in capsys.readouterr().out.splitlines() if "SURE" in line]
    risks = {
        line.split("first stage ")[1].split()[0].rstrip(","): float(line.rsplit(" ", 1)[1])
        for line in lines
    }
    assert sorted(risks) == ["threshold", "wiener"]
    best = min(risks, key=risks.get)
    again = denoise_image_wiener(
        noisy, 0.01, first_stage=best, second_temperature=1.0, random_state=0
    )
    np.testing.assert_array_equal(chosen, again)


def test_the_pilot_window_is_chosen_by_sure(capsys):
    rng = np.random.default_rng(8)
    noisy = _camera_crop(64) + 0.1 * rng.standard_normal((64, 64))
    settings = {"second_temperature": 0.5, "collaborative_weight": 0.0, "random_state": 0}
    chosen = denoise_image_wiener(noisy, 0.01, pilot_search_distance=(3, 11), verbose=1, **settings)
    lines = [line for line in capsys.readouterr().out.splitlines() if "SURE" in line]
    risks = {
        int(line.split("(window ")[1].split(")")[0]): float(line.rsplit(" ", 1)[1])
        for line in lines
    }
    assert sorted(risks) == [3, 11]
    best = min(risks, key=risks.get)
    again = denoise_image_wiener(noisy, 0.01, pilot_search_distance=best, **settings)
    np.testing.assert_array_equal(chosen, again)


def test_images_smaller_than_a_block_use_the_wiener_first_stage():
    # 6 x 6 holds a 5 x 5 patch but no 8 x 8 block of the thresholding
    rng = np.random.default_rng(6)
    noisy = np.kron(rng.integers(0, 2, size=(2, 2)), np.ones((3, 3))) + 0.1 * rng.standard_normal(
        (6, 6)
    )
    auto = denoise_image_wiener(noisy, 0.01, first_stage="auto", random_state=0)
    wiener = denoise_image_wiener(
        noisy, 0.01, first_stage="wiener", collaborative_weight=0.0, random_state=0
    )
    np.testing.assert_array_equal(auto, wiener)
    with pytest.raises(ValueError, match="at least 8 x 8"):
        denoise_image_wiener(noisy, 0.01, first_stage="threshold")
    with pytest.raises(ValueError, match="at least 8 x 8"):
        denoise_image_wiener(noisy, 0.01, first_stage="wiener", collaborative_weight=0.5)


def test_noise_variance_zero_returns_the_image():
    image = _camera_crop(32)
    out = denoise_image_wiener(image, 0.0)
    np.testing.assert_array_equal(out, image)
    assert out is not image


def _noisy_zeros():
    return 0.1 * np.random.default_rng(4).standard_normal((20, 20))


@pytest.mark.parametrize(
    "image, kwargs, message",
    [
        (np.full((20, 20), np.nan), {"noise_variance": 0.01}, "NaN"),
        (np.zeros((20, 20, 3)), {"noise_variance": 0.01}, "grayscale"),
        (np.zeros((3, 20)), {"noise_variance": 0.01}, "smaller than one patch"),
        (np.zeros((20, 20)), {"noise_variance": -1.0}, "non-negative"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "patch_size": 4}, "odd"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "step": 6}, "at most patch_size"),
        (_noisy_zeros(), {"noise_variance": 0.01, "crop_size": 3}, "crop_size"),
        (_noisy_zeros(), {"noise_variance": 0.01, "temperature": 0.0}, "positive"),
        (_noisy_zeros(), {"noise_variance": 0.01, "second_temperature": []}, "positive"),
        (_noisy_zeros(), {"noise_variance": 0.01, "first_stage": "bm3d"}, "first_stage"),
        (_noisy_zeros(), {"noise_variance": 0.01, "collaborative_weight": 1.5}, "in \\[0, 1\\]"),
        (_noisy_zeros(), {"noise_variance": 0.01, "collaborative_weight": "yes"}, "in \\[0, 1\\]"),
        (_noisy_zeros(), {"noise_variance": 0.01, "block_search_distance": -1}, ">= 0"),
        (_noisy_zeros(), {"noise_variance": 0.01, "pilot_search_distance": []}, ">= 0"),
        (_noisy_zeros(), {"noise_variance": 0.01, "pilot_search_distance": (7, -1)}, ">= 0"),
    ],
)
def test_bad_input_is_a_clear_error(image, kwargs, message):
    with pytest.raises(ValueError, match=message):
        denoise_image_wiener(image, **kwargs)


def test_noise_larger_than_the_image_shows_warns():
    image = _camera_crop(32)
    with pytest.warns(UserWarning, match="smoothed beyond its noise"):
        out = denoise_image_wiener(image, 1.0)
    assert np.all(np.isfinite(out))
