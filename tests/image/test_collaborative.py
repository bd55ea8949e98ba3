"""Collaborative filtering of groups of similar blocks (BM3D's two stages).

The fast stage (bands, box-summed distances, one gather per band) against
a loop over every reference, its window and its group, for both rules; the
transforms' orthonormality; closed forms (the identity without a threshold
or with a strong guide, a constant image exactly); the group's size where
the window is small.
"""

import warnings

import numpy as np
import pytest
import torch

from sk_softmix.image._collaborative import (
    _sliding_sums,
    bior15_matrix,
    collaborative_stage,
    dct_matrix,
    haar_matrix,
)
from sk_softmix.image._wiener_head import reference_positions


def _reference_stage(noisy, guide, rule, b, d, n, step, threshold, variance=1.0, basis="dct"):
    """The stage written out: distances over the guide's window, the nearest
    blocks (the reference first), the 3-D transform, the shrinkage, and each
    block's estimate onto its pixels."""
    height, width = noisy.shape
    rows, cols = height - b + 1, width - b + 1
    total, weight = np.zeros_like(noisy), np.zeros_like(noisy)
    one_axis = (dct_matrix if basis == "dct" else bior15_matrix)(b, torch.float64).numpy()
    block_transform = np.kron(one_axis, one_axis)
    inverse = np.linalg.inv(block_transform)
    coefficient_std = np.linalg.norm(block_transform, axis=1)
    across = haar_matrix(n, torch.float64).numpy()

    def block(y, x, image=noisy):
        return image[y : y + b, x : x + b].ravel()

    for ry in reference_positions(rows, step, "cpu").tolist():
        for rx in reference_positions(cols, step, "cpu").tolist():
            window = [
                (y, x)
                for y in range(ry - d, ry + d + 1)
                for x in range(rx - d, rx + d + 1)
                if 0 <= y < rows and 0 <= x < cols
            ]
            distances = [
                -1.0
                if (y, x) == (ry, rx)
                else np.mean((block(y, x, guide) - block(ry, rx, guide)) ** 2)
                for y, x in window
            ]
            chosen = [window[i] for i in np.argsort(distances, kind="stable")[:n]]
            group = np.array([block(y, x) for y, x in chosen])
            coefficients = across @ group @ block_transform.T
            if rule == "threshold":
                shrink = (np.abs(coefficients) > threshold * coefficient_std).astype(float)
            else:
                guide_group = np.array([block(y, x, guide) for y, x in chosen])
                energy = (across @ guide_group @ block_transform.T) ** 2
                shrink = energy / (energy + variance)
            estimate = across.T @ (shrink * coefficients) @ inverse.T
            w = 1.0 / max((shrink**2).sum(), 1.0)
            for (y, x), patch in zip(chosen, estimate, strict=True):
                total[y : y + b, x : x + b] += w * patch.reshape(b, b)
                weight[y : y + b, x : x + b] += w
    return total / weight


@pytest.mark.parametrize("size", [1, 2, 8, 16])
def test_transforms_are_orthonormal(size):
    for matrix in (haar_matrix(size, torch.float64), dct_matrix(size, torch.float64)):
        np.testing.assert_allclose(matrix @ matrix.T, np.eye(size), atol=1e-12)
    # the Haar transform's first row is the group's mean (scaled)
    np.testing.assert_allclose(haar_matrix(size, torch.float64)[0], np.full(size, size**-0.5))


@pytest.mark.parametrize("size", [2, 4, 8, 16])
def test_bior15_is_pywavelets_periodised_transform(size):
    pywt = pytest.importorskip("pywt")
    with warnings.catch_warnings():  # "all coefficients will experience boundary effects"
        warnings.simplefilter("ignore", UserWarning)
        expected = np.stack(
            [
                np.concatenate(
                    pywt.wavedec(unit, "bior1.5", mode="periodization", level=int(np.log2(size)))
                )
                for unit in np.eye(size)
            ],
            axis=1,
        )
    matrix = bior15_matrix(size, torch.float64).numpy()
    np.testing.assert_allclose(matrix, expected, rtol=0, atol=1e-12)
    # the coarsest approximation is the scaled mean, the finest details Haar's
    np.testing.assert_allclose(matrix[0], np.full(size, size**-0.5))
    finest = matrix[size // 2 :]
    np.testing.assert_allclose(np.abs(finest).sum(axis=1), np.sqrt(2))
    assert np.all(finest.sum(axis=1) == 0)


def test_haar_needs_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        haar_matrix(12)
    with pytest.raises(ValueError, match="power of two"):
        bior15_matrix(6)


@pytest.mark.parametrize("b", [1, 3, 4, 7, 8])
@pytest.mark.parametrize("dim", [0, 1])
def test_sliding_sums_are_the_sums_of_b_consecutive_entries(b, dim):
    values = torch.as_tensor(np.random.default_rng(b).standard_normal((11, 13)))
    expected = np.stack(
        [
            values.numpy().take(range(s, s + b), axis=dim).sum(axis=dim)
            for s in range(values.shape[dim] - b + 1)
        ],
        axis=dim,
    )
    np.testing.assert_allclose(_sliding_sums(values, b, dim).numpy(), expected, atol=1e-12)


@pytest.mark.parametrize(
    "rule, basis", [("threshold", "dct"), ("threshold", "bior1.5"), ("wiener", "dct")]
)
@pytest.mark.parametrize("b, step", [(4, 2), (8, 3)])
def test_fast_stage_equals_the_loop(rule, basis, b, step):
    # a window of 7 x 7 holds at least 16 blocks even in a corner, so every
    # group has the full 16 blocks and the loop needs no fallback; random
    # images have no tied distances
    rng = np.random.default_rng(0)
    noisy = 2.0 * rng.standard_normal((23, 26))
    guide = noisy if rule == "threshold" else noisy + rng.standard_normal(noisy.shape)
    settings = {"search_distance": 3, "group_size": 16, "step": step, "threshold": 2.7}
    fast = collaborative_stage(
        torch.as_tensor(noisy),
        torch.as_tensor(guide),
        rule=rule,
        block_size=b,
        block_basis=basis,
        **settings,
    )
    slow = _reference_stage(noisy, guide, rule, b, 3, 16, step, 2.7, basis=basis)
    np.testing.assert_allclose(fast.numpy(), slow, rtol=0, atol=1e-10)


def test_each_wiener_variance_is_its_own_stage():
    # a sequence of variances gives, from the same groups, the estimate of
    # each variance alone: the loop's, whose shrinkage is G^2 / (G^2 + v)
    rng = np.random.default_rng(3)
    noisy = 2.0 * rng.standard_normal((21, 24))
    guide = noisy + rng.standard_normal(noisy.shape)
    settings = {"rule": "wiener", "block_size": 4, "search_distance": 3, "group_size": 16}
    variances = [1.0, 0.3]
    both = collaborative_stage(
        torch.as_tensor(noisy), torch.as_tensor(guide), wiener_variance=variances, **settings
    )
    assert both.shape == (2, 21, 24)
    both = both.numpy()
    for estimate, variance in zip(both, variances, strict=True):
        slow = _reference_stage(noisy, guide, "wiener", 4, 3, 16, 3, 2.7, variance)
        np.testing.assert_allclose(estimate, slow, rtol=0, atol=1e-10)
    # a smaller variance shrinks less: closer to the noisy image
    assert np.linalg.norm(both[1] - noisy) < np.linalg.norm(both[0] - noisy)


@pytest.mark.parametrize("basis", ["dct", "bior1.5"])
def test_no_threshold_is_the_identity(basis):
    # every coefficient kept: each group returned as it is, each pixel the
    # weighted average of copies of itself
    noisy = torch.as_tensor(np.random.default_rng(1).standard_normal((30, 27)))
    out = collaborative_stage(noisy, threshold=0.0, block_basis=basis)
    np.testing.assert_allclose(out.numpy(), noisy.numpy(), rtol=0, atol=1e-12)


def test_wiener_rule_tends_to_the_identity_on_a_strong_guide():
    # shrinkage G^2 / (G^2 + 1) -> 1 as the guide's coefficients grow
    noisy = torch.as_tensor(np.random.default_rng(1).standard_normal((30, 27)))
    out = collaborative_stage(noisy, 1e6 * noisy, rule="wiener")
    np.testing.assert_allclose(out.numpy(), noisy.numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("basis", ["dct", "bior1.5"])
@pytest.mark.parametrize("value", [0.0, 5.0])
def test_constant_image_is_returned_exactly(value, basis):
    # only the group's mean of the block's mean is non-zero; kept when it
    # clears the threshold (5 * 8 * 4 > 2.7), zero when the image is
    image = torch.full((25, 31), value, dtype=torch.float64)
    out = collaborative_stage(image, block_basis=basis)
    np.testing.assert_allclose(out.numpy(), value, rtol=0, atol=1e-12)


def test_small_windows_get_smaller_groups():
    # a 9 x 9 image holds 2 x 2 blocks of 8 x 8: groups of 4, still exact
    # without a threshold and finite with one
    noisy = torch.as_tensor(np.random.default_rng(2).standard_normal((9, 9)))
    np.testing.assert_allclose(collaborative_stage(noisy, threshold=0.0).numpy(), noisy.numpy())
    assert torch.isfinite(collaborative_stage(noisy)).all()


def test_denoises_blocks_beyond_the_noise():
    rng = np.random.default_rng(3)
    clean = np.kron(rng.integers(0, 4, size=(8, 8)), np.ones((8, 8))) * 3.0  # noise units
    noisy = clean + rng.standard_normal(clean.shape)
    out = collaborative_stage(torch.as_tensor(noisy, dtype=torch.float32)).double().numpy()
    # measured 4.2 times below the noise's error here (blocks of 8 x 8 on
    # edges every 8 pixels); a threshold that removed nothing would give 1
    assert np.mean((out - clean) ** 2) < np.mean((noisy - clean) ** 2) / 3
