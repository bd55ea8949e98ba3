"""The fused kernel path of the engine: torch's flash kernel plus leave-one-out
by subtraction, moments in one pass, and the rule that picks it.

Every result is compared with the plain formula (the ``"reference"`` kernel
or a float64 softmax written out here), whose error is a few ulps; the
tolerances are a few hundred ulps of the dtype, far below any mistake in the
algebra (a wrong own-token correction moves outputs by the token's weight,
0.01-1).
"""

import numpy as np
import pytest
import torch

from sk_softmix import SoftmaxAttentionDenoiser
from sk_softmix.attention import (
    _fused,
    _kernels,
    _softmax,
    attention_covariance,
    attention_mean,
    softmax_attention,
)
from sk_softmix.attention._fused import _fastest_width, fused_average
from sk_softmix.attention._threads import FUSED_SCORES_PER_THREAD, threads_for_fused_call

TOLERANCE = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def _training_problem(
    n_features, scale, dtype, n_heads=2, length=300, n_queries=200, seed=0, on_sphere=False
):
    """Queries that are prompt tokens, each leaving itself out (every third: nothing).

    ``scale`` sharpens the weights. On a sphere a token's largest score is its
    own (``z . z >= z_i . z`` for equal norms), so at a large scale nearly
    every query puts nearly all its weight on itself.
    """
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randn(length, n_features, generator=generator, dtype=dtype)
    if on_sphere:
        prompt /= prompt.norm(dim=-1, keepdim=True)
    rows = torch.randperm(length, generator=generator)[:n_queries]
    exclude = rows.clone()
    exclude[::3] = -1
    U = scale * torch.eye(n_features, dtype=dtype).expand(n_heads, -1, -1).clone()
    U += 0.1 * torch.randn(n_heads, n_features, n_features, generator=generator, dtype=dtype)
    return prompt[rows].clone(), prompt, exclude, U


def _reference_moments(transformed, prompt, exclude):
    """Mean and covariance of the prompt under the leave-one-out softmax, in float64."""
    scores = transformed.double() @ prompt.double().T
    rows = torch.arange(scores.shape[1])
    kept = exclude >= 0
    scores[:, rows[kept], exclude[kept]] = -torch.inf
    weights = torch.softmax(scores, dim=-1)
    mean = weights @ prompt.double()
    centred = prompt.double().unsqueeze(0).unsqueeze(0) - mean.unsqueeze(2)  # (H, n, L, p)
    covariance = torch.einsum("hnl,hnli,hnlj->hnij", weights, centred, centred)
    return mean, covariance


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_features", [2, 5, 12])
@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_leave_one_out_by_subtraction_equals_the_masked_softmax(dtype, n_features, scale):
    queries, prompt, exclude, U = _training_problem(n_features, scale, dtype)
    transformed = queries @ U.mT
    fused = attention_mean(transformed, prompt, exclude, method="sdpa")
    expected, _ = _reference_moments(transformed, prompt, exclude)
    torch.testing.assert_close(fused, expected.to(dtype), **TOLERANCE[dtype])


@pytest.mark.parametrize("n_features", [2, 3, 5])
def test_narrow_float32_inputs_padded_to_the_fast_width_keep_their_moments(n_features):
    # enough queries for the CPU kernel to run on 16 zero-padded columns: the
    # mean (width p) and the moments (width p + p^2: 6, 12, 30) must not move
    queries, prompt, exclude, U = _training_problem(
        n_features, 3.0, torch.float32, length=600, n_queries=400
    )
    cpu = torch.device("cpu")
    assert _fastest_width(n_features, cpu, torch.float32, 2 * 400) == 16
    assert _fastest_width(n_features, cpu, torch.float64, 2 * 400) == n_features
    assert _fastest_width(n_features, cpu, torch.float32, 100) == n_features
    # the padded prompt copy stays within one matmul chunk (2**24 floats)
    assert _fastest_width(n_features, cpu, torch.float32, 800, 2**20) == 16
    assert _fastest_width(n_features, cpu, torch.float32, 800, 2**20 + 1) == n_features
    transformed = queries @ U.mT
    expected_mean, expected_covariance = _reference_moments(transformed, prompt, exclude)
    for left_out in (exclude, None):
        if left_out is None:
            expected_mean, expected_covariance = _reference_moments(
                transformed, prompt, torch.full_like(exclude, -1)
            )
        mean = attention_mean(transformed, prompt, left_out, method="sdpa")
        torch.testing.assert_close(mean, expected_mean.float(), **TOLERANCE[torch.float32])
        _, covariance = attention_covariance(transformed, prompt, left_out)
        # second moments up to 6 in float32 (ulp 5e-7), formed as E[zz^T] -
        # mean mean^T: measured errors 1e-5 to 9e-5 with and without padding
        torch.testing.assert_close(covariance, expected_covariance.float(), rtol=1e-4, atol=2e-4)


def test_padded_queries_in_chunks_give_the_one_call_result(monkeypatch):
    # padded queries go to the kernel in chunks (bounded memory); the chunks
    # must line up with the queries, leave-one-out flags included
    queries, prompt, exclude, U = _training_problem(
        2, 3.0, torch.float32, length=600, n_queries=400
    )
    transformed = queries @ U.mT
    whole, whole_unstable = fused_average(transformed, prompt, exclude=exclude)
    monkeypatch.setattr(_fused, "_PADDED_QUERIES_PER_CALL", 70)
    chunked, chunked_unstable = fused_average(transformed, prompt, exclude=exclude)
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-6)
    torch.testing.assert_close(chunked_unstable, whole_unstable)
    # and no query at all is an empty result, not a call (the kernel dies on it)
    empty, flags = fused_average(transformed[:, :0], prompt, exclude=exclude[:0])
    assert empty.shape == (2, 0, 2) and flags.shape == (0,)


def test_queries_dominated_by_their_own_token_are_recomputed():
    # on a sphere at scale 300 the subtraction would divide by 1 - a_j ~ 1e-100: those
    # rows must be flagged and redone, the others kept
    queries, prompt, exclude, U = _training_problem(3, 300.0, torch.float64, on_sphere=True)
    transformed = queries @ U.mT
    _, unstable = fused_average(transformed, prompt, exclude=exclude)
    left_out = exclude >= 0
    assert unstable[left_out].float().mean() > 0.5
    assert not unstable[~left_out].any()
    expected, _ = _reference_moments(transformed, prompt, exclude)
    fused = attention_mean(transformed, prompt, exclude, method="sdpa")
    torch.testing.assert_close(fused, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "dtype, scale",
    # float32 scores of some 600 at scale 30 carry errors of 6e-5 in every
    # kernel, the reference's included: float64 only there
    [(torch.float32, 0.3), (torch.float32, 3.0), (torch.float64, 0.3), (torch.float64, 30.0)],
)
def test_covariance_from_one_fused_pass_equals_the_formula(dtype, scale):
    # away from the origin, where moments about zero would cancel
    queries, prompt, exclude, U = _training_problem(4, scale, dtype)
    prompt, queries = prompt + 5.0, queries + 5.0
    transformed = queries @ U.mT / 5.0
    mean, covariance = attention_covariance(transformed, prompt, exclude)
    expected_mean, expected_covariance = _reference_moments(transformed, prompt, exclude)
    torch.testing.assert_close(mean, expected_mean.to(dtype), **TOLERANCE[dtype])
    torch.testing.assert_close(covariance, expected_covariance.to(dtype), **TOLERANCE[dtype])


@pytest.mark.parametrize("n_features", [3, 12])
def test_gradients_through_the_fused_kernel_equal_the_reference(n_features, monkeypatch):
    # p = 3: the closed-form backward over fused moments; p = 12: torch's
    # fused backward plus the log-sum-exp of the subtracted own token (CUDA's
    # path for many features; the CPU's rule picks the matmul kernel there)
    monkeypatch.setattr(_softmax, "_kernel_name", lambda method, *args: method)
    queries, prompt, exclude, U = _training_problem(n_features, 2.0, torch.float64)
    V = torch.randn(2, n_features, n_features, dtype=torch.float64)
    gradients = {}
    for method in ("sdpa", "reference"):
        U_grad = U.clone().requires_grad_()
        out = softmax_attention(queries, prompt, U_grad, V, exclude=exclude, method=method)
        (out**2).sum().backward()
        gradients[method] = U_grad.grad
    torch.testing.assert_close(gradients["sdpa"], gradients["reference"], rtol=1e-9, atol=1e-9)


def test_covariance_gradients_for_stein_training_equal_the_reference():
    # training by SURE differentiates the covariance itself
    queries, prompt, exclude, U = _training_problem(2, 2.0, torch.float64)
    gradients = []
    for fused in (True, False):
        U_grad = U.clone().requires_grad_()
        mean, covariance = _kernels._moments(queries @ U_grad.mT, prompt, exclude, fused=fused)
        (mean.sum() + covariance.diagonal(dim1=-2, dim2=-1).sum()).backward()
        gradients.append(U_grad.grad)
    torch.testing.assert_close(*gradients, rtol=1e-9, atol=1e-9)


def test_the_kernel_rule():
    queries, prompt, exclude, U = _training_problem(3, 1.0, torch.float32)
    transformed = queries @ U.mT
    assert _kernels._kernel_name("auto", transformed, prompt, exclude) == "sdpa"
    assert _kernels._kernel_name("matmul", transformed, prompt, None) == "matmul"
    # scores that would overflow float32 go to the kernel that scores in float64
    assert _kernels._kernel_name("sdpa", transformed * 1e20, prompt * 1e20, None) == "matmul"
    # the fused kernel's gradient is with respect to the queries only
    assert _kernels._kernel_name("auto", transformed, prompt.requires_grad_(), None) == "matmul"
    # with gradients and many features, small calls keep the stored weights
    wide = torch.randn(1, 8, 12)
    assert (
        _kernels._kernel_name("auto", wide.requires_grad_(), torch.randn(50, 12), None) == "matmul"
    )


def test_fused_calls_ignore_batch_size():
    queries, prompt, exclude, U = _training_problem(3, 3.0, torch.float64)
    whole = softmax_attention(queries, prompt, U, U, exclude=exclude)
    chunked = softmax_attention(queries, prompt, U, U, exclude=exclude, batch_size=7)
    matmul = softmax_attention(
        queries, prompt, U, U, exclude=exclude, batch_size=7, method="matmul"
    )
    torch.testing.assert_close(whole, chunked, rtol=0, atol=0)
    torch.testing.assert_close(whole, matmul, rtol=1e-10, atol=1e-10)


def test_fused_threads_follow_the_number_of_scores():
    available = torch.get_num_threads()
    cpu = torch.device("cpu")
    with threads_for_fused_call(cpu, FUSED_SCORES_PER_THREAD - 1):
        assert torch.get_num_threads() == 1
    with threads_for_fused_call(cpu, 100 * FUSED_SCORES_PER_THREAD):
        assert torch.get_num_threads() == available  # never above torch's own count
    assert torch.get_num_threads() == available


def test_fit_transform_leave_one_out_matches_the_reference_kernel(monkeypatch):
    # the estimator's leave-one-out denoising through the fused kernel, against
    # the same fitted model on the reference kernel
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-3, 1, (150, 2)), rng.normal(3, 1, (150, 2))])
    denoiser = SoftmaxAttentionDenoiser(noise_variance=1.0, max_iter=0).fit(X)
    fused = denoiser._denoise(X, exclude=np.arange(len(X)))
    monkeypatch.setattr(_softmax, "_kernel_name", lambda *args: "reference")
    reference = denoiser._denoise(X, exclude=np.arange(len(X)))
    np.testing.assert_allclose(fused, reference, rtol=1e-10, atol=1e-10)


def test_overflow_guard_holds_under_no_grad_for_tensors_that_require_grad():
    # only a training step skips the overflow check; a tensor that requires
    # grad, evaluated under no_grad, is not one
    prompt = torch.tensor([[1e20, 0.0], [0.0, 1e20]])
    query = prompt[None, :1].clone().requires_grad_()
    with torch.no_grad():
        mean = attention_mean(query, prompt)
    torch.testing.assert_close(mean, prompt[None, :1])
