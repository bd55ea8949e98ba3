"""The classifier's starting parameters: LDA in the skip map, the paper's constructions.

Every start is a dict of NumPy float64 parameters in the data's units, with
the full shapes of ``_heads`` (a label axis even for two classes).
"""

import warnings

import numpy as np

from ..training._units import rms_scale
from ._heads import (
    _SCALE_POWER,
    bayes_heads,
    head_constant,
    krylov_heads,
    label_width,
    lda_skip,
    zero_heads,
)


def classifier_starts(
    init,
    residual,
    n_heads,
    train_X,
    train_labels,
    prompt_X,
    prompt_labels,
    n_classes,
    seed,
    names=None,
):
    """Start name -> parameters (NumPy float64, data units, full shapes).

    ``init``, ``residual`` and ``n_heads`` are the classifier's parameters;
    ``names`` the starts to build (``None``: ``init``'s). A construction
    that does not exist on the data comes back, with a warning, as the
    start it falls back on.

    Full shapes keep a label axis even for two classes (width 1): ``U11``
    (H, d, d), ``u12`` and ``v21`` (H, width, d), ``v22`` (H, width,
    width), ``skip`` (width, d) and ``intercept`` (width,).
    """
    width = label_width(n_classes)
    if names is None:
        names = [init]
        if init == "auto":
            names = ["lda"] if residual else ["zero"]
    random_state = np.random.RandomState(seed)
    starts = {}
    for name in names:
        if name == "bayes":
            heads = _bayes_heads(n_heads, residual, prompt_X, prompt_labels, n_classes)
            if heads is None:  # warned: the linear start (or the zero start) instead
                name = "lda" if residual else "zero"
        if name == "krylov":
            heads = _krylov_heads(n_heads, prompt_X, prompt_labels, n_classes, random_state)
            if heads is None:  # warned: K is all of R^d
                name = "zero"
        if name not in ("bayes", "krylov"):
            heads = zero_heads(prompt_X, width, n_heads, random_state)
            if name == "random":
                scale = rms_scale(prompt_X)
                for key in ("U11", "u12", "v22"):
                    shape = heads[key].shape
                    heads[key] = (
                        random_state.normal(size=shape)
                        / np.sqrt(prompt_X.shape[1])
                        / scale ** _SCALE_POWER[key]
                    )
        if residual:
            if name == "lda":
                skip, intercept = lda_skip(train_X, train_labels)
                # a head with U = 0 reads out the prompt's mean: move that
                # constant out, so that the start's score is LDA's exactly
                intercept = intercept - head_constant(heads, prompt_X, prompt_labels, n_classes)
            else:
                skip, intercept = np.zeros((width, prompt_X.shape[1])), np.zeros(width)
            heads.update(skip=skip, intercept=intercept)
        starts[name] = heads
    return starts


def _krylov_heads(n_heads, prompt_X, prompt_labels, n_classes, random_state):
    """``krylov_heads``, or ``None`` with a warning where ``K`` fills ``R^d``."""
    heads = krylov_heads(prompt_X, prompt_labels, n_classes, n_heads, random_state)
    if heads is None:
        warnings.warn(
            "SoftmaxAttentionClassifier: the Krylov space of the class means under "
            f"the pooled covariance is all of R^{prompt_X.shape[1]} on this prompt "
            "(a generic covariance, Proposition B.35), so no v21 lies in K-perp: "
            "init='krylov' starts from init='zero' instead.",
            UserWarning,
            stacklevel=9,  # the user's call of fit
        )
    return heads


def _bayes_heads(n_heads, residual, prompt_X, prompt_labels, n_classes):
    """``bayes_heads``, or ``None`` with a warning where the construction fails."""
    try:
        heads = bayes_heads(prompt_X, prompt_labels, n_classes, n_heads)
        problem = None if all(np.all(np.isfinite(v)) for v in heads.values()) else "not finite"
    except ValueError as error:  # e.g. d = 1, balanced classes, b* = 0: no v21 exists
        problem = str(error)
    if problem is None:
        return heads
    fallback = "the linear start (LDA)" if residual else "init='zero'"
    warnings.warn(
        f"SoftmaxAttentionClassifier: the Bayes construction of init='bayes' "
        f"(Lemma B.3) does not exist on this data ({problem}); starting from "
        f"{fallback} instead.",
        UserWarning,
        stacklevel=9,  # the user's call of fit
    )
    return None
