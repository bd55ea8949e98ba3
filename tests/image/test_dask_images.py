"""Dask arrays in the Wiener denoiser: the blend chosen on the crops, then chunk by chunk.

With a margin as wide as the denoiser's reach and chunks aligned on the
reference grids, every chunk's pixels see the pixels, groups and weights
the whole image gives them: the lazy result equals the one in memory up to
float32 rounding. A margin narrower than the reach breaks that (the test
that the reach is computed right). Noise estimated on the crops is close.
"""

import numpy as np
import pytest
from skimage import data, img_as_float

from sk_softmix.image import _wiener_fit as wiener_fit
from sk_softmix.image import denoise_image_wiener
from sk_softmix.image._wiener_dask import aligned_chunks, receptive_radius

da = pytest.importorskip("dask.array")

# small windows: a reach of 2 (2 * 5 + 7) = 34 pixels, so that a 96-pixel
# image splits into chunks with margins
SMALL = {"pilot_search_distance": 5, "block_search_distance": 5, "search_distance": 3}


def _noisy(shape, seed):
    clean = img_as_float(data.astronaut())[100 : 100 + shape[0], 150 : 150 + shape[1]]
    if len(shape) == 2:
        clean = clean.mean(axis=-1)
    return clean, clean + 0.1 * np.random.default_rng(seed).standard_normal(clean.shape)


def test_the_reach_is_both_stages_windows():
    settings = {"search_distance": 3, "block_search_distance": 5}
    # thresholding pilot over 5: 2 * 5 + 7; collaborative second stage 2 * 5 + 7
    assert receptive_radius(settings, [("threshold", 5)], None, 5) == 34
    # the gated expert alone: 2 * 3 + 4 after the pilot
    assert receptive_radius(settings, [("threshold", 5)], 0.0, 5) == 27
    # the Wiener pilot: 2 * 3 + 4
    assert receptive_radius(settings, [("wiener", None)], 1.0, 5) == 27


@pytest.mark.parametrize(
    "chunks, length, margin, period, expected",
    [
        ((40, 40, 16), 96, 36, 3, (42, 54)),  # multiples of 3, the short end merged
        ((64,), 96, 36, 15, (96,)),  # 75 and 21 < 36: one chunk, which needs no margin
        ((30, 30, 30, 30), 120, 12, 3, (30, 30, 30, 30)),
        ((10,) * 10, 100, 36, 3, (36, 64)),  # at least the margin
    ],
)
def test_chunks_are_aligned_and_wider_than_the_margin(chunks, length, margin, period, expected):
    sizes = aligned_chunks(chunks, length, margin, period)
    assert sizes == expected
    assert sum(sizes) == length
    assert all(size % period == 0 for size in sizes[:-1])
    assert len(sizes) == 1 or min(sizes) >= margin


@pytest.mark.parametrize("shape, chunks, axis", [((96, 90), 40, None), ((84, 90, 3), 40, -1)])
def test_a_dask_image_is_the_image_in_memory(shape, chunks, axis):
    _, noisy = _noisy(shape, 0)
    settings = {**SMALL, "random_state": 0, "channel_axis": axis}
    in_memory = denoise_image_wiener(noisy, 0.01, **settings)
    lazy = denoise_image_wiener(da.from_array(noisy, chunks=chunks), 0.01, **settings)
    assert isinstance(lazy, da.Array) and lazy.numblocks[0] > 1
    # float32 stages: rounding of 1e-7 measured, in units of 0.1 noise
    np.testing.assert_allclose(lazy.compute(), in_memory, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "broken, value",
    [("receptive_radius", lambda *args: 12), ("_alignment", lambda search: 1)],
    ids=["margin short of the reach", "chunks off the reference grid"],
)
def test_each_condition_of_equality_is_needed(monkeypatch, broken, value):
    # chunks of 41: with a period of 1 the second chunk's margin starts at
    # 41 - 34 = 7, off the grid of every third pixel
    _, noisy = _noisy((96, 90), 1)
    settings = {**SMALL, "random_state": 0}
    in_memory = denoise_image_wiener(noisy, 0.01, **settings)
    monkeypatch.setattr(wiener_fit, broken, value)
    lazy = denoise_image_wiener(da.from_array(noisy, chunks=41), 0.01, **settings).compute()
    assert np.abs(lazy - in_memory).max() > 1e-3


def test_noise_estimated_on_the_crops_is_as_good():
    clean, noisy = _noisy((96, 96), 2)
    settings = {**SMALL, "random_state": 0}
    in_memory = denoise_image_wiener(noisy, **settings)
    lazy = denoise_image_wiener(da.from_array(noisy, chunks=48), **settings).compute()

    def psnr(image):
        return 10 * np.log10(1 / np.mean((image - clean) ** 2))

    assert abs(psnr(lazy) - psnr(in_memory)) < 0.1


def test_integer_and_non_finite_dask_images():
    clean, noisy = _noisy((48, 48), 3)
    eight_bit = np.clip(noisy * 255, 0, 255).astype(np.uint8)
    settings = {**SMALL, "random_state": 0, "preserve_range": False}
    lazy = denoise_image_wiener(da.from_array(eight_bit, chunks=24), 0.01, **settings)
    result = lazy.compute()
    assert result.min() >= 0.0 and result.max() <= 1.0
    np.testing.assert_allclose(result, denoise_image_wiener(eight_bit, 0.01, **settings), atol=1e-5)
    broken = noisy.copy()
    broken[5, 5] = np.nan
    # found by the pass that takes the channels' means, before any denoising
    with pytest.raises(ValueError, match="NaN or infinite"):
        denoise_image_wiener(da.from_array(broken, chunks=48), 0.01, **SMALL)
