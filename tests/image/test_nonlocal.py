"""Trainable non-local means: the image head is the engine's key-norm head
over each patch's search window, its sliding-sum form is exact, its
Monte-Carlo SURE is unbiased, and training on the noisy image alone improves
on plain non-local means."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from scipy.ndimage import uniform_filter

from sk_softmix.attention import softmax_attention
from sk_softmix.image import denoise_image_nonlocal
from sk_softmix.image._nonlocal_fit import _padded
from sk_softmix.image._nonlocal_head import (
    margin,
    nonlocal_head,
    nonlocal_sure,
    sliding_sums,
    start_parameters,
)


def _parameters(search_distance, seed=0, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    side = 2 * search_distance + 1

    def tensor(value):
        return torch.as_tensor(value, dtype=dtype)

    return {
        "log_bandwidth": tensor(np.log(0.7)),
        "offset_bias": tensor(rng.normal(size=side * side)),
        "value_scale": tensor(0.9),
        "skip": tensor(0.15),
        "intercept": tensor(-0.05),
    }


def _reference(image, parameters, k, d):
    """Term by term: every patch's key-norm head over its search window
    (``softmax_attention`` with ``U = W = g I`` and the offsets' prior as a
    per-token key bias, on the plain formula), each patch's estimate
    ``lambda z + v mean + c``, and every pixel the average of the estimates
    of the patches that hold it."""
    r, m = k // 2, margin(k, d)
    padded = np.pad(image, m, mode="reflect")
    g = float(parameters["log_bandwidth"].exp())
    eye = g * torch.eye(k * k, dtype=torch.float64)
    offsets = [(a, b) for a in range(-d, d + 1) for b in range(-d, d + 1)]

    def patch(row, col):  # the patch centred on padded[row, col], flattened
        return padded[row - r : row + r + 1, col - r : col + r + 1].ravel()

    height, width = image.shape
    estimates = {}
    for row in range(m - r, m + height + r):
        for col in range(m - r, m + width + r):
            query = torch.as_tensor(patch(row, col))[None]
            prompt = torch.as_tensor(np.stack([patch(row + a, col + b) for a, b in offsets]))
            mean = softmax_attention(
                query,
                prompt,
                eye,
                torch.eye(k * k, dtype=torch.float64),
                key_norm=eye,
                key_bias=parameters["offset_bias"],
                method="reference",
            )[0].numpy()
            estimate = (
                float(parameters["skip"]) * query[0].numpy()
                + float(parameters["value_scale"]) * mean
                + float(parameters["intercept"])
            )
            estimates[row, col] = estimate.reshape(k, k)
    out = np.zeros(image.shape)
    for u in range(height):
        for v in range(width):
            out[u, v] = np.mean(
                [
                    estimates[m + u - o1, m + v - o2][r + o1, r + o2]
                    for o1 in range(-r, r + 1)
                    for o2 in range(-r, r + 1)
                ]
            )
    return out


@pytest.mark.parametrize("k, d", [(3, 1), (3, 2), (5, 2)])
def test_head_is_the_key_norm_head_over_each_search_window(k, d):
    image = np.random.default_rng(k + d).normal(size=(9, 11))
    parameters = _parameters(d, seed=k)
    padded = torch.as_tensor(np.pad(image, margin(k, d), mode="reflect"))
    fast = nonlocal_head(padded, parameters, k, d).numpy()
    np.testing.assert_allclose(fast, _reference(image, parameters, k, d), atol=1e-10)


def test_closed_forms_uniform_weights_and_one_offset():
    # g -> 0 and no prior: every offset weighs the same, and the head is the
    # mean over the (2 d + 1)^2 window; a prior that puts all weight on
    # delta = 0 returns the image itself.
    image = np.random.default_rng(1).normal(size=(16, 13))
    k, d = 5, 3
    parameters = _parameters(d)
    parameters.update(
        log_bandwidth=torch.tensor(-80.0, dtype=torch.float64),
        offset_bias=torch.zeros((2 * d + 1) ** 2, dtype=torch.float64),
        value_scale=torch.tensor(1.0, dtype=torch.float64),
        skip=torch.tensor(0.0, dtype=torch.float64),
        intercept=torch.tensor(0.0, dtype=torch.float64),
    )
    padded = torch.as_tensor(np.pad(image, margin(k, d), mode="reflect"))
    window_mean = uniform_filter(image, size=2 * d + 1, mode="mirror")
    head = nonlocal_head(padded, parameters, k, d).numpy()
    np.testing.assert_allclose(head, window_mean, atol=1e-12)
    parameters["offset_bias"][(2 * d + 1) ** 2 // 2] = 800.0
    head = nonlocal_head(padded, parameters, k, d).numpy()
    np.testing.assert_allclose(head, image, atol=1e-12)


def test_sliding_sums_are_window_sums_in_both_dtypes():
    x = np.random.default_rng(2).random((3, 40, 37)) * 1e3
    expected = np.array(
        [
            [[x[c, i : i + 5, j : j + 5].sum() for j in range(33)] for i in range(36)]
            for c in range(3)
        ]
    )
    np.testing.assert_allclose(sliding_sums(torch.as_tensor(x), 5).numpy(), expected, rtol=1e-12)
    # float32: rounding grows with a side (40 terms of 1e3), not the area
    got = sliding_sums(torch.as_tensor(x, dtype=torch.float32), 5).numpy()
    np.testing.assert_allclose(got, expected, rtol=2e-5)


def _jacobian_trace(image, parameters, k, d):
    m = margin(k, d)

    def head(flat):
        return nonlocal_head(_padded(flat.view(image.shape), m), parameters, k, d).ravel()

    jacobian = torch.autograd.functional.jacobian(head, torch.as_tensor(image).ravel())
    return float(torch.diagonal(jacobian).sum()), head(torch.as_tensor(image).ravel())


def test_monte_carlo_sure_equals_exact_sure_on_average():
    # SURE with the exact divergence (trace of the autograd Jacobian, paths
    # through the reflected border included) against the mean of 3,000
    # one-probe estimates: within 4 standard errors plus the finite
    # difference's O(epsilon) bias.
    k, d = 3, 2
    image = np.random.default_rng(3).normal(size=(8, 9))
    parameters = _parameters(d, seed=4)
    trace, denoised = _jacobian_trace(image, parameters, k, d)
    residual = float(((denoised - torch.as_tensor(image).ravel()) ** 2).mean())
    exact = residual - 1 + 2 * trace / image.size
    m = margin(k, d)
    padded = _padded(torch.as_tensor(image), m)
    generator = torch.Generator().manual_seed(5)
    draws = np.array(
        [
            float(
                nonlocal_sure(
                    padded,
                    _padded(torch.randn(image.shape, generator=generator, dtype=torch.float64), m),
                    parameters,
                    k,
                    d,
                )
            )
            for _ in range(3000)
        ]
    )
    standard_error = draws.std() / np.sqrt(len(draws))
    assert abs(draws.mean() - exact) < 4 * standard_error + 1e-3
    # the divergence is not negligible here: leaving it out moves SURE by far more
    assert abs(2 * trace / image.size) > 20 * standard_error


def test_sure_is_unbiased_for_the_error():
    # Fixed parameters, 40 noisy draws of a piecewise-constant image in units
    # of the noise: the mean of SURE - squared error is 0 within 4 standard errors.
    rng = np.random.default_rng(6)
    clean = np.kron(rng.integers(0, 3, size=(5, 5)) * 2.0, np.ones((8, 8)))  # 40 x 40
    k, d = 3, 3
    m = margin(k, d)
    parameters = _parameters(d, seed=7)
    parameters["offset_bias"] = 0.3 * parameters["offset_bias"]
    gaps = []
    for _ in range(40):
        noisy = clean + rng.standard_normal(clean.shape)
        padded = _padded(torch.as_tensor(noisy), m)
        probe = _padded(torch.as_tensor(rng.standard_normal(clean.shape)), m)
        with torch.no_grad():
            sure = float(nonlocal_sure(padded, probe, parameters, k, d))
            denoised = nonlocal_head(padded, parameters, k, d).numpy()
        gaps.append(sure - np.mean((denoised - clean) ** 2))
    gaps = np.array(gaps)
    assert abs(gaps.mean()) < 4 * gaps.std() / np.sqrt(len(gaps))


def _blocks(seed, size=72, sigma=0.1):
    rng = np.random.default_rng(seed)
    clean = np.kron(rng.integers(0, 5, size=(size // 8, size // 8)) / 4, np.ones((8, 8)))
    return clean, clean + sigma * rng.standard_normal(clean.shape)


def test_training_on_the_noisy_image_beats_plain_non_local_means():
    # Blocks of 8 pixels, noise 0.1: the start (non-local means at h = sigma)
    # against SURE training on the noisy image alone and against training on
    # the clean image. SURE training gave 0.53-0.58x the start's error and
    # 1.02-1.06x the supervised one (three such images, two seeds each); 0.8x
    # and 1.25x leave room for that spread.
    clean, noisy = _blocks(8)

    def error(**kwargs):
        settings = {"crop_size": 48, "max_iter": 60, "random_state": 0, **kwargs}
        denoised, head = denoise_image_nonlocal(noisy, 0.01, return_model=True, **settings)
        return np.mean((denoised - clean) ** 2), head

    start, start_head = error(max_iter=0)
    by_sure, head = error()
    supervised, _ = error(clean=clean)
    assert start_head.kept == "start" and head.kept == "trained"
    assert by_sure < 0.8 * start
    assert by_sure < 1.25 * supervised
    assert head.sure < head.start_sure
    # the head's loss on its evaluation crops, per pixel over sigma^2, estimates its error
    assert head.sure == pytest.approx(by_sure / 0.01, abs=0.1)


def test_apply_reproduces_the_result_and_follows_scale_and_shift():
    clean, noisy = _blocks(9, size=48)
    denoised, head = denoise_image_nonlocal(
        noisy, 0.01, max_iter=10, random_state=1, return_model=True
    )
    np.testing.assert_allclose(head.apply(noisy), denoised, atol=1e-6)
    # NumPy fields only: it pickles and loads anywhere
    np.testing.assert_allclose(pickle.loads(pickle.dumps(head)).apply(noisy), denoised, atol=1e-6)
    # a tiny scale and a large offset: the same image in other units
    scaled = denoise_image_nonlocal(
        1e-6 * noisy + 1e3, 1e-14, max_iter=10, random_state=1, return_model=False
    )
    np.testing.assert_allclose((scaled - 1e3) / 1e-6, denoised, atol=1e-4)
    assert head.offset_bias.shape == (13, 13)


def test_sure_stays_right_when_the_noise_is_tiny():
    # Blocks 0 to 1 with noise 1e-5: the image spans 1e5 noise units, where
    # float32 resolves SURE's nudged outputs to about 6e-3 of a unit, worse
    # than the 1e-3 nudge (it read 0.32 where the error was 1.0 on camera).
    rng = np.random.default_rng(14)
    clean = np.kron(rng.integers(0, 5, size=(6, 6)) / 4, np.ones((8, 8)))
    noisy = clean + 1e-5 * rng.standard_normal(clean.shape)
    denoised, head = denoise_image_nonlocal(
        noisy, 1e-10, max_iter=10, random_state=0, return_model=True
    )
    error = np.mean((denoised - clean) ** 2) / 1e-10
    assert error < 0.5  # the flat blocks are averaged
    assert head.sure == pytest.approx(error, abs=0.1)


def test_warns_when_the_noise_variance_exceeds_what_the_image_shows():
    clean, noisy = _blocks(15, size=48)
    with pytest.warns(UserWarning, match="the image shows at most"):
        denoise_image_nonlocal(clean, 0.01, max_iter=0, return_model=False)  # no noise at all
    with pytest.warns(UserWarning, match="the image shows at most"):
        denoise_image_nonlocal(noisy, 0.09, max_iter=0, return_model=False)  # 3x the noise's sigma
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        denoise_image_nonlocal(noisy, 0.01, max_iter=0, return_model=False)
        # less noise than shown: no check
        denoise_image_nonlocal(noisy, 0.0001, max_iter=0, return_model=False)


def test_constant_image_stays_constant():
    image = np.full((30, 30), 0.3)
    with pytest.warns(UserWarning, match="the image shows at most"):
        denoised, head = denoise_image_nonlocal(
            image, 0.01, max_iter=5, random_state=0, return_model=True
        )
    assert np.all(np.isfinite(denoised))
    np.testing.assert_allclose(denoised, 0.3, atol=1e-3)


@pytest.mark.parametrize("sigma", [0.1, 0.002])
def test_float32_head_agrees_with_float64(sigma):
    # at noise 0.002 the blocks' edges are 500 noise units high: squared
    # differences of 2.5e5 a pixel, whose clipping keeps float32 sums exact enough
    _, noisy = _blocks(10, size=128, sigma=sigma)
    k, d = 5, 6
    m = margin(k, d)
    image = (noisy - noisy.mean()) / sigma
    outputs = [
        nonlocal_head(
            torch.as_tensor(np.pad(image, m, mode="reflect"), dtype=dtype),
            start_parameters(k, d, "cpu", dtype),
            k,
            d,
        ).numpy()
        for dtype in (torch.float32, torch.float64)
    ]
    # float32 rounding over 169 offsets: about 1e-5 of the outputs' size
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-4)


def test_verbose_reports_progress(capsys):
    _, noisy = _blocks(11, size=32)
    denoise_image_nonlocal(noisy, 0.01, max_iter=10, verbose=1, random_state=0, return_model=False)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 10 and "SURE" in lines[0]
    # and a progress bar over the steps on standard error, silent without verbose
    assert "denoise_image_nonlocal" in captured.err and "10/10" in captured.err
    denoise_image_nonlocal(noisy, 0.01, max_iter=10, random_state=0, return_model=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "image, kwargs, match",
    [
        (np.zeros((3, 4, 4)), {}, "grayscale"),
        (np.zeros((1, 9)), {}, "at least 2 x 2"),
        (np.full((9, 9), np.nan), {}, "NaN"),
        (np.zeros((9, 9)), {"patch_size": 4}, "odd"),
        (np.zeros((9, 9)), {"clean": np.zeros((8, 9))}, "clean has shape"),
    ],
)
def test_bad_input_raises(image, kwargs, match):
    with pytest.raises(ValueError, match=match):
        denoise_image_nonlocal(image, 0.01, **kwargs)


@pytest.mark.parametrize("noise_variance", [0.0, -1.0, np.inf])
def test_noise_variance_must_be_positive_and_finite(noise_variance):
    with pytest.raises(ValueError, match="noise_variance"):
        denoise_image_nonlocal(np.zeros((9, 9)), noise_variance)
