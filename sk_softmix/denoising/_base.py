"""What the softmax- and linear-attention denoisers share: fitting and a
chunked forward pass ``f(queries, prompt)``.

A subclass supplies its parameters (``_parameter_names``), its starts
(``_starts``) and its forward pass (``_forward``); this module turns them into
``fit``, ``fit_transform``, ``transform`` and ``sure``, with the training
losses in ``_objective``. ``MetaTrainingMixin`` adds ``partial_fit`` and
``DenoiserMixin`` ``predict`` and ``score``.
"""

from numbers import Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..attention._device import as_tensor, resolve_device
from ..attention._kernels import queries_per_chunk
from ..attention._threads import numpy_blas_threads_for, one_cpu_thread, predict_on_threads
from ..training._persistence import ParametersAddedSinceMixin
from ..training._selection import Selection, fit_starts
from ..training._sequence import SequencePlan, fit_with_linear_fallback
from ..training._solvers import TrainingSettings, resolve_solver
from ..training._units import checked_scale, rms_scale
from ..training._validation import (
    FLOAT_DTYPES,
    Count,
    choose_prompt,
    clean_targets,
    describe_ignored_target,
    noisy_variance,
    prompt_positions,
    torch_dtype_of,
    unchanged_on_error,
    warn_if_misspecified,
)
from ._few_points import (
    sure_without_minimum,
    warn_if_affine_overfits,
    warn_if_fewer_numbers_than_parameters,
)
from ._meta_training import MetaTrainingMixin
from ._mixin import DenoiserMixin
from ._model import DenoiserModel
from ._objective import in_chunks, stein_risk, training_objective

# Each start trains to its end (Adam's cosine schedule,
# L-BFGS's convergence test) and keeps its final parameters: the squared
# error has a finite minimiser, while the best of many checks of a small
# held-out set is optimistic and a stall stops Adam with its step still
# high. On the Figure 2 task (2,000 points, 200 held out) the best
# checkpoint, even required to beat the final parameters by one standard
# error, was an early L-BFGS iterate 1.8% above Bayes, the final one 0.5%;
# with 5,000 points and two plain heads, stopping Adam on the stall left it
# 3.1% above, running its 200 steps 2.2%.
#
# A trained start replaces the untrained linear start when its held-out
# loss is lower at all: the squared error, or SURE, an unbiased estimate of
# it. SURE of a squared error cannot be negative in expectation, and a start
# whose held-out SURE is (selection.floor) is not kept: one residual head
# on three components of norms 0, 5 and 7 (1,600 points) trained to a
# negative training SURE, scored -0.03 on 160 held-out rows against the
# Wiener map's 0.06, and was 3.4 times its error on new points. A margin of
# one standard error caught it too, but gave up the trained start's 3% gain
# on the paper's Figure 2 task (20,000 points), about half a standard error
# of 2,000 held-out rows' SURE.


def _selection(by_sure: bool, by_default: bool) -> Selection:
    """How a fit uses its held-out rows (``Selection``). With ``init="auto"``
    (``by_default``) the cheap test first: a start still more than 10% above
    the untrained linear start a fifth of the way through its run stops
    there (``TrialCheck``); on noisy digits, where no start ever beat the
    Wiener map, the fit took a quarter of the time."""
    return Selection(
        start=0.0,
        checkpoint=None,
        trial=0.2 if by_default else None,
        floor=0.0 if by_sure else None,
    )


class AttentionDenoiserBase(
    ParametersAddedSinceMixin, MetaTrainingMixin, DenoiserMixin, BaseEstimator
):
    """Base class of the attention denoisers; not for direct use."""

    _parameter_constraints: dict = {
        "n_heads": [Count(1)],
        "residual": ["boolean"],
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "init": [StrOptions({"auto", "linear", "bayes", "random"})],
        "prompt_size": [Count(2), None],
        "max_iter": [Count(0)],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions({"auto", "lbfgs", "adam"})],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Count(1)],
        "batch_size": [Count(1)],
        "transform_batch_size": [Count(1), None],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # How each parameter scales with the data: training runs on data divided by
    # its root-mean-square ``scale``, where a parameter is ``value * scale**power``
    # (interaction matrices multiply two tokens, so U scales as scale^2).
    _SCALE_POWER = {"U": 2, "V": 0, "skip": 0}

    # The hyperparameters that shape the fitted parameters: partial_fit cannot
    # continue a fit after one of them changes.
    _ARCHITECTURE = ("n_heads", "residual")

    # Whether ``_forward`` evaluates ``_transform_chunk`` queries at a time by itself.
    _engine_chunks_queries = False

    def _fused_scores(self, device, n_queries, prompt_length, leave_one_out) -> int | None:
        """Scores one fused-kernel call of ``_forward`` computes for these
        queries, or None when ``_forward`` does not run on the fused kernel
        (its threads are then chosen by timing chunks)."""
        return None

    def _parameter_names(self) -> tuple:
        """Names of the fitted parameters (``U``, ``V``, maybe ``skip``)."""
        raise NotImplementedError

    def _auto_starts(self) -> tuple:
        """The starts ``init="auto"`` trains from, in order."""
        raise NotImplementedError

    def _starts(
        self, train_X, train_y, prompt, noise_variance, random_state, names, left_out
    ) -> dict:
        """Start name -> parameters, NumPy float64 in the data's units.

        ``"linear"``, when present, is the linear start: the untrained
        fallback the other starts must beat on validation. ``left_out``
        gives each training row's row in the prompt, ``-1`` where it is not
        in it (``prompt_positions``), for starts that score themselves on
        the training rows.
        """
        raise NotImplementedError

    def _uses_kernel_heads(self, y, partial, first) -> bool:
        """Whether ``fit`` fits kernel heads over the clean targets ``y``
        (``_fit_kernel_heads``) instead of training from the starts."""
        return False

    def _fit_kernel_heads(self, X, y, noise_variance, random_state, device):
        raise NotImplementedError

    def _start_names(self) -> tuple:
        return self._auto_starts() if self.init == "auto" else (self.init,)

    def _bilinear_parameter_names(self) -> tuple:
        """Names of the parameters that training moves (every one by default)."""
        return self._parameter_names()

    def _model(self) -> DenoiserModel:
        """The forward maps and parameters the training functions read."""
        return DenoiserModel(
            forward=self._forward,
            forward_and_divergence=self._forward_and_divergence,
            parameter_names=self._bilinear_parameter_names(),
            scale_power=self._SCALE_POWER,
            n_heads=self.n_heads,
            residual=self.residual,
            batch_size=self.batch_size,
            key_bias=getattr(self, "key_bias", None),
            n_components=getattr(self, "n_components", 0),
        )

    def _has_linear_start(self) -> bool:
        """Whether the model can represent the linear start."""
        return True

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
            of that error, which needs ``noise_variance``. A ``y`` of any
            other shape (a Pipeline's class labels) is a later step's target
            and is ignored, as scikit-learn transformers ignore ``y``.

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
        >>> denoiser = denoiser.fit(Z)  # trained by SURE: no clean y
        >>> 0 < denoiser.n_iter_ <= 2 * 30  # two starts, 30 iterations at most each
        True
        >>> bool(np.mean((denoiser.transform(Z) - X) ** 2) < np.mean((Z - X) ** 2))
        True
        """
        with unchanged_on_error(self), numpy_blas_threads_for(X):
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
            Clean counterparts of ``X``, used for training only; any other
            shape is a later step's target and is ignored (see :meth:`fit`).
            In a Pipeline, this is how training points are denoised: each
            left out of its own prompt, as test points are.

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
            A model with kernel heads (``head_ == "kernel"``) attends over
            clean points: its prompt must hold clean points too.

        Returns
        -------
        X_denoised : ndarray of shape (n_samples, n_features)
            Same dtype as ``X`` (float32 or float64).

        Notes
        -----
        Every query attends over the whole prompt, including a copy of itself
        if it is in the prompt; :meth:`fit_transform` leaves each training
        point out of its own prompt instead. Memory: ``transform_batch_size``
        queries at a time (by default, a block of about 2**24 scores).

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
        if not (np.isfinite(xi2) and xi2 > 0):
            raise ValueError(f"noise_variance must be positive and finite; got {xi2}.")
        device = resolve_device(self.device)
        with torch.no_grad(), one_cpu_thread(device):
            parameters, prompt, queries = self._tensors(X, None)
        size = self._transform_chunk(len(prompt), X.shape[1], divergence=True)

        def risk(rows):
            chunk = queries[rows]
            denoised, divergence = self._forward_and_divergence(parameters, chunk, prompt, None)
            return stein_risk(denoised, chunk, divergence, xi2)

        def risks(start, stop):
            return in_chunks(start, stop, size, risk)

        with torch.no_grad():
            return predict_on_threads(device, len(X), size, risks).cpu().numpy()

    # -- internals -------------------------------------------------------------

    def _fit(self, X, y, partial=False):
        first = not (partial and hasattr(self, "prompt_"))  # partial_fit continues a fit
        X = validate_data(self, X, reset=first, dtype=FLOAT_DTYPES, ensure_min_samples=2)
        name = type(self).__name__
        checked_scale(X, name)
        given, y = y, clean_targets(y, X)
        if y is not None and not partial:
            warn_if_affine_overfits(X, y, name, stacklevel=5)
        noise_variance = self.noise_variance
        if noise_variance is None and y is not None:
            # Z - X is the noise itself: its mean square estimates xi^2.
            noise_variance = float(np.mean(np.square(X - y, dtype=np.float64)))
        if noise_variance is None:
            raise ValueError(
                f"{name}.fit needs either y, the clean counterparts of X with X's "
                "shape (training on the squared error), or noise_variance, the "
                "variance xi^2 of the Gaussian noise in X (training on noisy data "
                f"alone by Stein's unbiased risk estimate); got "
                f"{describe_ignored_target(given)} and noise_variance=None."
            )
        # with clean targets training minimises the squared error, whatever xi^2
        misspecified = (
            warn_if_misspecified(noisy_variance(X), noise_variance, name) if y is None else None
        )
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        if self._uses_kernel_heads(y, partial, first):
            self._fit_kernel_heads(X, y, noise_variance, random_state, device)
            return
        if partial:
            self._partial_fit(X, y, noise_variance, first, random_state, device)
            return
        if y is None and misspecified is None and self.max_iter > 0:
            misspecified = sure_without_minimum(X, noise_variance, name, stacklevel=5)
        if misspecified is not None:
            # no signal to find (or none float32 can see, or no objective to
            # train on): the clipped plug-in answer, the linear start, untrained
            self._fit_untrained(X, y, noise_variance, random_state, device)
            return
        # Trained starts fall back on the untrained linear start when it
        # validates better: by choice with init="auto", and with a warning for
        # a construction or random start that training left worse than it
        # (SURE on a small prompt can overfit without end).
        with_reference = self.init != "linear" and self._has_linear_start()
        plan = SequencePlan(
            estimator=name,
            init=self.init,
            start_names=self._start_names(),
            reference="linear" if with_reference else None,
            by_default=with_reference and self.init == "auto",
            max_iter=self.max_iter,
            early_stopping=self.early_stopping,
            validation_fraction=self.validation_fraction,
            prompt_size=self.prompt_size,
        )

        def choose_prompt_rows(rows, random_state):
            return choose_prompt(X.shape[0], self.prompt_size, random_state, rows)

        checked = []

        def build_starts(rows, prompt_rows, names, seed):
            starts = self._starts(
                X[rows].astype(np.float64),
                None if y is None else y[rows].astype(np.float64),
                X[prompt_rows].astype(np.float64),
                noise_variance,
                np.random.RandomState(seed),
                names,
                prompt_positions(prompt_rows, X.shape[0])[rows],
            )
            if self.max_iter > 0 and not checked:  # once, on the first starts built
                checked.append(True)
                n_parameters = sum(value.size for value in next(iter(starts.values())).values())
                warn_if_fewer_numbers_than_parameters(X, n_parameters, name, stacklevel=7)
            return starts

        def train(starts, reference, prompt_indices, validation_rows):
            outcome = self._train(
                X,
                y,
                noise_variance,
                prompt_indices,
                validation_rows,
                starts,
                reference,
                random_state,
                device,
            )
            return outcome, outcome.history

        outcome = fit_with_linear_fallback(
            X.shape[0],
            plan,
            random_state,
            choose_prompt=choose_prompt_rows,
            build_starts=build_starts,
            train=train,
            empty_history=np.empty(0),
            stacklevel=5,  # the user's call of fit
        )
        self._set_fitted(
            X[outcome.prompt_indices],
            outcome.prompt_indices,
            outcome.parameters,
            noise_variance,
            device,
            init=outcome.start,
            n_iter=outcome.n_iter,
            history=outcome.history,
        )

    def _fit_untrained(self, X, y, noise_variance, random_state, device):
        """The linear start (the construction without one) on every row, untrained."""
        start = "linear" if self._has_linear_start() else "bayes"
        prompt_indices = choose_prompt(X.shape[0], self.prompt_size, random_state)
        parameters = self._starts(
            X.astype(np.float64),
            None if y is None else y.astype(np.float64),
            X[prompt_indices].astype(np.float64),
            noise_variance,
            random_state,
            (start,),
            prompt_positions(prompt_indices, X.shape[0]),
        )[start]
        self._set_fitted(
            X[prompt_indices], prompt_indices, parameters, noise_variance, device, init=start
        )

    def _set_fitted(
        self,
        prompt,
        prompt_indices,
        parameters,
        noise_variance,
        device,
        *,
        init,
        n_iter=0,
        history=None,
        optimizer_state=None,
    ):
        """Every fitted attribute, in one place: the prompt's tokens (rows
        ``prompt_indices`` of the training set), the parameters, the start
        kept and the training record; ``optimizer_state`` is ``partial_fit``'s
        Adam moments (``None``: a fresh fit, which starts fresh moments)."""
        self._architecture = {name: getattr(self, name) for name in self._ARCHITECTURE}
        self.prompt_ = prompt
        self.prompt_indices_ = prompt_indices
        for name, value in parameters.items():
            setattr(self, f"{name}_", value)
        self.noise_variance_ = noise_variance
        self.history_ = np.empty(0) if history is None else history
        self.device_ = str(device)
        self.init_ = init
        self.n_iter_ = n_iter
        if optimizer_state is not None:
            self.optimizer_state_ = optimizer_state
        elif hasattr(self, "optimizer_state_"):
            del self.optimizer_state_

    def _train(
        self,
        X,
        y,
        noise_variance,
        prompt_indices,
        validation_rows,
        starts,
        reference,
        random_state,
        device,
    ):
        """Train from every start, keep the one that validates best (``fit_starts``)."""
        scale = rms_scale(X[prompt_indices])
        n_queries = X.shape[0] - (0 if validation_rows is None else len(validation_rows))
        solver = resolve_solver(
            self.solver, n_queries, len(prompt_indices), self.n_heads, X.shape[1]
        )
        objective = training_objective(
            self._model(), X, y, noise_variance, prompt_indices, validation_rows, scale, device
        )
        outcome = fit_starts(
            starts,
            reference,
            lambda name, parameters: objective(parameters),
            TrainingSettings.of(self.get_params(), solver, type(self).__name__),
            scale=scale,
            powers=self._SCALE_POWER,
            n_queries=n_queries,
            validate=validation_rows is not None,
            selection=_selection(y is None, self.init == "auto"),
            random_state=random_state,
            device=device,
        )
        outcome.history = outcome.history * scale**2  # per-entry loss in the data's units
        return outcome

    def _stein_risks(self, X):
        return self.sure(X)

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
        dtype = torch_dtype_of(X)
        parameters = {
            name: as_tensor(getattr(self, f"{name}_"), device, dtype)
            for name in self._parameter_names()
        }
        prompt = as_tensor(self.prompt_ if prompt is None else prompt, device, dtype)
        return parameters, prompt, as_tensor(X, device, dtype)

    def _transform_chunk(self, prompt_length, n_features, divergence=False):
        """Queries evaluated at once after training: ``transform_batch_size``,
        or as many as keep one block of about 2**24 floats per chunk (the
        scores, and with ``divergence`` the weighted covariances, ``p x p``
        per query and head)."""
        per_query = self.n_heads * (prompt_length + (n_features**2 if divergence else 0))
        return queries_per_chunk(self.transform_batch_size, 1, per_query)

    def _denoise(self, X, exclude=None, prompt=None):
        """Forward pass in chunks of queries (``_transform_chunk``), in the dtype of ``X``."""
        device = resolve_device(self.device)
        with torch.no_grad(), one_cpu_thread(device):
            parameters, prompt, queries = self._tensors(X, prompt)
            if exclude is not None:
                exclude = as_tensor(exclude, queries.device)
        size = self._transform_chunk(prompt.shape[0], X.shape[1])
        # An engine that chunks queries itself gets every query of a part at
        # once, so it can reuse one scores buffer across its chunks.
        step = None if self._engine_chunks_queries else size

        def forward(rows):
            left_out = None if exclude is None else exclude[rows]
            return self._forward(parameters, queries[rows], prompt, left_out)

        def denoise(start, stop):
            return in_chunks(start, stop, step or stop - start, forward)

        fused_scores = self._fused_scores(device, X.shape[0], prompt.shape[0], exclude is not None)
        with torch.no_grad():
            return predict_on_threads(device, X.shape[0], size, denoise, fused_scores).cpu().numpy()
