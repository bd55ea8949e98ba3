"""What the softmax- and linear-attention denoisers share: fitting and a
chunked forward pass ``f(queries, prompt)``.

A subclass supplies its parameters (``_initial_parameters``) and its forward
pass (``_forward``); this module turns them into ``fit`` and ``fit_transform``, and
``DenoiserMixin`` adds ``transform``, ``predict`` and ``score``.
"""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._denoiser_mixin import FLOAT_DTYPES, DenoiserMixin
from ._device import as_tensor, resolve_device
from ._training import minibatch_adam
from ._validation import (
    check_clean_targets,
    choose_prompt,
    prompt_positions,
    unchanged_on_error,
)


class AttentionDenoiserBase(DenoiserMixin, BaseEstimator):
    """Base class of the attention denoisers; not for direct use."""

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "residual": ["boolean"],
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "init": [StrOptions({"bayes", "random"})],
        "prompt_size": [Interval(Integral, 2, None, closed="left"), None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # Parameters whose value scales as 1 / (data scale)^2: training runs on data
    # divided by its root-mean-square, where these are rescaled accordingly.
    _inverse_square_scaled = ("U",)

    # Whether ``_forward`` evaluates ``batch_size`` queries at a time by itself.
    _engine_chunks_queries = False

    def _initial_parameters(self, prompt, noise_variance, random_state) -> dict:
        """Starting parameters, NumPy float64 in the data's units."""
        raise NotImplementedError

    def _forward(self, parameters, queries, prompt, exclude) -> torch.Tensor:
        """Denoised queries (n, p) from torch parameters over a torch prompt."""
        raise NotImplementedError

    def _forward_and_divergence(self, parameters, queries, prompt, exclude):
        """Denoised queries (n, p) and the divergence of f at each query (n,)."""
        raise NotImplementedError

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the attention parameters; the noisy ``X`` becomes the prompt.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations. They (or a random ``prompt_size`` of them) are
            the prompt every later query attends over.
        y : array-like of shape (n_samples, n_features), default=None
            Clean counterparts of ``X``. When given, training minimises the
            squared error, each training query left out of its own prompt.
            When omitted, training minimises Stein's unbiased risk estimate
            of that error, which needs ``noise_variance``.

        Returns
        -------
        self : object
            The fitted denoiser.

        See Also
        --------
        partial_fit : Train on one more task without resetting the weights.

        Notes
        -----
        Stein's unbiased risk estimate
        ``||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)`` has expectation
        ``E||f(Z) - X||^2`` for ``Z = X + N(0, xi^2 I)``; the divergence of a
        softmax head is ``tr(V Cov_a U)``, ``Cov_a`` the attention-weighted
        covariance of the prompt, and that of a linear stack the trace of its
        matrix, so no clean point is needed.

        Examples
        --------
        >>> import numpy as np
        >>> from sk_softmix import SoftmaxAttentionDenoiser
        >>> from sk_softmix.datasets import make_gaussian_mixture
        >>> Z, X, _ = make_gaussian_mixture(500, [[3.0, 0.0], [0.0, 3.0]],
        ...                                 noise_variance=4.0, random_state=0)
        >>> denoiser = SoftmaxAttentionDenoiser(noise_variance=4.0, max_iter=30,
        ...                                     random_state=0)
        >>> denoiser.fit(Z).n_iter_  # trained by SURE: no clean y
        30
        >>> bool(np.mean((denoiser.transform(Z) - X) ** 2) < np.mean((Z - X) ** 2))
        True
        """
        with unchanged_on_error(self):
            self._fit(X, y)
        return self

    def fit_transform(self, X, y=None):
        """Fit, then denoise ``X`` with each point left out of its own prompt.

        Unlike ``fit(X).transform(X)``, no point attends to its own copy in the
        prompt, exactly as during training.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.
        y : array-like of shape (n_samples, n_features), default=None
            Clean counterparts of ``X``, used for training only.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Denoised ``X``.

        Examples
        --------
        >>> import numpy as np
        >>> from sk_softmix import SoftmaxAttentionDenoiser
        >>> from sk_softmix.datasets import make_gaussian_mixture
        >>> Z, X, _ = make_gaussian_mixture(500, [[3.0, 0.0], [0.0, 3.0]],
        ...                                 noise_variance=4.0, random_state=0)
        >>> denoiser = SoftmaxAttentionDenoiser(max_iter=20, random_state=0)
        >>> denoised = denoiser.fit_transform(Z, X)
        >>> bool(np.mean((denoised - X) ** 2) < np.mean((Z - X) ** 2))
        True
        """
        self.fit(X, y)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        return self._denoise(X, exclude=prompt_positions(self.prompt_indices_, X.shape[0]))

    # -- internals -------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Train on one more task without resetting the weights.

        ``X`` is the task's prompt (noisy points) and ``y`` its clean
        counterparts, or ``None`` to train by Stein's unbiased risk estimate
        (then ``noise_variance`` is needed). Each call runs one pass over the
        task's points (``ceil(n / batch_size)`` Adam steps at a constant
        ``learning_rate``, the Adam moments carried from call to call) and
        leaves the task as the fitted prompt. Repeated calls on many tasks
        meta-train weights that denoise new tasks in context through
        ``transform(X, prompt=...)`` (Proposition 4.4). The first call
        initialises as ``fit`` does.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy points of one task.
        y : array-like of shape (n_samples, n_features), default=None
            Their clean counterparts.

        Returns
        -------
        self : object
            The denoiser, with the task as its prompt.

        See Also
        --------
        sk_softmix.datasets.make_denoising_tasks : Tasks to meta-train over.

        Notes
        -----
        ``set_params(learning_rate=...)`` between calls sets a schedule; the
        parameters are validated on every call.

        Examples
        --------
        >>> import numpy as np
        >>> from sk_softmix import SoftmaxAttentionDenoiser
        >>> from sk_softmix.datasets import make_denoising_tasks
        >>> denoiser = SoftmaxAttentionDenoiser(random_state=0)
        >>> for Z, X, _, _ in make_denoising_tasks(3, 512, 2, random_state=0):
        ...     denoiser = denoiser.partial_fit(Z, X)  # two Adam steps per task
        >>> denoiser.n_iter_
        6

        A new task, never trained on, denoised through its own prompt:

        >>> Z, X, means, weights = next(make_denoising_tasks(1, 2000, 2, random_state=5))
        >>> in_context = denoiser.transform(Z[1000:], prompt=Z[:1000])
        >>> stale = denoiser.transform(Z[1000:])  # the last training task's prompt
        >>> bool(np.mean((in_context - X[1000:]) ** 2) < np.mean((stale - X[1000:]) ** 2))
        True
        """
        # scikit-learn skips parameter validation on partial_fit once fitted;
        # set_params between tasks is how a schedule is set, so check anyway.
        self._validate_params()
        with unchanged_on_error(self):
            self._fit(X, y, partial=True)
        return self

    def _fit(self, X, y, partial=False):
        first = not (partial and hasattr(self, "prompt_"))  # partial_fit continues a fit
        X = validate_data(self, X, reset=first, dtype=FLOAT_DTYPES, ensure_min_samples=2)
        if y is not None:
            y = check_clean_targets(y, X)
        noise_variance = self.noise_variance
        if noise_variance is None and y is not None:
            # Z - X is the noise itself: its mean square estimates xi^2.
            noise_variance = float(np.mean(np.square(X - y, dtype=np.float64)))
        if noise_variance is None:
            raise ValueError(
                f"{type(self).__name__}.fit needs either y, the clean counterparts "
                "of X (training on the squared error), or noise_variance, the "
                "variance xi^2 of the Gaussian noise in X (training on noisy data "
                "alone by Stein's unbiased risk estimate); got neither."
            )
        n_samples = X.shape[0]
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        if not first:
            # a fresh stream per call, still reproducible from random_state
            random_state = np.random.RandomState(random_state.randint(2**31 - 1) + self.n_iter_)
        prompt_indices = choose_prompt(n_samples, self.prompt_size, random_state)
        prompt = X[prompt_indices]
        if first:
            parameters = self._initial_parameters(
                prompt.astype(np.float64), noise_variance, random_state
            )
            history = np.empty(0)
        else:
            parameters = {name: getattr(self, f"{name}_") for name in self._parameter_names()}
            history = self.history_
        optimizer_state = [dict(state) for state in getattr(self, "optimizer_state_", [])]
        if first:
            optimizer_state = []
        n_steps = -(-n_samples // self.batch_size) if partial else self.max_iter
        if n_steps > 0:
            parameters, new_history = self._train(
                X,
                y,
                noise_variance,
                prompt_indices,
                parameters,
                random_state,
                device,
                n_steps=n_steps,
                resume=optimizer_state if partial else None,
            )
            history = np.concatenate([history, new_history])

        self.prompt_ = prompt
        self.prompt_indices_ = prompt_indices
        for name, value in parameters.items():
            setattr(self, f"{name}_", value)
        self.noise_variance_ = noise_variance
        self.history_ = history
        self.n_iter_ = len(history)
        self.device_ = str(device)
        if partial:
            self.optimizer_state_ = optimizer_state
        elif hasattr(self, "optimizer_state_"):
            del self.optimizer_state_  # a fresh fit starts fresh moments

    def _train(
        self,
        X,
        y,
        noise_variance,
        prompt_indices,
        parameters,
        random_state,
        device,
        *,
        n_steps,
        resume=None,
    ):
        """Minibatch Adam in units where the prompt has RMS 1.

        The loss is the squared error against ``y`` when given, otherwise
        Stein's unbiased risk estimate ``||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)``,
        whose expectation is the squared error against the unseen clean
        points; both are divided by ``p`` (per-entry, like the MSE).
        """
        scale2 = float(np.mean(np.square(X[prompt_indices], dtype=np.float64)))
        scale2 = scale2 if scale2 > 0 else 1.0
        scale = np.sqrt(scale2)
        rescale = {
            name: scale2 if name in self._inverse_square_scaled else 1.0 for name in parameters
        }
        queries = as_tensor(X / scale, device, torch.float32)
        targets = None if y is None else as_tensor(y / scale, device, torch.float32)
        xi2 = noise_variance / scale2
        prompt = queries[as_tensor(prompt_indices, device)]
        exclude = as_tensor(prompt_positions(prompt_indices, X.shape[0]), device)
        trained = {
            name: as_tensor(value * rescale[name], device, torch.float32).requires_grad_(True)
            for name, value in parameters.items()
        }

        def loss_on(batch):
            if targets is not None:
                denoised = self._forward(trained, queries[batch], prompt, exclude[batch])
                return torch.mean((denoised - targets[batch]) ** 2)
            denoised, divergence = self._forward_and_divergence(
                trained, queries[batch], prompt, exclude[batch]
            )
            return torch.mean(stein_risk(denoised, queries[batch], divergence, xi2))

        history = minibatch_adam(
            loss_on,
            list(trained.values()),
            X.shape[0],
            max_iter=n_steps,
            learning_rate=self.learning_rate,
            batch_size=self.batch_size,
            random_state=random_state,
            device=device,
            verbose=self.verbose,
            name=type(self).__name__,
            resume=resume,
            # partial_fit is one pass by definition: no stopping, no warning
            tol=None if resume is not None else self.tol,
            n_iter_no_change=self.n_iter_no_change,
        )
        fitted = {
            name: tensor.detach().cpu().numpy().astype(np.float64) / rescale[name]
            for name, tensor in trained.items()
        }
        return fitted, history * scale2

    def transform(self, X, prompt=None):
        """Denoise ``X`` by attending over the fitted prompt, or over ``prompt``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations.
        prompt : array-like of shape (L, n_features), default=None
            Noisy observations of another task to attend over instead of the
            fitted prompt: the weights store what tasks share, the prompt
            supplies what is specific (in-context denoising, no retraining).

        Returns
        -------
        X_denoised : ndarray of shape (n_samples, n_features)
            Same dtype as ``X`` (float32 or float64).

        Notes
        -----
        Every query attends over the whole prompt, including a copy of itself
        if it is in the prompt; :meth:`fit_transform` leaves each training
        point out of its own prompt instead. Memory: ``batch_size`` queries
        at a time.

        Examples
        --------
        >>> import numpy as np
        >>> from sk_softmix import SoftmaxAttentionDenoiser
        >>> from sk_softmix.datasets import make_gaussian_mixture
        >>> Z, X, _ = make_gaussian_mixture(1000, [[3.0, 0.0], [0.0, 3.0]],
        ...                                 noise_variance=4.0, random_state=0)
        >>> denoiser = SoftmaxAttentionDenoiser(max_iter=20, random_state=0).fit(Z, X)
        >>> Z_new, X_new, _ = make_gaussian_mixture(400, [[-3.0, 0.0], [0.0, -3.0]],
        ...                                         noise_variance=4.0, random_state=1)
        >>> denoised = denoiser.transform(Z_new, prompt=Z_new)  # the new task's prompt
        >>> bool(np.mean((denoised - X_new) ** 2) < np.mean((Z_new - X_new) ** 2))
        True
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        return self._denoise(X, prompt=self._check_prompt(prompt))

    def sure(self, X, noise_variance=None):
        """Stein's unbiased risk estimate of the squared error, per sample.

        ``(||f(z) - z||^2 - p xi^2 + 2 xi^2 div f(z)) / p``, with the divergence
        in closed form; its mean over independent noisy points estimates the
        per-entry mean squared error against their unseen clean versions.
        ``X`` must not be part of the prompt (use fresh points).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Noisy observations, independent of the prompt.
        noise_variance : float, default=None
            ``xi^2``; defaults to the fitted ``noise_variance_``.

        Returns
        -------
        ndarray of shape (n_samples,)
            The per-entry estimate for each sample.

        Examples
        --------
        >>> import numpy as np
        >>> from sk_softmix import SoftmaxAttentionDenoiser
        >>> from sk_softmix.datasets import make_gaussian_mixture
        >>> means = [[3.0, 0.0], [0.0, 3.0]]
        >>> Z, _, _ = make_gaussian_mixture(500, means, noise_variance=4.0, random_state=0)
        >>> Z_test, X_test, _ = make_gaussian_mixture(2000, means, noise_variance=4.0,
        ...                                           random_state=1)
        >>> denoiser = SoftmaxAttentionDenoiser(noise_variance=4.0, max_iter=0).fit(Z)
        >>> estimate = denoiser.sure(Z_test).mean()  # needs no clean point
        >>> mse = np.mean((denoiser.transform(Z_test) - X_test) ** 2)
        >>> bool(abs(estimate - mse) < 0.1 * mse)
        True
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=FLOAT_DTYPES)
        xi2 = self.noise_variance_ if noise_variance is None else float(noise_variance)
        if not xi2 > 0:
            raise ValueError(f"noise_variance must be positive; got {xi2}.")
        parameters, prompt, queries = self._tensors(X, None)
        values = []
        with torch.no_grad():
            for start in range(0, len(X), self.batch_size):
                chunk = queries[start : start + self.batch_size]
                denoised, divergence = self._forward_and_divergence(parameters, chunk, prompt, None)
                values.append(stein_risk(denoised, chunk, divergence, xi2))
        return torch.cat(values).cpu().numpy()

    def _check_prompt(self, prompt):
        if prompt is None:
            return None
        prompt = check_array(prompt, dtype=FLOAT_DTYPES, ensure_min_samples=1, input_name="prompt")
        if prompt.shape[1] != self.n_features_in_:
            raise ValueError(
                f"prompt has {prompt.shape[1]} features, but {type(self).__name__} "
                f"is expecting {self.n_features_in_} features as input."
            )
        return prompt

    def _tensors(self, X, prompt):
        """Parameters, prompt and queries as tensors on the device, in X's dtype."""
        device = resolve_device(self.device)
        dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        parameters = {
            name: as_tensor(getattr(self, f"{name}_"), device, dtype)
            for name in self._parameter_names()
        }
        prompt = as_tensor(self.prompt_ if prompt is None else prompt, device, dtype)
        return parameters, prompt, as_tensor(X, device, dtype)

    def _denoise(self, X, exclude=None, prompt=None):
        """Forward pass in chunks of ``batch_size`` queries, in the dtype of ``X``."""
        parameters, prompt, queries = self._tensors(X, prompt)
        if exclude is not None:
            exclude = as_tensor(exclude, queries.device)
        chunks = []
        # An engine that chunks by batch_size itself gets every query at once,
        # so it can reuse one scores buffer across its chunks.
        step = X.shape[0] if self._engine_chunks_queries else self.batch_size
        with torch.no_grad():
            for start in range(0, X.shape[0], max(step, 1)):
                stop = start + step
                chunk_exclude = None if exclude is None else exclude[start:stop]
                chunks.append(self._forward(parameters, queries[start:stop], prompt, chunk_exclude))
        return torch.cat(chunks).cpu().numpy()


def stein_risk(denoised, queries, divergence, noise_variance):
    """Per-query SURE divided by ``p``: ``(||f - z||^2 - p xi^2 + 2 xi^2 div) / p``."""
    p = queries.shape[-1]
    residual = ((denoised - queries) ** 2).sum(dim=-1)
    return (residual - p * noise_variance + 2 * noise_variance * divergence) / p
