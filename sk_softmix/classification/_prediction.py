"""The classifier's scores at prediction, from its fitted arrays.

:class:`AttentionClassifierMixin` holds the estimator's prediction methods.
Two paths: the engine's attention over the whole prompt (torch, CPU or
CUDA, the fused kernel where it is exact), and the kernel heads' vote over
each query's nearest tokens (``_neighbours``) for models fitted with
``n_neighbors``. Both return the start's linear score plus the heads';
:func:`fitted_scores` picks the path and adds the quadratic start's term.
"""

import numpy as np
import torch
from scipy.special import log_softmax
from sklearn.utils.validation import check_is_fitted, validate_data

from ..attention._device import as_tensor, resolve_device
from ..attention._fused import fused_kernel_available
from ..attention._kernels import queries_per_chunk
from ..attention._threads import one_cpu_thread, predict_on_threads
from ..training._validation import FLOAT_DTYPES, torch_dtype_of
from ._heads import classifier_scores, classifier_tokens, from_fitted_shapes, label_blocks
from ._linear_starts import quadratic_scores
from ._neighbours import neighbour_head_votes, token_index
from ._tokens import equal_weights


def attention_scores(
    features, fitted, prompt_X, prompt_y, prompt_weights, n_classes, device, dtype, batch_size
):
    """Scores (n, 1 or n_classes) of the queries ``features`` (the model's
    coordinates) by attention over the prompt, computed in the torch
    ``dtype``; ``fitted`` maps a parameter's name to its fitted array
    (``U11``, ..., ``skip``, ``intercept``), ``batch_size`` is
    ``transform_batch_size``."""
    n_heads = len(fitted["U11"])
    # the tensor set-up on one thread too: a kernel on torch's pool would
    # leave its threads spinning through the prediction
    with torch.no_grad(), one_cpu_thread(device):
        parameters = from_fitted_shapes(
            {name: as_tensor(value, device, dtype) for name, value in fitted.items()}, n_classes
        )
        prompt = classifier_tokens(
            as_tensor(prompt_X, device, dtype), as_tensor(prompt_y, device), n_classes
        )
        token_bias = None
        if not equal_weights(prompt_weights):
            token_bias = as_tensor(np.log(prompt_weights), device, dtype)
        queries = as_tensor(features, device, dtype)  # see ``standardize``
    chunk = queries_per_chunk(batch_size, n_heads, len(prompt))

    def chunk_scores(start, stop):
        # the engine chunks the queries, reusing one scores buffer
        return classifier_scores(parameters, queries[start:stop], prompt, None, chunk, token_bias)

    fused_scores = len(features) * len(prompt) * n_heads
    if not fused_kernel_available(device, leave_one_out=False):
        fused_scores = None
    with torch.no_grad():
        scores = predict_on_threads(device, len(features), chunk, chunk_scores, fused_scores)
    return scores.cpu().numpy()


def neighbour_scores(
    features, fitted, metric, prompt_X, prompt_y, prompt_weights, n_neighbors, n_classes
):
    """The linear start's score plus the kernel heads' votes over each query's
    ``n_neighbors`` nearest tokens in the metric ``A`` (``U11 = A^T A /
    h^2``), in float64; ``fitted`` holds ``U11``, ``v22``, ``skip`` and
    ``intercept``.

    The neighbour index is built here, from the prompt, so that the fitted
    state stays NumPy (a tree over 240,000 tokens in 8 features builds in
    about 0.6 s, a hundredth of searching it for 60,000 queries).
    """
    gram = np.trace(metric.T @ metric)
    bandwidths = np.sqrt(gram / np.trace(fitted["U11"], axis1=1, axis2=2))
    readouts = fitted["v22"] if n_classes == 2 else fitted["v22"][:, 0, 0]
    blocks = np.asarray(label_blocks(prompt_y, n_classes), dtype=np.float64)
    features = np.asarray(features, dtype=np.float64)
    votes = neighbour_head_votes(
        token_index(prompt_X.astype(np.float64) @ metric.T),
        features @ metric.T,
        blocks,
        prompt_weights,
        bandwidths,
        readouts,
        n_neighbors,
    )
    return features @ fitted["skip"].T + fitted["intercept"] + votes


# the fitted attributes the scores read; models saved before the quadratic
# start, token weights, learned metrics or kernel heads lack some of them
FITTED_FOR_SCORES = (
    "classes_",
    "feature_mean_",
    "feature_scale_",
    "prompt_X_",
    "prompt_y_",
    "prompt_weights_",
    "quadratic_",
    "n_neighbors_",
    "metric_",
    "U11_",
    "u12_",
    "v21_",
    "v22_",
    "W_",
    "skip_",
    "intercept_",
)


def fitted_scores(X, fitted: dict, *, residual: bool, device, batch_size):
    """The classifier's scores of ``X`` (n, 1 or n_classes), in ``X``'s dtype.

    ``fitted`` maps each name of ``FITTED_FOR_SCORES`` to the estimator's
    attribute (``None`` where a saved model lacks it); ``residual``,
    ``device`` and ``batch_size`` (``transform_batch_size``) are its
    parameters. The path: the start alone where the heads read out nothing,
    the neighbours' vote where the model was fitted with ``n_neighbors``,
    else attention over the whole prompt; plus the quadratic start's term.
    """
    features = (X - fitted["feature_mean_"]) / fitted["feature_scale_"]  # the model's coordinates
    quadratic = quadratic_scores(fitted["quadratic_"], features)
    n_classes = len(fitted["classes_"])
    token_weights = fitted["prompt_weights_"]
    if token_weights is None:
        token_weights = np.ones(len(fitted["prompt_y_"]))
    parameters = {
        name: np.asarray(fitted[f"{name}_"])
        for name in ("U11", "u12", "v21", "v22", "W", "skip", "intercept")
        if fitted[f"{name}_"] is not None
    }
    # W_: a key norm, nonzero for kernel heads only
    if "W" in parameters and not np.any(parameters["W"]):
        del parameters["W"]
    if not residual:
        parameters.pop("skip", None)
        parameters.pop("intercept", None)
    if residual and not (np.any(parameters["v21"]) or np.any(parameters["v22"])):
        # heads that read out nothing return exactly 0: the start alone
        scores = features @ parameters["skip"].T.astype(features.dtype) + parameters["intercept"]
    elif fitted["n_neighbors_"] is not None:
        metric = fitted["metric_"]
        scores = neighbour_scores(
            features,
            parameters,
            np.eye(parameters["U11"].shape[1]) if metric is None else metric,
            fitted["prompt_X_"],
            fitted["prompt_y_"],
            token_weights,
            fitted["n_neighbors_"],
            n_classes,
        )
    else:
        scores = attention_scores(
            features,
            parameters,
            fitted["prompt_X_"],
            fitted["prompt_y_"],
            token_weights,
            n_classes,
            device,
            torch_dtype_of(X),
            batch_size,
        )
    return (scores + quadratic).astype(X.dtype, copy=False)


class AttentionClassifierMixin:
    """The classifier's prediction methods, from its fitted arrays (as
    scikit-learn's ``LinearClassifierMixin`` is a linear model's)."""

    def decision_function(self, X):
        """Scores of the head(s) for each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query points.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            ``f(x)`` for two classes (positive favours ``classes_[1]``), the
            ``C`` logits otherwise.
        """
        scores = self._logits(X)
        return scores[:, 1] if len(self.classes_) == 2 else scores

    def predict_log_proba(self, X):
        """Log-probabilities of the classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query points.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``log_softmax`` of the logits; for two classes the logits are
            ``(0, f(x))``.
        """
        # in NumPy: a torch kernel here would wake torch's thread pool for a few rows
        return log_softmax(self._logits(X), axis=1)

    def predict_proba(self, X):
        """Probabilities of the classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query points.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            For two classes, ``sigmoid(f(x))`` for ``classes_[1]``.
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """Most probable class of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query points.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        logits = self._logits(X)
        # argmax takes the first of tied logits: a binary f(x) = 0 gives classes_[0]
        return self.classes_[np.argmax(logits, axis=1)]

    def _logits(self, X):
        """One logit per class, (n_samples, n_classes): the one place where
        the binary score ``f(x)`` becomes the logits ``(0, f(x))``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        scores = self._scores(X)
        if len(self.classes_) == 2:
            return np.hstack([np.zeros_like(scores), scores])
        return scores

    def _scores(self, X):
        return fitted_scores(
            X,
            {name: getattr(self, name, None) for name in FITTED_FOR_SCORES},
            residual=self.residual,
            device=resolve_device(self.device),
            batch_size=self.transform_batch_size,
        )
