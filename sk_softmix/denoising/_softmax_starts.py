"""The softmax denoiser's starts: the best affine map, the paper's constructions
from a tied Gaussian mixture fitted on the prompt, the key-bias construction,
and small random heads.

Every start is a dict of NumPy float64 parameters in the data's units.
"""

import warnings

import numpy as np
import torch
from sklearn.mixture import GaussianMixture

from ..theory.affine_maps import affine_heads, best_affine_map
from ..theory.constructions import (
    in_context_construction,
    key_bias_construction,
    single_head_construction,
    two_head_start,
)
from ..training._units import rms_scale
from ._objective import stein_risk

# Weights w of the key norm, relative to S^{-1} on the means' span, among which
# the key-norm start is chosen where no offset is exact. On four components of
# norms 0 to 8.5 in the plane (20,000 tokens) the best untrained head, at
# w = 8, was 1.12 times the Bayes risk, against 4.0 at w = 0.
_KEY_NORM_WEIGHTS = (1.0, 2.0, 4.0, 8.0, 16.0)


def softmax_starts(model, train_X, train_y, prompt, noise_variance, random_state, names, left_out):
    """Start name -> parameters for ``model``, a ``_model.DenoiserModel``
    (``AttentionDenoiserBase._starts``).

    ``"bayes"``: the construction (``_bayes_heads``); ``"linear"``: the best
    affine map as heads (:func:`~sk_softmix.theory.affine_maps.affine_heads`);
    ``"random"``: small random heads. Key terms a start lacks are zero.
    """
    n_features = prompt.shape[1]
    # the paper's scores where a start has no key terms: zero b, W and intercept
    no_key_terms = {
        "b": np.zeros((model.n_heads, n_features)),
        "W": np.zeros((model.n_heads, n_features, n_features)),
        "intercept": np.zeros(n_features),
    }
    starts = {}
    for name in names:
        if name == "bayes":
            start = _bayes_heads(
                model, prompt, noise_variance, random_state, train_X, train_y, left_out
            )
        elif name == "linear":
            A, c = best_affine_map(train_X, train_y, noise_variance)
            heads = affine_heads(
                A,
                c,
                prompt,
                model.n_heads,
                residual=model.residual,
                random_state=random_state,
            )
            start = dict(zip(("U", "V", "skip"), heads, strict=True))
        else:
            start = _random_heads(model, prompt, random_state)
        starts[name] = {
            key: start[key] if key in start else no_key_terms[key].copy()
            for key in model.parameter_names
        }
    return starts


def _random_heads(model, prompt, random_state):
    """Small random heads and the identity skip."""
    n_features = prompt.shape[1]
    scale = rms_scale(prompt)
    size = (model.n_heads, n_features, n_features)
    U = random_state.normal(scale=0.5 / np.sqrt(n_features), size=size) / scale / scale
    V = random_state.normal(scale=0.5 / np.sqrt(n_features), size=size)
    return {"U": U, "V": V, "skip": np.eye(n_features)}


def _bayes_heads(model, prompt, noise_variance, random_state, train_X, train_y, left_out):
    """The constructions from a tied Gaussian mixture fitted on the prompt:
    the paper's, or with ``key_bias`` and ``residual=True`` the key-bias
    one (head 0; the other heads output zero)."""
    n_features = prompt.shape[1]
    U = np.zeros((model.n_heads, n_features, n_features))
    V = np.zeros((model.n_heads, n_features, n_features))
    head = {"skip": np.eye(n_features)}
    # Built on the prompt at unit root-mean-square, mapped back at the end
    # by each parameter's power of the scale: GaussianMixture's reg_covar
    # is absolute, and products such as xi^2 (gamma^2 + xi^2) leave
    # float64 at scales near 1e-150.
    scale = rms_scale(prompt)
    means, noisy_covariance = _fit_tied_mixture(model, prompt / scale, random_state)
    # xi^2 = 0 (clean "noisy" data) would divide by zero below
    xi2 = max(noise_variance / scale / scale, 1e-12)
    if model.residual and model.key_bias is not None:
        head = _key_bias_head(
            model,
            means,
            noisy_covariance,
            xi2,
            prompt / scale,
            train_X / scale,
            None if train_y is None else train_y / scale,
            left_out,
            random_state,
        )
        U, V = head.pop("U"), head.pop("V")
    elif model.residual:
        U[0], V[0], head["skip"] = in_context_construction(noisy_covariance, xi2)
    elif model.n_heads >= 2 and model.n_components == 2:
        gamma2 = max(np.trace(noisy_covariance) / n_features - xi2, 0.0)
        U[:2], V[:2] = two_head_start(means, gamma2, xi2)
    else:
        U[0], V[0] = single_head_construction(noisy_covariance, xi2)
    head.update(U=U, V=V)
    return {name: value / scale ** model.scale_power[name] for name, value in head.items()}


def _key_bias_head(
    model, means, noisy_covariance, xi2, prompt, queries, targets, left_out, random_state
):
    """:func:`key_bias_construction` as head 0, in the prompt's units.

    The estimated means are projected on the span their sampling error
    cannot explain. Where an offset gives every component its Bayes gate
    the start is the dot-product head with that offset (``w = 0``). Where
    none does and ``key_bias="norm"``, it is the key norm's weight of
    ``_KEY_NORM_WEIGHTS`` whose head scores best on up to 1,000 training
    queries, by the training objective itself.
    """
    n_components, n_features = means.shape
    # Whitened, an estimated mean is off by N(0, I / n_k): the centred K x p
    # matrix of those errors has singular values up to about
    # (sqrt(K) + sqrt(p)) / sqrt(n_k). Directions below twice that are
    # noise; kept, they made b as large as 200 on four coplanar means in
    # p = 8, and the head 10,000 times the Bayes risk (20,000 points).
    span_tol = 2.0 * (np.sqrt(n_components) + np.sqrt(n_features))
    span_tol /= np.sqrt(len(prompt) / n_components)

    def head_at(weight):
        with warnings.catch_warnings(record=True) as caught:
            # a start: where no offset is exact, the least-squares one trains on
            warnings.simplefilter("always", UserWarning)
            construction = key_bias_construction(
                means, noisy_covariance, xi2, key_norm=weight, span_tol=span_tol
            )
        head = {"skip": construction["skip"], "intercept": construction["intercept"]}
        for name in "UVWb":  # head 0; the other heads output zero
            head[name] = np.zeros((model.n_heads, *construction[name].shape))
            head[name][0] = construction[name]
        return head, not caught

    head, exact = head_at(0.0)
    if exact or model.key_bias == "offset":
        # Every width is then exact on the prompt law, and training from
        # the widest went furthest: on 20,000 points, 1.003 times Bayes on
        # Figure 2's task and 1.026 on norms 0, 5 and 7, against 1.005-1.022
        # from w = 1 to 8 and 1.030-1.035 from w = 1 to 4.
        return head
    # No exact head: the gate's norm terms are wrong, and a narrower
    # kernel leans less on them (four means of norms 0 to 8.5, one inside
    # the triangle of the others: 1.25 times Bayes trained from w = 0,
    # 1.10 from w = 8).
    heads = [head_at(weight)[0] for weight in _KEY_NORM_WEIGHTS]
    rows = random_state.choice(len(queries), min(len(queries), 1000), replace=False)
    exclude = torch.as_tensor(left_out[rows])  # each query left out of its own prompt
    queries = torch.as_tensor(queries[rows], dtype=torch.float64)
    targets = None if targets is None else torch.as_tensor(targets[rows])
    prompt = torch.as_tensor(prompt, dtype=torch.float64)
    losses = [_start_loss(model, head, prompt, queries, targets, exclude, xi2) for head in heads]
    return heads[int(np.argmin(losses))]


def _start_loss(model, head, prompt, queries, targets, exclude, xi2):
    """The training objective of ``head`` on ``queries`` (float64 tensors):
    the squared error against ``targets``, or SURE without them."""
    parameters = {
        name: torch.as_tensor(head[name], dtype=torch.float64) for name in model.parameter_names
    }
    with torch.no_grad():
        if targets is not None:
            denoised = model.forward(parameters, queries, prompt, exclude)
            return float(torch.mean((denoised - targets) ** 2))
        denoised, divergence = model.forward_and_divergence(parameters, queries, prompt, exclude)
        return float(stein_risk(denoised, queries, divergence, xi2).mean())


def _fit_tied_mixture(model, prompt, random_state):
    if prompt.shape[0] < model.n_components:
        raise ValueError(
            f"init='bayes' fits a {model.n_components}-component mixture, which "
            f"needs at least {model.n_components} prompt points; "
            f"got {prompt.shape[0]}."
        )
    # tol: scikit-learn's 1e-3 stops EM after 5 iterations on the Figure 2
    # task, its means 0.09 off; 1e-5 takes 13 (0.015 off the converged
    # means) and on digits a third of the time of 1e-8. Training follows.
    mixture = GaussianMixture(
        model.n_components,
        covariance_type="tied",
        tol=1e-5,
        max_iter=1000,
        random_state=random_state,
    ).fit(prompt)
    return mixture.means_, mixture.covariances_
