"""Every training query leaves its own token out of the prompt it attends to.

A query that sees its own noisy copy can copy it: a denoiser trained that way
learns the identity, a classifier learns to read the query's own label. These
tests watch the engine's inputs during ``fit`` and ``fit_transform`` and
check, query by query, that the token equal to the query is the one excluded,
and that a query outside the prompt excludes nothing.
"""

import numpy as np
import pytest
import torch

from sk_softmix import (
    LinearAttentionDenoiser,
    SoftmaxAttentionClassifier,
    SoftmaxAttentionDenoiser,
)
from sk_softmix.classification import _kernel_head as kernel_head
from sk_softmix.classification import _objective as classifier_objective
from sk_softmix.denoising import _kernel_head as denoising_kernel_head
from sk_softmix.training._units import rms_scale


def _check_own_token_excluded(queries, keys, exclude):
    """``exclude[j]`` is the row of ``keys`` equal to ``queries[j]``, -1 if none."""
    same = (queries[:, None, :] == keys[None, :, :]).all(dim=-1)  # (n, L)
    # continuous data: a query equals at most one token (its own copy)
    assert same.sum(dim=1).max() <= 1
    own = torch.where(same.any(dim=1), same.int().argmax(dim=1), -1)
    if exclude is None:
        assert not same.any(), "queries in the prompt attended to their own token"
        return 0
    np.testing.assert_array_equal(exclude.cpu().numpy(), own.cpu().numpy())
    return int((own >= 0).sum())


def _watch(monkeypatch, owner, name, check):
    """Run ``check(*args)`` on every call of ``owner.name`` before the call itself."""
    original = getattr(owner, name)

    def watched(*args, **kwargs):
        check(*args, **kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)


def _data(n=240, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) + np.where(rng.random(n) < 0.5, 2.0, -2.0)[:, None]
    return X, X + rng.normal(size=(n, p))


@pytest.mark.parametrize("kind", [SoftmaxAttentionDenoiser, LinearAttentionDenoiser])
@pytest.mark.parametrize("supervised", [True, False])
def test_denoiser_training_queries_leave_their_own_token_out(kind, supervised, monkeypatch):
    clean, noisy = _data()
    excluded = []

    def check(self, parameters, queries, prompt, exclude):
        excluded.append(_check_own_token_excluded(queries, prompt, exclude))

    _watch(monkeypatch, kind, "_forward", check)
    _watch(monkeypatch, kind, "_forward_and_divergence", check)
    # the paper's heads, trained (the default's kernel heads are watched below)
    head = {"head": "bilinear"} if kind is SoftmaxAttentionDenoiser else {}
    denoiser = kind(
        max_iter=3,
        noise_variance=1.0,
        prompt_size=150,
        early_stopping=True,
        random_state=0,
        **head,
    )
    denoiser.fit(noisy, clean if supervised else None)
    # the training steps did meet queries in their own prompt
    assert sum(excluded) > 0
    excluded.clear()
    denoiser.fit_transform(noisy, clean if supervised else None)
    assert sum(excluded) > 0


def test_denoiser_kernel_heads_leave_each_training_target_out(monkeypatch):
    """The default supervised denoiser votes clean targets: a training query
    (noisy) must not see its own clean target, while choosing the bandwidths
    and in fit_transform. Queries and tokens differ by the noise, so each
    query's own target is found by row: the prompt of ``prompt_size`` rows
    is ``clean[prompt_indices_]``."""
    clean, noisy = _data()
    scale = rms_scale(noisy)  # the bandwidths are chosen in these units
    excluded = []

    def check(queries, targets, bandwidths, exclude=None):
        # each tuning query is a noisy row: find it, then its own target's row
        distances = np.abs(queries.double().numpy()[:, None] * scale - noisy[None]).max(-1)
        rows = distances.argmin(axis=1)
        assert distances.min(axis=1).max() < 1e-5
        positions = np.full(len(noisy), -1)
        positions[prompt_indices] = np.arange(len(prompt_indices))
        np.testing.assert_array_equal(exclude.cpu().numpy(), positions[rows])
        np.testing.assert_allclose(
            targets.double().numpy() * scale, clean[prompt_indices], rtol=1e-6
        )
        excluded.append(int((positions[rows] >= 0).sum()))

    denoiser = SoftmaxAttentionDenoiser(prompt_size=150, random_state=0)
    # the prompt's rows, known after one fit with the same seed
    prompt_indices = denoiser.fit(noisy, clean).prompt_indices_
    _watch(monkeypatch, denoising_kernel_head, "target_votes", check)
    denoiser.fit(noisy, clean)
    assert sum(excluded) > 0
    # fit_transform: the engine gets each training row's own position
    seen = []

    def forward_check(self, parameters, queries, prompt, exclude):
        np.testing.assert_array_equal(prompt.cpu().numpy(), clean[self.prompt_indices_])
        positions = np.full(len(noisy), -1)
        positions[self.prompt_indices_] = np.arange(len(self.prompt_indices_))
        np.testing.assert_array_equal(exclude.cpu().numpy(), positions[: len(exclude)])
        seen.append(int((exclude >= 0).sum()))

    _watch(monkeypatch, SoftmaxAttentionDenoiser, "_forward", forward_check)
    denoiser.fit_transform(noisy, clean)
    assert denoiser.init_ == "kernel" and sum(seen) == 150


def _watch_classifier_scores(monkeypatch, owner, n_features):
    """Record, for every ``owner.classifier_scores`` call, how many queries had
    their own token excluded (after checking that exactly it was)."""
    excluded = []

    def check(parameters, features, prompt, exclude, batch_size, token_bias=None):
        # prompt tokens are (x_i, label_i): a query's own token has its x
        excluded.append(_check_own_token_excluded(features, prompt[:, :n_features], exclude))

    _watch(monkeypatch, owner, "classifier_scores", check)
    return excluded


def test_classifier_training_queries_leave_their_own_token_out(monkeypatch):
    X, _ = _data()
    y = (X[:, 0] > 0).astype(int)
    excluded = _watch_classifier_scores(monkeypatch, classifier_objective, X.shape[1])
    SoftmaxAttentionClassifier(
        head="bilinear",
        max_iter=3,
        solver="adam",
        prompt_size=150,
        early_stopping=True,
        random_state=0,
    ).fit(X, y)
    assert sum(excluded) > 0


def test_kernel_heads_vote_without_the_query_own_label(monkeypatch):
    """The bandwidth search's votes leave each training query's token out:
    with it, the smallest bandwidth would read the query's own label."""
    X, _ = _data()
    y = (X[:, 0] > 0).astype(int)
    excluded, grid_sizes = [], []

    def check(queries, tokens, blocks, bandwidths, exclude=None, token_bias=None):
        # one pass of distances per grid search, every bandwidth from it
        excluded.append(_check_own_token_excluded(queries, tokens, exclude))
        grid_sizes.append(len(bandwidths))

    _watch(monkeypatch, kernel_head, "grid_votes", check)
    SoftmaxAttentionClassifier(head="kernel", prompt_size=150, random_state=0).fit(X, y)
    # every grid search (the isotropic heads' thirteen bandwidths, the
    # learned metric's judging ones) leaves each query's own token out
    assert len(kernel_head.BANDWIDTH_FACTORS) in grid_sizes
    assert len(excluded) >= 3 and min(excluded) > 0
