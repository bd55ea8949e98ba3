"""The Wiener image denoiser: gated affine experts over each patch's search window.

The fast stage (tiles, folded aggregation) against a plain loop over every
reference and window patch; closed forms (a constant image is returned
exactly, the identity as the noise vanishes, the image's scale does not
matter); Monte-Carlo SURE against the true error; bad input.
"""

import re
import warnings

import numpy as np
import pytest
import torch

from sk_softmix.image import _sure_blend as sure_blend
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
    # SURE is unbiased up to its finite difference's bias, which at a step
    # of 0.1 noise standard deviations was +5-7% of the error on this crop
    # (the Wiener first stage, 8 draws of the noise, two probes each); on
    # 128 x 128 pixels it fluctuates by about 10% of the error from draw to
    # draw, so the mean of the paired differences over the draws must be
    # within three of its standard errors of that bias, and within 15% of
    # the error
    clean = _camera_crop(128)
    differences, errors = [], []
    for seed in range(4):
        noisy = clean + 0.1 * np.random.default_rng(seed).standard_normal(clean.shape)
        settings = {
            "second_temperature": 1.0,
            "first_stage": first_stage,
            "collaborative_weight": collaborative_weight,
            "wiener_variance": 1.0,
        }
        error = np.mean((denoise_image_wiener(noisy, 0.01, **settings) - clean) ** 2)
        differences.append(wiener_sure(noisy, 0.01, random_state=seed, **settings) - error)
        errors.append(error)
    differences = np.array(differences)
    standard_error = differences.std(ddof=1) / np.sqrt(len(differences))
    assert abs(differences.mean()) < 3 * standard_error + 0.07 * np.mean(errors)
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


def test_the_collaborative_variances_are_blended_by_sure(capsys):
    # the collaborative experts of two shrinkage variances, sharing the
    # weight 1: the result is their blend at the weights SURE printed, each
    # expert the denoiser at that variance alone
    rng = np.random.default_rng(8)
    noisy = _camera_crop(64) + 0.1 * rng.standard_normal((64, 64))
    settings = {"collaborative_weight": 1.0, "random_state": 0}
    blended = denoise_image_wiener(noisy, 0.01, wiener_variance=(1.0, 0.5), verbose=1, **settings)
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "SURE" in line]
    shares = [float(word) for word in re.findall(r"([0-9.]+) at v=", line)]
    experts = [denoise_image_wiener(noisy, 0.01, wiener_variance=v, **settings) for v in (1.0, 0.5)]
    # the blend is the experts' combination up to float32 rounding, at the
    # printed weights (two decimals), both of them used on this image
    basis = np.stack([expert.ravel() for expert in experts], axis=1)
    weights, *_ = np.linalg.lstsq(basis, blended.ravel(), rcond=None)
    assert np.max(np.abs(basis @ weights - blended.ravel())) < 1e-5
    assert weights.sum() == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(weights, shares, atol=0.006)
    assert min(shares) > 0.05


def _experts(seed, n_pixels=500):
    """Three experts' ``(residual, divergence)`` on a toy problem: their
    residuals correlated but not collinear."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(n_pixels)
    return [
        (torch.as_tensor(common + scale * rng.standard_normal(n_pixels)), divergence)
        for scale, divergence in [(0.6, 40.0), (0.8, 60.0), (0.7, 30.0)]
    ]


def _sure(weights, experts, n_pixels=500):
    residual = sum(w * r for w, (r, _) in zip(weights, experts, strict=True))
    divergence = sum(w * d for w, (_, d) in zip(weights, experts, strict=True))
    return float(residual.square().mean()) - 1 + 2 * divergence / n_pixels


def _simplex_grid(size, steps=200):
    """Every point of the simplex of ``size`` weights with coordinates in
    multiples of ``1 / steps``."""
    return [
        np.array(point + (steps - sum(point),)) / steps
        for point in np.ndindex(*(steps + 1,) * (size - 1))
        if sum(point) <= steps
    ]


@pytest.mark.parametrize("seed", [7, 8])
def test_the_blend_is_the_sure_minimum_over_the_simplex(seed):
    # SURE of sum_k u_k f_k is quadratic in u: the faces' stationary points
    # hold its minimum over the simplex, at most the grid's and within the
    # grid's resolution of it; the blend keeps the fewest experts whose
    # SURE is within the tolerance of that minimum
    experts = _experts(seed)
    gated, *collaborative = experts
    gram = torch.stack([r for r, _ in experts], 1)
    gram = (gram.T @ gram).numpy()
    divergences = np.array([d for _, d in experts])
    exact = min(_sure(shares, experts) for _, shares in sure_blend.simplex_faces(gram, divergences))
    grid = min(_sure(u, experts) for u in _simplex_grid(3))
    assert exact <= grid + 1e-12
    assert grid - exact <= 1e-3 * abs(exact)
    (gated_weight, shares), risk = sure_blend.blend_by_sure(gated, collaborative, None, 500)
    weights = np.array([gated_weight, *shares])
    assert np.all(weights >= 0) and weights.sum() == pytest.approx(1.0)
    assert risk == pytest.approx(_sure(weights, experts), rel=1e-9)
    assert risk <= exact + sure_blend.BLEND_TOLERANCE * abs(exact)


def test_a_fixed_collaborative_weight_is_shared_by_sure():
    # collaborative_weight=w: the gated expert gets 1 - w, the collaborative
    # experts split w at the lowest SURE, which a grid of splits cannot beat
    experts = _experts(9)
    gated, *collaborative = experts
    (gated_weight, shares), risk = sure_blend.blend_by_sure(gated, collaborative, 0.4, 500)
    assert gated_weight == pytest.approx(0.6) and sum(shares) == pytest.approx(0.4)
    grid = min(_sure([0.6, 0.4 * s, 0.4 * (1 - s)], experts) for s in np.linspace(0, 1, 1001))
    assert risk <= grid + 1e-12


def test_the_blend_leaves_out_experts_that_do_not_help():
    # an expert with the same residual shifted and a much larger divergence
    # is never worth any weight; of two identical experts one is kept
    gated, collaborative, _ = _experts(10)
    useless = (gated[0] + 5.0, gated[1] + 1e3)
    (gated_weight, shares), _ = sure_blend.blend_by_sure(gated, [useless], None, 500)
    assert (gated_weight, shares) == (1.0, (0.0,))
    (gated_weight, shares), _ = sure_blend.blend_by_sure(useless, [gated], None, 500)
    assert (gated_weight, shares) == (0.0, (1.0,))
    twice = [collaborative, collaborative]
    (gated_weight, shares), _ = sure_blend.blend_by_sure(None, twice, None, 500)
    assert gated_weight == 0.0 and sorted(shares) == [0.0, 1.0]


def test_sure_compares_on_crops_spread_over_the_image():
    image = np.arange(400 * 300, dtype=float).reshape(400, 300)
    crops = sure_blend.sure_crops(image, 192)
    # four quadrant centres, 75 = 300 // 4 on a side (at most a quarter of
    # the smaller side), inside the image
    assert len(crops) == 4 and all(crop.shape == (75, 75) for crop in crops)
    centres = sorted((crop[37, 37] // 300, crop[37, 37] % 300) for crop in crops)
    assert centres == [(100, 75), (100, 225), (300, 75), (300, 225)]
    # a small image: crops of at least 64 pixels while they fit in the
    # quadrants, else its centre, whole
    assert all(crop.shape == (64, 64) for crop in sure_blend.sure_crops(image[:200, :300], 192))
    assert all(crop.shape == (20, 20) for crop in sure_blend.sure_crops(image[:40, :50], 192))
    (small,) = sure_blend.sure_crops(image[:30, :50], 192)
    assert small.shape == (30, 50)


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
        (np.zeros((20, 20)), {"noise_variance": -1.0}, "noise_variance"),
        (np.zeros((20, 20)), {"noise_variance": np.inf}, "noise_variance"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "patch_size": 2.5}, "patch_size"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "step": 0}, "step"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "patch_size": 4}, "odd"),
        (np.zeros((20, 20)), {"noise_variance": 0.01, "step": 6}, "at most patch_size"),
        (_noisy_zeros(), {"noise_variance": 0.01, "crop_size": 3}, "crop_size"),
        (_noisy_zeros(), {"noise_variance": 0.01, "temperature": 0.0}, "positive"),
        (_noisy_zeros(), {"noise_variance": 0.01, "second_temperature": []}, "positive"),
        (_noisy_zeros(), {"noise_variance": 0.01, "first_stage": "bm3d"}, "first_stage"),
        (_noisy_zeros(), {"noise_variance": 0.01, "collaborative_weight": 1.5}, "in \\[0, 1\\]"),
        (_noisy_zeros(), {"noise_variance": 0.01, "collaborative_weight": "yes"}, "in \\[0, 1\\]"),
        (_noisy_zeros(), {"noise_variance": 0.01, "block_search_distance": -1}, "block_search"),
        (_noisy_zeros(), {"noise_variance": 0.01, "pilot_search_distance": []}, ">= 0"),
        (_noisy_zeros(), {"noise_variance": 0.01, "pilot_search_distance": (7, -1)}, ">= 0"),
        (_noisy_zeros(), {"noise_variance": 0.01, "wiener_variance": 0.0}, "positive"),
        (_noisy_zeros(), {"noise_variance": 0.01, "wiener_variance": (1.0, 1.0)}, "distinct"),
        (_noisy_zeros(), {"noise_variance": 0.01, "wiener_variance": np.arange(1, 9)}, "at most 7"),
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


def test_probe_cases_are_clear_errors_or_warnings():
    # issue 40's probe: each a ValueError naming the cause, or a warning
    rng = np.random.default_rng(0)
    noisy = rng.random((48, 48)) + 0.1 * rng.standard_normal((48, 48))
    with pytest.raises(ValueError, match="epsilon"):
        wiener_sure(noisy, 0.01, epsilon=0)
    with pytest.raises(ValueError, match="noise_variance"):
        wiener_sure(noisy, None)  # SURE needs the true variance, not an estimate
    for bad in (float("nan"), "0.1", -1.0):
        with pytest.raises(ValueError, match="noise_variance"):
            wiener_sure(noisy, bad)
    with pytest.raises(ValueError, match="complex"):
        denoise_image_wiener(noisy + 1j * noisy, 0.01)


def test_texture_at_the_pixel_scale_taken_for_noise_warns():
    board = np.indices((48, 48)).sum(axis=0) % 2 * 2.0 - 1  # a clean +-1 checkerboard
    with pytest.warns(UserWarning, match="taken for noise"):
        flat = denoise_image_wiener(board)
    assert np.abs(flat).max() < 0.1  # what the warning announces: nearly flat
    # given the noise, nothing is lost
    np.testing.assert_allclose(denoise_image_wiener(board, 0.0), board)
    # a natural image with its noise estimated does not warn
    camera = np.asarray(pytest.importorskip("skimage.data").camera()[::4, ::4], float) / 255
    noisy = camera + 0.1 * np.random.default_rng(1).standard_normal(camera.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        denoise_image_wiener(noisy)
