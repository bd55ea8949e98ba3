"""The attention engine against a direct NumPy computation of eq. 1 of the paper."""

import numpy as np
import pytest
import torch

from sk_softmix.attention import (
    attention_covariance,
    attention_mean,
    combine_heads,
    linear_attention,
    softmax_attention,
    stacked_linear_attention,
    stacked_linear_maps,
)
from sk_softmix.attention._linear import one_layer_trace

N_QUERIES, PROMPT_LENGTH, N_FEATURES, N_HEADS, OUT_FEATURES = 9, 40, 3, 2, 4


def numpy_softmax_heads(queries, prompt, U, V, exclude=None):
    """The paper's eq. 1 term by term: sum_i softmax_i(z_i^T U z) V z_i, one query at a time."""
    out = np.zeros((U.shape[0], len(queries), V.shape[1]))
    for h in range(U.shape[0]):
        for a, z in enumerate(queries):
            scores = np.array([z_i @ U[h] @ z for z_i in prompt])
            if exclude is not None and exclude[a] >= 0:
                scores[exclude[a]] = -np.inf
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            out[h, a] = sum(w * V[h] @ z_i for w, z_i in zip(weights, prompt, strict=True))
    return out


def numpy_linear_heads(queries, prompt, U, V, exclude=None):
    """The paper's eq. 1 term by term: (1/L) sum_i (z_i^T U z) V z_i over the kept tokens."""
    out = np.zeros((U.shape[0], len(queries), V.shape[1]))
    for h in range(U.shape[0]):
        for a, z in enumerate(queries):
            kept = [i for i in range(len(prompt)) if exclude is None or i != exclude[a]]
            out[h, a] = sum((prompt[i] @ U[h] @ z) * V[h] @ prompt[i] for i in kept) / len(kept)
    return out


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    return {
        "queries": rng.normal(size=(N_QUERIES, N_FEATURES)),
        "prompt": rng.normal(size=(PROMPT_LENGTH, N_FEATURES)),
        "U": rng.normal(size=(N_HEADS, N_FEATURES, N_FEATURES)),
        "V": rng.normal(size=(N_HEADS, OUT_FEATURES, N_FEATURES)),
        "exclude": np.array([3, -1, 0, PROMPT_LENGTH - 1, -1, 5, 5, 7, -1]),
    }


def as_torch(problem, dtype=torch.float64):
    tensors = {k: torch.tensor(v) for k, v in problem.items()}
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in tensors.items()}


@pytest.mark.parametrize("method", ["matmul", "sdpa", "reference"])
@pytest.mark.parametrize("batch_size", [1, 4, None])
@pytest.mark.parametrize("leave_out", [False, True])
def test_softmax_heads_match_numpy(problem, method, batch_size, leave_out):
    exclude = problem["exclude"] if leave_out else None
    expected = numpy_softmax_heads(
        problem["queries"], problem["prompt"], problem["U"], problem["V"], exclude
    )
    t = as_torch(problem)
    out = softmax_attention(
        t["queries"],
        t["prompt"],
        t["U"],
        t["V"],
        exclude=t["exclude"] if leave_out else None,
        batch_size=batch_size,
        method=method,
    )
    # float64 throughout: only rounding separates the two computations
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("leave_out", [False, True])
def test_linear_heads_match_numpy(problem, leave_out):
    exclude = problem["exclude"] if leave_out else None
    expected = numpy_linear_heads(
        problem["queries"], problem["prompt"], problem["U"], problem["V"], exclude
    )
    t = as_torch(problem)
    out = linear_attention(
        t["queries"],
        t["prompt"],
        t["U"],
        t["V"],
        exclude=t["exclude"] if leave_out else None,
    )
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-12)


def numpy_linear_stack(queries, prompt, U, V, residual, exclude=None):
    """Every layer updates prompt tokens and the query explicitly, token by token."""
    out = np.zeros_like(queries)
    for a, z in enumerate(queries):
        tokens = np.array([t for i, t in enumerate(prompt) if exclude is None or i != exclude[a]])
        query = z
        for U_layer, V_layer in zip(U, V, strict=True):
            layer = numpy_linear_heads(np.vstack([tokens, query]), tokens, U_layer, V_layer).sum(
                axis=0
            )
            if residual:
                layer = layer + np.vstack([tokens, query])
            tokens, query = layer[:-1], layer[-1]
        out[a] = query
    return out


@pytest.mark.parametrize("n_layers", [1, 3])  # 1 with leave-out: the O(p^2) path
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("leave_out", [False, True])
def test_stacked_linear_layers_match_explicit_token_updates(problem, residual, leave_out, n_layers):
    rng = np.random.default_rng(1)
    U = rng.normal(size=(n_layers, N_HEADS, N_FEATURES, N_FEATURES)) / 3
    V = rng.normal(size=(n_layers, N_HEADS, N_FEATURES, N_FEATURES)) / 3
    exclude = problem["exclude"] if leave_out else None
    expected = numpy_linear_stack(problem["queries"], problem["prompt"], U, V, residual, exclude)
    out = stacked_linear_attention(
        torch.tensor(problem["queries"]),
        torch.tensor(problem["prompt"]),
        torch.tensor(U),
        torch.tensor(V),
        residual=residual,
        exclude=None if exclude is None else torch.tensor(exclude),
    )
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("residual", [False, True])
def test_one_layer_trace_matches_the_per_query_maps(problem, residual):
    """The closed-form divergence of a one-layer stack, against forming each map."""
    rng = np.random.default_rng(2)
    U, V = (torch.tensor(rng.normal(size=(1, N_HEADS, N_FEATURES, N_FEATURES))) for _ in range(2))
    prompt, exclude = torch.tensor(problem["prompt"]), torch.tensor(problem["exclude"])
    maps = stacked_linear_maps(prompt, U, V, residual=residual, exclude=exclude)
    expected = torch.diagonal(maps, dim1=-2, dim2=-1).sum(-1)
    trace = one_layer_trace(prompt, U, V, residual=residual, exclude=exclude)
    torch.testing.assert_close(trace, expected, rtol=1e-10, atol=1e-10)


def test_single_head_shapes_return_two_dimensional_output(problem):
    t = as_torch(problem)
    out = softmax_attention(t["queries"], t["prompt"], t["U"][0], t["V"][0])
    full = softmax_attention(t["queries"], t["prompt"], t["U"], t["V"])
    assert out.shape == (N_QUERIES, OUT_FEATURES)
    torch.testing.assert_close(out, full[0])


@pytest.mark.parametrize("method", ["matmul", "sdpa", "reference"])
@pytest.mark.parametrize("magnitude", [1e6, 1e20])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_huge_magnitudes_never_give_nan(problem, magnitude, dtype, method):
    # "sdpa" is CUDA's default: its fused kernel scores in the input dtype, so
    # float32 at 1e20 gave NaN until overflow-prone calls were rerouted
    t = as_torch(problem, dtype)
    out = softmax_attention(
        t["queries"] * magnitude,
        t["prompt"] * magnitude,
        t["U"],
        t["V"],
        exclude=t["exclude"],
        method=method,
    )
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    # The weights saturate on the best token: the output is V applied to one token.
    tokens = t["prompt"] * magnitude
    outputs = torch.einsum("hqp,lp->hlq", t["V"], tokens)  # every token's possible output
    distance = (out.unsqueeze(2) - outputs.unsqueeze(1)).abs().amax(-1).amin(-1)
    assert (distance <= 1e-3 * magnitude).all()


@pytest.mark.parametrize("method", ["matmul", "sdpa", "reference"])
def test_attention_mean_at_huge_magnitudes_is_finite(method):
    prompt = torch.tensor([[1e20, 0.0], [0.0, 1e20]])
    mean = attention_mean(prompt[None, :1], prompt, method=method)  # the query is token 0
    torch.testing.assert_close(mean, prompt[None, :1])


def test_dtype_and_device_follow_the_inputs(problem):
    t = as_torch(problem, torch.float32)
    for out in (
        softmax_attention(t["queries"], t["prompt"], t["U"], t["V"]),
        linear_attention(t["queries"], t["prompt"], t["U"], t["V"]),
    ):
        assert out.dtype == torch.float32
        assert out.device == t["queries"].device


def test_closed_form_gradient_matches_autograd(problem):
    t = as_torch(problem)
    U = t["U"].clone().requires_grad_(True)
    grads = {}
    for method in ("matmul", "reference"):
        out = softmax_attention(
            t["queries"], t["prompt"], U, t["V"], exclude=t["exclude"], method=method
        )
        (grads[method],) = torch.autograd.grad((out**2).sum(), U)
    torch.testing.assert_close(grads["matmul"], grads["reference"], rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda u: softmax_attention(t["queries"], t["prompt"], u, t["V"], exclude=t["exclude"]),
        (U,),
    )


def test_weighted_covariance_is_the_jacobian_of_the_mean(problem):
    t = as_torch(problem)
    transformed = torch.randn(1, 1, N_FEATURES, dtype=torch.float64)
    _, covariance = attention_covariance(transformed, t["prompt"])
    jacobian = torch.autograd.functional.jacobian(
        lambda q: attention_mean(q, t["prompt"], method="reference"), transformed
    ).reshape(N_FEATURES, N_FEATURES)
    torch.testing.assert_close(covariance[0, 0], jacobian, rtol=1e-10, atol=1e-12)


def test_bad_shapes_raise_clear_errors(problem):
    t = as_torch(problem)
    with pytest.raises(ValueError, match=r"U must have shape \(H, 3, 3\)"):
        softmax_attention(t["queries"], t["prompt"], t["U"][:, :2], t["V"])
    with pytest.raises(ValueError, match="queries and prompt must have shapes"):
        softmax_attention(t["queries"], t["prompt"][:, :2], t["U"], t["V"])
    with pytest.raises(ValueError, match="exclude must have shape"):
        softmax_attention(t["queries"], t["prompt"], t["U"], t["V"], exclude=t["exclude"][:3])
    with pytest.raises(ValueError, match="only token"):
        softmax_attention(t["queries"], t["prompt"][:1], t["U"], t["V"], exclude=t["exclude"] * 0)
    with pytest.raises(ValueError, match="method must be one of"):
        softmax_attention(t["queries"], t["prompt"], t["U"], t["V"], method="fast")


def test_residual_heads_with_the_in_context_output_map_are_one_head_plus_a_skip(problem):
    """Section 4: residual heads, U_2 = V_2 = 0, W_out = (I, -2c I) give (1 - 2c) z + T_1(z)."""
    t = as_torch(problem)
    p, c = N_FEATURES, 0.8
    U = torch.stack([t["U"][0], torch.zeros(p, p, dtype=torch.float64)])
    V = torch.stack([t["V"][0][:p], torch.zeros(p, p, dtype=torch.float64)])
    heads = softmax_attention(t["queries"], t["prompt"], U, V)
    identity = torch.eye(p, dtype=torch.float64)
    output_map = torch.cat([identity, -2 * c * identity], dim=1)  # (p, 2p)
    combined = combine_heads(heads, t["queries"], residual=True, output_map=output_map)
    expected = (1 - 2 * c) * t["queries"] + heads[0]
    torch.testing.assert_close(combined, expected, rtol=1e-12, atol=1e-12)
    summed = combine_heads(heads, t["queries"], skip=identity * 3)
    torch.testing.assert_close(summed, heads.sum(0) + 3 * t["queries"])


@pytest.mark.parametrize("exclude", [None, torch.tensor([0, -1, 1])])
@pytest.mark.parametrize("shape", [(1, 1, 2, 3), (2, 2, 2), (1, 1, 3, 3)])
def test_stacked_layers_of_the_wrong_shape_are_a_clear_error(shape, exclude):
    # one layer with leave-out takes a faster path: it must validate the same way
    U = torch.zeros(shape)
    with pytest.raises(ValueError, match=r"U and V must both have shape \(n_layers, H, 2, 2\)"):
        stacked_linear_attention(torch.zeros(3, 2), torch.ones(4, 2), U, U, exclude=exclude)
