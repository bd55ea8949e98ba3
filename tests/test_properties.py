"""Symmetries and invariances of the attention engine and estimators (hypothesis).

Each property holds exactly in exact arithmetic; the tolerances below are for
floating point and are stated (and justified) where they are used. Examples
are drawn deterministically (``derandomize=True``) and kept few and small so
the file runs in seconds on two CPU cores.
"""

import numpy as np
import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sk_softmix import (  # noqa: E402
    BayesDenoiser,
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.attention import linear_attention, softmax_attention  # noqa: E402
from sk_softmix.datasets import make_gaussian_mixture, make_lda  # noqa: E402

PROPERTY_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None)

# A problem is drawn as a seed and shapes; the arrays come from NumPy, which
# keeps hypothesis' search small and every example well scaled.
problems = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**32 - 1),
        "n_queries": st.integers(1, 12),
        "prompt_length": st.integers(2, 30),
        "n_features": st.integers(1, 5),
        "n_heads": st.integers(1, 3),
        "out_features": st.integers(1, 4),
    }
)
heads = st.sampled_from([softmax_attention, linear_attention])


def draw_problem(problem, dtype=torch.float64):
    """Queries, prompt, U, V and an ``exclude`` vector for one drawn problem.

    ``U`` is scaled by ``1 / n_features`` so that scores ``z_i^T U z`` are of
    order one for standard normal tokens: the well-scaled regime.
    """
    rng = np.random.default_rng(problem["seed"])
    n, L, p = problem["n_queries"], problem["prompt_length"], problem["n_features"]
    H, q = problem["n_heads"], problem["out_features"]
    queries = rng.standard_normal((n, p))
    prompt = rng.standard_normal((L, p))
    U = rng.standard_normal((H, p, p)) / p
    V = rng.standard_normal((H, q, p))
    exclude = rng.integers(-1, L, size=n)  # -1: this query leaves nothing out
    tensors = [torch.as_tensor(a, dtype=dtype) for a in (queries, prompt, U, V)]
    return (*tensors, torch.as_tensor(exclude, dtype=torch.int64))


def random_rotation(rng, p):
    """A Haar-distributed orthogonal matrix (QR with the sign fix)."""
    Q, R = np.linalg.qr(rng.standard_normal((p, p)))
    return Q * np.sign(np.diag(R))


# -- (a) permutation invariance ------------------------------------------------


@PROPERTY_SETTINGS
@given(problem=problems, head=heads, use_exclude=st.booleans())
def test_attention_invariant_to_prompt_permutation(problem, head, use_exclude):
    """Reordering the prompt's tokens (keys and values together) changes nothing.

    A left-out token stays left out: its index follows the permutation. Only
    the summation order changes, so float64 results agree to 1e-12 relative.
    """
    queries, prompt, U, V, exclude = draw_problem(problem)
    perm = torch.as_tensor(np.random.default_rng(problem["seed"] + 1).permutation(len(prompt)))
    inverse = torch.argsort(perm)  # original token j sits at position inverse[j]
    permuted_exclude = torch.where(exclude >= 0, inverse[exclude.clamp(min=0)], -1)
    if use_exclude:
        expected = head(queries, prompt, U, V, exclude=exclude)
        got = head(queries, prompt[perm], U, V, exclude=permuted_exclude)
    else:
        expected = head(queries, prompt, U, V)
        got = head(queries, prompt[perm], U, V)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


# -- (b) chunk size ----------------------------------------------------------


@PROPERTY_SETTINGS
@given(problem=problems, batch_size=st.integers(1, 13), use_exclude=st.booleans())
def test_softmax_attention_independent_of_batch_size(problem, batch_size, use_exclude):
    """Chunking the queries is bookkeeping: every chunk size gives the same output.

    Each query's row is computed by the same operations whatever the chunk,
    so the only freedom is BLAS blocking; 1e-12 relative in float64.
    """
    queries, prompt, U, V, exclude = draw_problem(problem)
    exclude = exclude if use_exclude else None
    whole = softmax_attention(queries, prompt, U, V, exclude=exclude)
    chunked = softmax_attention(queries, prompt, U, V, exclude=exclude, batch_size=batch_size)
    reference = softmax_attention(queries, prompt, U, V, exclude=exclude, method="reference")
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(reference, whole, rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def fitted_softmax_denoiser():
    means = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    Z, X, _ = make_gaussian_mixture(80, means, noise_variance=1.0, random_state=0)
    denoiser = SoftmaxAttentionDenoiser(
        max_iter=2, batch_size=16, noise_variance=1.0, device="cpu", random_state=0
    )
    return denoiser.fit(Z, X), Z


@settings(PROPERTY_SETTINGS, max_examples=10)
@given(batch_size=st.integers(1, 100))
def test_softmax_denoiser_transform_independent_of_batch_size(fitted_softmax_denoiser, batch_size):
    """``transform`` gives the same output whatever its chunk size (float64 data)."""
    denoiser, Z = fitted_softmax_denoiser
    expected = denoiser.transform(Z)
    original = denoiser.transform_batch_size
    try:
        denoiser.set_params(transform_batch_size=batch_size)
        got = denoiser.transform(Z)
    finally:
        denoiser.set_params(transform_batch_size=original)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# -- (c) float32 against float64 -----------------------------------------------


@PROPERTY_SETTINGS
@given(problem=problems, head=heads)
def test_float32_agrees_with_float64(problem, head):
    """float32 in gives float32 out, within 1e-4 of the float64 result.

    Tolerance: every output is ``V`` applied to a weighted average of tokens
    (convex weights for softmax, scores of order one for linear), so its size
    is bounded by ``scale = max|V| * max|z_i| * p`` (times ``max|z|`` for the
    linear head). Float32 rounds each score with relative error ~6e-8 times a
    few ``p``-term sums; with scores of order one (``U`` scaled by ``1/p``) the
    weights' relative error stays ~1e-6, so ``1e-4 * scale`` leaves a margin
    of about 100.
    """
    tensors64 = draw_problem(problem, dtype=torch.float64)
    queries, prompt, U, V, exclude = tensors64
    out64 = head(queries, prompt, U, V, exclude=exclude)
    out32 = head(*(t.float() for t in tensors64[:4]), exclude=exclude)
    assert out32.dtype == torch.float32
    scale = V.abs().max() * prompt.abs().max() * problem["n_features"]
    if head is linear_attention:
        scale = scale * prompt.abs().max() * queries.abs().max() * problem["n_features"]
    torch.testing.assert_close(out32.double(), out64, rtol=1e-4, atol=1e-4 * float(scale))


# -- (d) rotation equivariance -----------------------------------------------


@PROPERTY_SETTINGS
@given(
    problem=problems,
    head=heads,
    a=st.floats(-2.0, 2.0),
    b=st.floats(-2.0, 2.0),
)
def test_isotropic_attention_commutes_with_rotation(problem, head, a, b):
    """With ``U = a I`` and ``V = b I``: ``f(R z; R P) = R f(z; P)`` for orthogonal R.

    Scores ``(R z_i)^T a (R z) = a z_i^T z`` are unchanged and the value
    ``b R z_i`` is rotated; 1e-10 absolute on outputs of order one (float64).
    """
    queries, prompt, _, _, exclude = draw_problem(problem)
    p = problem["n_features"]
    R = torch.as_tensor(random_rotation(np.random.default_rng(problem["seed"] + 2), p))
    U = a * torch.eye(p, dtype=torch.float64)
    V = b * torch.eye(p, dtype=torch.float64)
    expected = head(queries, prompt, U, V, exclude=exclude) @ R.T
    got = head(queries @ R.T, prompt @ R.T, U, V, exclude=exclude)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


@PROPERTY_SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n_features=st.integers(1, 5),
    n_components=st.integers(1, 4),
    covariance=st.floats(0.0, 3.0),
    noise_variance=st.floats(0.1, 4.0),
)
def test_bayes_denoiser_commutes_with_rotation(
    seed, n_features, n_components, covariance, noise_variance
):
    """Rotating the means, the data and the queries rotates the posterior mean.

    With an isotropic ``Gamma = gamma^2 I`` the mixture's law is rotated by
    ``R`` exactly, so ``E[X | R z]`` under the rotated mixture is
    ``R E[X | z]``; 1e-9 absolute on outputs of order the means (float64).
    """
    rng = np.random.default_rng(seed)
    means = 2.0 * rng.standard_normal((n_components, n_features))
    weights = rng.dirichlet(np.ones(n_components))
    Z = 2.0 * rng.standard_normal((20, n_features))
    R = random_rotation(rng, n_features)
    params = dict(weights=weights, covariance=covariance, noise_variance=noise_variance)
    expected = BayesDenoiser(means, **params).fit(Z).transform(Z) @ R.T
    got = BayesDenoiser(means @ R.T, **params).fit(Z @ R.T).transform(Z @ R.T)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


# -- (e) reproducibility ------------------------------------------------------


def _denoising_data():
    means = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    X, Z, _ = make_gaussian_mixture(60, means, noise_variance=1.0, random_state=0)
    return Z, X


def _classification_data():
    return make_lda(60, np.array([[1.0, 0.0], [-1.0, 0.0]]), random_state=0)


ATTENTION_ESTIMATORS = [
    (
        lambda **kw: SoftmaxAttentionDenoiser(
            max_iter=5, batch_size=16, noise_variance=1.0, device="cpu", **kw
        ),
        _denoising_data,
        "transform",
        "U_",
    ),
    (
        lambda **kw: LinearAttentionDenoiser(
            max_iter=5, batch_size=16, noise_variance=1.0, device="cpu", **kw
        ),
        _denoising_data,
        "transform",
        "U_",
    ),
    (
        lambda **kw: SoftmaxAttentionClassifier(max_iter=5, batch_size=16, device="cpu", **kw),
        _classification_data,
        "decision_function",
        "U11_",
    ),
]
ESTIMATOR_IDS = ["softmax_denoiser", "linear_denoiser", "classifier"]


def _fitted_attributes(estimator):
    return {k: v for k, v in vars(estimator).items() if k.endswith("_") and not k.startswith("_")}


def _assert_bitwise_equal(first, second, name):
    if isinstance(first, dict):
        assert first.keys() == second.keys(), name
        for key in first:
            _assert_bitwise_equal(first[key], second[key], f"{name}[{key!r}]")
    elif isinstance(first, list | tuple):
        assert len(first) == len(second), name
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            _assert_bitwise_equal(a, b, f"{name}[{i}]")
    elif isinstance(first, np.ndarray):
        assert first.dtype == second.dtype, name
        assert np.array_equal(first, second), name
    else:
        assert first == second, name


@pytest.mark.parametrize(("make", "data", "method", "_"), ATTENTION_ESTIMATORS, ids=ESTIMATOR_IDS)
def test_fit_is_bitwise_reproducible(make, data, method, _):
    """Two fits with one ``random_state`` give bitwise-identical state and outputs."""
    X, y = data()
    first = make(init="random", random_state=3).fit(X, y)
    second = make(init="random", random_state=3).fit(X, y)
    attributes = _fitted_attributes(first)
    assert "history_" in attributes
    assert attributes.keys() == _fitted_attributes(second).keys()
    for name, value in attributes.items():
        _assert_bitwise_equal(value, getattr(second, name), name)
    assert np.array_equal(getattr(first, method)(X), getattr(second, method)(X))


@pytest.mark.parametrize(("make", "data", "_", "param"), ATTENTION_ESTIMATORS, ids=ESTIMATOR_IDS)
def test_different_seeds_give_different_initialisations(make, data, _, param):
    """``init="random"`` with two seeds starts from different parameters."""
    X, y = data()
    first = make(init="random", random_state=0).set_params(max_iter=0).fit(X, y)
    second = make(init="random", random_state=1).set_params(max_iter=0).fit(X, y)
    assert not np.array_equal(getattr(first, param), getattr(second, param))
