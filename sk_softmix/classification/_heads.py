"""The classifier's heads as plain functions (Section 3 of the paper).

Tokens are ``(x_i, label block)``: the label ``y_i`` in {-1, +1} for two
classes, the one-hot vector for more. A query is ``(x, 0)``, and a head
scores it with ``sum_i softmax_i(x_i^T U11^T x + label_i^T u12 x)
(v21 x_i + v22 label_i)``. Here live the tokens, the scores, the losses,
the starts (the zero start, LDA's skip map, Lemma B.3's construction and its
one-hot analogue) and the effective coordinates of eq. 7, head by head.
:class:`~sk_softmix.SoftmaxAttentionClassifier` composes them.
"""

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from ..attention._softmax import softmax_attention
from ..theory.lda import (
    class_statistics,
    effective_coordinates,
    krylov_basis,
    lda_construction,
    precision,
)
from ..training._units import power_of_two_scale, rms_scale

# How each parameter scales when the features are divided by their RMS
# ``scale``: scores x_i^T U11^T x scale as scale^2, y_i u12^T x and the read-out
# v21^T x_i and skip x as scale, so U11 * scale^2, u12 * scale, v21 * scale and
# skip * scale are invariant.
_SCALE_POWER = {"U11": 2, "u12": 1, "v21": 1, "v22": 0, "skip": 1, "intercept": 0, "W": 2}


# -- the one place that tells two classes from more -----------------------------
#
# Two classes are the paper's model: one label column, y_i in {-1, +1}, one
# score f(x) and the logistic loss, and fitted parameters without the label
# axis (u12_ of shape (H, d)). More classes: one-hot label blocks, one logit
# per class, the cross-entropy. Everything else works on the full shapes,
# with a label axis of width 1 for two classes.


def label_width(n_classes):
    """Columns of a token's label block: 1 for two classes, else ``n_classes``."""
    return 1 if n_classes == 2 else n_classes


def label_blocks(labels, n_classes):
    """Each token's label block: ``2 y - 1`` for two classes, else one-hot.

    ``labels`` holds class indices, as a NumPy array or a torch tensor; the
    blocks come back as the same kind, (n, ``label_width``) floats.
    """
    if n_classes == 2:
        return (2.0 * labels - 1)[:, None]
    if torch.is_tensor(labels):
        return F.one_hot(labels, n_classes).to(torch.get_default_dtype())
    return np.eye(n_classes)[labels]


def to_fitted_shapes(name, value, n_classes):
    """A head parameter in full shape as the estimator stores it: for two
    classes without the label axis (``u12``, ``v21``: (H, d); ``v22``: (H,))."""
    if n_classes != 2:
        return value
    if name in ("u12", "v21"):
        return value[:, 0]
    return value[:, 0, 0] if name == "v22" else value


def from_fitted_shapes(parameters, n_classes):
    """The inverse of :func:`to_fitted_shapes` on torch parameters."""
    if n_classes != 2:
        return parameters
    full = dict(parameters)
    full["u12"] = full["u12"].unsqueeze(1)
    full["v21"] = full["v21"].unsqueeze(1)
    full["v22"] = full["v22"].view(-1, 1, 1)
    return full


def classifier_tokens(features, labels, n_classes):
    """Prompt tokens ``(x_i, label block)`` (see :func:`label_blocks`)."""
    return torch.cat([features, label_blocks(labels, n_classes).to(features.dtype)], dim=-1)


def classifier_scores(parameters, features, prompt, exclude, batch_size, token_bias=None):
    """Scores (n, 1) or logits (n, C) of the queries ``(x, 0)``.

    ``sum_h sum_i softmax_i(x_i^T U11_h^T x + label_i^T u12_h x - 1/2 x_i^T W_h x_i
    + c_i) (v21_h x_i + v22_h label_i)``, plus ``skip x + intercept`` when the
    parameters hold a skip map. The key norm ``W`` (H, d, d) is there for
    kernel heads only (``W = U11``: a Gaussian kernel, see
    ``_kernel_head``); without it the score is the paper's. ``token_bias``
    (L,) is ``c_i``, the log of each token's weight (``_tokens``), or
    ``None`` for equal weights. Shapes are the full ones of
    ``classifier_starts``.
    """
    U11, u12, v21, v22 = (parameters[name] for name in ("U11", "u12", "v21", "v22"))
    n_heads, width, d = u12.shape
    # U z for z = (x, 0): the key-query matrix's blocks acting on x, so that
    # z_i^T U z = x_i^T U11^T x + label_i^T u12 x.
    U = torch.cat(
        [
            torch.cat([U11.mT, u12], dim=1),  # (H, d + width, d)
            torch.zeros(n_heads, d + width, width, dtype=U11.dtype, device=U11.device),
        ],
        dim=2,
    )
    V = torch.cat([v21, v22], dim=2)  # (H, width, d + width)
    queries = torch.cat(
        [features, torch.zeros(len(features), width, dtype=features.dtype, device=features.device)],
        dim=1,
    )
    key_norm = None
    if "W" in parameters:
        # the kernel head's key norm -1/2 x_i^T W x_i acts on the features only
        key_norm = F.pad(parameters["W"], (0, width, 0, width))  # (H, d + width, d + width)
    scores = softmax_attention(
        queries,
        prompt,
        U,
        V,
        exclude=exclude,
        batch_size=batch_size,
        key_norm=key_norm,
        key_bias=token_bias,
    ).sum(0)
    if "skip" in parameters:
        scores = scores + features @ parameters["skip"].mT + parameters["intercept"]
    return scores


def classification_losses(scores, targets):
    """Per-sample logistic loss (two classes: one score column) or cross-entropy."""
    if scores.shape[1] == 1:
        signs = 2.0 * targets.to(scores.dtype) - 1
        return F.softplus(-signs * scores[:, 0])
    return F.cross_entropy(scores, targets, reduction="none")


def zero_heads(prompt_X, width, n_heads, random_state):
    """The zero start: ``U11 = 0``, ``u12 = 0``, ``v22 = 0``, ``v21`` Gaussian.

    Theorem 3.6's start with a Gaussian ``v21(0)`` in place of one in
    ``K-perp``: the paper's Figure 5 heuristic.

    ``v21`` has unit-variance entries over ``sqrt(d)`` in units where the
    features have root-mean-square 1.
    """
    d = prompt_X.shape[1]
    v21 = random_state.normal(size=(n_heads, width, d)) / np.sqrt(d) / rms_scale(prompt_X)
    return {
        "U11": np.zeros((n_heads, d, d)),
        "u12": np.zeros((n_heads, width, d)),
        "v21": v21,
        "v22": np.zeros((n_heads, width, width)),
    }


def class_means_and_pooled_covariance(X, labels, n_classes):
    """Class means (C, d) and the pooled within-class covariance (d, d) with
    maximum-likelihood (1/n) class covariances, for labels ``0..C-1``; the
    ``C``-class form of :func:`~sk_softmix.theory.lda.class_statistics`."""
    means = np.stack([X[labels == c].mean(axis=0) for c in range(n_classes)])
    centred = X - means[labels]
    return means, centred.T @ centred / len(X)


def krylov_heads(prompt_X, prompt_labels, n_classes, n_heads, random_state):
    """Theorem 3.6's start on data: the zero start with ``v21`` in ``K-perp``.

    ``K`` is the Krylov space of the prompt's class means (centred on the
    prompt's mean: ``m`` for two balanced classes ``+-m``; a block Krylov
    space for more classes) under its pooled covariance
    (:func:`~sk_softmix.theory.lda.krylov_basis`). An estimated covariance has
    distinct eigenvalues, so that the exact ``K`` is all of ``R^d``
    (Proposition B.35). The basis therefore drops the directions that the
    prompt cannot resolve: an Arnoldi step counts when it is above ``2
    sqrt(d / n)`` of ``||Gamma||``, twice the sampling error of ``Gamma q``
    (on isotropic classes that error measured 0.33-0.92 ``sqrt(d / n)``
    for d = 5 to 64 and n = 200 to 5,000).

    Returns ``None`` when ``K`` fills ``R^d`` even so: no nonzero ``v21``
    lies in ``K-perp``.
    """
    heads = zero_heads(prompt_X, label_width(n_classes), n_heads, random_state)
    n, d = prompt_X.shape
    means, covariance = class_means_and_pooled_covariance(prompt_X, prompt_labels, n_classes)
    basis = krylov_basis(means - prompt_X.mean(axis=0), covariance, rtol=2 * np.sqrt(d / n))
    if basis.shape[1] == d:
        return None
    heads["v21"] = heads["v21"] - heads["v21"] @ basis @ basis.T
    return heads


def head_constant(heads, prompt_X, prompt_labels, n_classes):
    """What heads with ``U11 = 0``, ``u12 = 0`` return: the read-out of the prompt's mean."""
    block = label_blocks(prompt_labels, n_classes)
    mean_x, mean_block = prompt_X.mean(axis=0), block.mean(axis=0)
    return np.einsum("hcd,d->c", heads["v21"], mean_x) + np.einsum(
        "hce,e->c", heads["v22"], mean_block
    )


def lda_skip(X, labels):
    """``LinearDiscriminantAnalysis()``'s ``coef_`` and ``intercept_`` on ``(X, labels)``.

    The linear start of the classifier: with the heads reading out a
    constant, the skip map and intercept make the score LDA's, whatever the
    priors (balanced included), the number of classes, or constant features
    (scikit-learn's SVD solver handles rank-deficient covariances).
    """
    # On data scaled to root-mean-square about 1 (LDA's score is equivariant),
    # so that float32 data near 1e20 does not overflow inside scikit-learn. The
    # scale is a power of two, so that dividing by it rounds nothing: a
    # constant column stays exactly constant, which is how LDA's SVD solver
    # recognises it (a rounding-level spread made it divide by 1e-16).
    scale = power_of_two_scale(X)
    lda = LinearDiscriminantAnalysis().fit(np.asarray(X, dtype=np.float64) / scale, labels)
    return lda.coef_ / scale, lda.intercept_.astype(np.float64)


def bayes_heads(prompt_X, prompt_labels, n_classes, n_heads):
    """Lemma B.3's head (or its one-hot analogue) in head 0, zero heads after it.

    Built on the prompt divided by its root-mean-square and mapped back with
    each parameter's power of the scale, so that the start is
    scale-equivariant (``U11 = I`` is not, in the data's units); the pooled
    covariance is pseudo-inverted (``sk_softmix.theory.lda.precision``).
    """
    scale = rms_scale(prompt_X)
    heads = _bayes_heads_unit_scale(prompt_X / scale, prompt_labels, n_classes, n_heads)
    return {name: value / scale ** _SCALE_POWER[name] for name, value in heads.items()}


def _bayes_heads_unit_scale(prompt_X, prompt_labels, n_classes, n_heads):
    d = prompt_X.shape[1]
    if n_classes == 2:
        U11, u12, v21, v22 = lda_construction(*class_statistics(prompt_X, 2 * prompt_labels - 1))
        blocks = {"U11": U11, "u12": u12[None], "v21": v21[None], "v22": np.array([[v22]])}
    else:
        # One-hot analogue: u12 = -M U11^T keeps the gate at the priors, then
        # v21 Gamma = W and v22 (pi) = b - v21 mbar give the LDA logits W x + b.
        means, covariance = class_means_and_pooled_covariance(prompt_X, prompt_labels, n_classes)
        priors = np.bincount(prompt_labels, minlength=n_classes) / len(prompt_labels)
        inverse = precision(covariance)
        weights = means @ inverse  # (C, d): Gamma^{-1} m_c
        biases = -0.5 * np.sum(weights * means, axis=1) + np.log(priors)
        v21 = weights @ inverse  # W Gamma^{-1}
        v22 = np.outer(biases - v21 @ (priors @ means), np.ones(n_classes))
        blocks = {"U11": np.eye(d), "u12": -means, "v21": v21, "v22": v22}
    return {
        name: np.concatenate([block[None], np.zeros((n_heads - 1, *block.shape))])
        for name, block in blocks.items()
    }


def heads_coordinates(U11, u12, v21, v22, statistics):
    """Eq. 7's ``(w, b, r, s)`` of every binary head, stacked, and ``s0``.

    ``U11`` (H, d, d), ``u12`` and ``v21`` (H, d), ``v22`` (H,);
    ``statistics`` as returned by :func:`sk_softmix.theory.lda.class_statistics`.
    """
    per_head = [
        effective_coordinates(U11[h], u12[h], v21[h], v22[h], *statistics) for h in range(len(U11))
    ]
    coordinates = {key: np.array([c[key] for c in per_head]) for key in ("w", "b", "r", "s")}
    coordinates["s0"] = per_head[0]["s0"]
    return coordinates


def coordinate_history(snapshots, statistics, scale):
    """Effective coordinates and balance of each head at each evaluation (data units)."""
    history = {key: [] for key in ("w", "b", "r", "s", "balance")}
    # one device-to-host copy per parameter for the whole run, not per iteration
    stacked = {
        name: torch.stack([snapshot[name] for snapshot in snapshots]).cpu().numpy()
        for name in ("U11", "u12", "v21", "v22")
    }
    for iteration in range(len(snapshots)):
        theta = {
            name: values[iteration].astype(np.float64) / scale ** _SCALE_POWER[name]
            for name, values in stacked.items()
        }
        coordinates = heads_coordinates(
            theta["U11"], theta["u12"][:, 0], theta["v21"][:, 0], theta["v22"][:, 0, 0], statistics
        )
        for key in ("w", "b", "r", "s"):
            history[key].append(coordinates[key])
        history["balance"].append(
            np.sum(theta["U11"] ** 2, axis=(1, 2)) - np.sum(theta["v21"][:, 0] ** 2, axis=1)
        )
    return {key: np.asarray(value) for key, value in history.items()}
