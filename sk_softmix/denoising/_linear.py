"""LinearAttentionDenoiser: stacked linear-attention layers over a noisy prompt."""

import numpy as np
import torch

from ..attention._kernels import queries_per_chunk
from ..attention._linear import one_layer_trace, stacked_linear_attention, stacked_linear_maps
from ..theory.affine_maps import best_linear_map
from ..training._units import rms_scale
from ..training._validation import Count
from ._base import AttentionDenoiserBase


class LinearAttentionDenoiser(AttentionDenoiserBase):
    """Denoise points by linear attention over a prompt of noisy observations.

    Each layer maps every token ``h`` (the prompt's and the query's) to::

        h + sum_heads (1/L) sum_i (h_i^T U h) V h_i      (residual=True)

    or the sum alone (``residual=False``); the query never enters the
    prompt. The output is the query after the last layer.

    Parameters
    ----------
    n_heads : int, default=1
        Heads per layer. Within one layer several linear heads add nothing
        (their sum is again ``V Sigma U``), so one is the default.
    n_layers : int, default=1
        Number of stacked linear-attention layers.
    residual : bool, default=True
        Whether each layer adds its input back.
    noise_variance : float, default=None
        Variance ``xi^2`` of the noise in ``X``, used by the starts and by
        training on Stein's unbiased risk estimate when ``fit`` gets no
        ``y``; estimated from ``X - y`` when omitted and ``y`` is given.
    init : {"auto", "linear", "bayes", "random"}, default="auto"
        ``"linear"``: the best linear map ``z -> M z`` of the training points
        (:func:`~sk_softmix.theory.affine_maps.best_linear_map`: least squares to
        ``y`` without an intercept, or without ``y``
        ``M = (Sigma - xi^2 I)_+ Sigma^{-1}``, ``Sigma`` their second-moment
        matrix) written as attention (``U = Sigma^{-1}`` over the prompt),
        later layers the identity; with ``max_iter=0`` ``transform`` is that
        map. ``"bayes"``: the same from ``noise_variance`` even when ``y`` is
        given. ``"auto"``: train from both (one start without ``y``, where
        they coincide) and keep the better on held-out points, or the
        untrained linear start if it scores lower still (``early_stopping``).
        ``"random"``: small random heads.
    prompt_size : int, default=None
        ``None``: every training point is in the prompt; an int: a random
        subset of that size.
    max_iter : int, default=200
        Iterations of the solver (loss evaluations for L-BFGS); 0 keeps the
        start.
    learning_rate : float, default=0.01
        Peak Adam step size, decayed to zero on a cosine schedule by ``fit``;
        ``partial_fit`` decays it as ``learning_rate / (1 + t / 300)**2``.
    solver : {"auto", "lbfgs", "adam"}, default="auto"
        As in :class:`SoftmaxAttentionDenoiser`: full-batch L-BFGS while a
        pass over the training queries is cheap, Adam above.
    early_stopping : "auto" or bool, default="auto"
        As in :class:`SoftmaxAttentionDenoiser`: hold out
        ``validation_fraction`` of the points and keep the start that scores
        best on them (squared error, or Stein's unbiased risk estimate
        without ``y``), the untrained linear start unless a trained one
        scores lower.
    validation_fraction : float, default=0.1
        Fraction of the training points held out by ``early_stopping``.
    tol : float, default=None
        Early stopping on the training loss, as in
        :class:`SoftmaxAttentionDenoiser`: ``None`` runs exactly ``max_iter``
        iterations and never warns; a float averages the training loss over
        blocks of 10 iterations and stops once ``n_iter_no_change`` blocks in
        a row fail to beat the best block by ``tol``, emitting a
        ``ConvergenceWarning`` if ``max_iter`` runs out first. The loss is in
        training units: per-entry squared error (or SURE) of data rescaled
        to unit root-mean-square. ``partial_fit`` ignores it.
    n_iter_no_change : int, default=5
        Blocks of 10 iterations without an improvement of ``tol`` that stop
        training; used only with ``tol``.
    batch_size : int, default=1024
        Training queries per Adam step (L-BFGS takes every training query).
    transform_batch_size : int, default=None
        Queries evaluated at once by ``transform``, ``fit_transform``,
        ``score`` and ``sure``. ``None``: as many as keep about 2**24 floats
        of the ``p x p`` maps that leaving points out of their prompt forms
        (one per query, head and layer).
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the prompt subset and the minibatches.
    verbose : int, default=0
        Print the training loss about ten times (1) or every iteration (2).

    Attributes
    ----------
    prompt_ : ndarray of shape (L, n_features)
        The prompt.
    prompt_indices_ : ndarray of shape (L,)
        Rows of the training ``X`` that form the prompt.
    U_ : ndarray of shape (n_layers, n_heads, n_features, n_features)
        Interaction matrices.
    V_ : ndarray of shape (n_layers, n_heads, n_features, n_features)
        Value matrices.
    noise_variance_ : float
        The noise variance used by the initialisation (given or estimated).
    init_ : str
        The start whose parameters were kept.
    history_ : ndarray of shape (`n_iter_`,)
        Training loss of the kept run per iteration, per entry and in the
        data's units (the square of ``X``'s, whatever scale training ran
        at): the minibatch mean squared error against ``y``, or its SURE
        estimate when trained without ``y``.
    n_iter_ : int
        Number of training iterations run, over every start trained (and
        over every ``partial_fit`` call).
    device_ : str
        Device the model was fitted on.
    optimizer_state_ : list of dict
        Adam moments carried from one ``partial_fit`` call to the next; only
        after ``partial_fit``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column names.

    See Also
    --------
    SoftmaxAttentionDenoiser : Softmax heads, which can gate per query.
    GaussianMixtureDenoiser : Plug-in Bayes denoiser from a fitted mixture.

    Notes
    -----
    Every layer multiplies every token by the same matrix
    ``M_l = [I +] sum_h V_h Sigma_l U_h``, ``Sigma_l`` the second-moment
    matrix of the prompt at layer ``l``; the whole stack is therefore the
    linear map ``z -> M_K ... M_1 z`` for a given prompt. Its risk is bounded
    below by that of the best linear estimator (:func:`~sk_softmix.theory.risk.best_linear_risk`),
    strictly above the Bayes risk on a mixture of two or more separated
    components, however many layers are stacked: this is the paper's point
    that a mixture needs the softmax gate (Section 4).

    Having no constant, the stack tends to 0, not to the data's mean, when
    ``noise_variance`` exceeds the data's variance per entry (it then warns
    and keeps the untrained clipped linear map); see "Degenerate and
    misspecified data" in the user guide for scales, constant features and
    small samples.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798, 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import LinearAttentionDenoiser
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> Z = X + rng.normal(size=X.shape)
    >>> denoiser = LinearAttentionDenoiser(noise_variance=1.0, max_iter=0).fit(Z)
    >>> bool(np.mean((denoiser.transform(Z) - X) ** 2) < np.mean((Z - X) ** 2))
    True

    On a mixture, even three trained layers stay near the best linear risk,
    about 1.5 times the Bayes risk on the paper's Figure 2 task:

    >>> from sk_softmix.datasets import make_gaussian_mixture
    >>> from sk_softmix.theory.risk import bayes_risk, best_linear_risk
    >>> means = [[3.0, 0.0], [0.0, 3.0]]
    >>> Z, X, _ = make_gaussian_mixture(2000, means, noise_variance=4.0, random_state=0)
    >>> Z_test, X_test, _ = make_gaussian_mixture(2000, means, noise_variance=4.0,
    ...                                           random_state=1)
    >>> deep = LinearAttentionDenoiser(n_layers=3, max_iter=100, random_state=0).fit(Z, X)
    >>> mse = -deep.score(Z_test, X_test)
    >>> round(best_linear_risk(means, noise_variance=4.0), 2)
    2.32
    >>> bool(2.2 < mse and mse > 1.4 * bayes_risk(means, noise_variance=4.0))
    True
    """

    _parameter_constraints: dict = {
        **AttentionDenoiserBase._parameter_constraints,
        "n_layers": [Count(1)],
    }

    def __init__(
        self,
        n_heads=1,
        *,
        n_layers=1,
        residual=True,
        noise_variance=None,
        init="auto",
        prompt_size=None,
        max_iter=200,
        learning_rate=0.01,
        solver="auto",
        early_stopping="auto",
        validation_fraction=0.1,
        tol=None,
        n_iter_no_change=5,
        batch_size=1024,
        transform_batch_size=None,
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.residual = residual
        self.noise_variance = noise_variance
        self.init = init
        self.prompt_size = prompt_size
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.solver = solver
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.transform_batch_size = transform_batch_size
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _parameter_names(self):
        return ("U", "V")

    def _transform_chunk(self, prompt_length, n_features, divergence=False):
        # a linear stack forms no scores; leaving points out of the prompt
        # (fit_transform) it holds one p x p map per query, head and layer
        per_query = self.n_layers * self.n_heads * n_features**2
        return queries_per_chunk(self.transform_batch_size, 1, per_query)

    def _denoise(self, X, exclude=None, prompt=None):
        # The stack's map multiplies U (about 1/|X|^2) by the prompt's second
        # moment (about |X|^2): in float32 one underflows and the other
        # overflows from |X| ~ 1e19, giving 0 * inf. The map costs O(p^3), so
        # it is formed in float64 whatever the input's dtype.
        if prompt is not None:
            prompt = prompt.astype(np.float64, copy=False)
        denoised = super()._denoise(X.astype(np.float64, copy=False), exclude, prompt)
        return denoised.astype(X.dtype, copy=False)

    def _forward(self, parameters, queries, prompt, exclude):
        return stacked_linear_attention(
            queries,
            prompt,
            parameters["U"],
            parameters["V"],
            residual=self.residual,
            exclude=exclude,
        )

    def _forward_and_divergence(self, parameters, queries, prompt, exclude):
        # The stack is the linear map M = M_K ... M_1: its divergence is tr(M).
        if self.n_layers == 1 and exclude is not None:
            # one layer: tr(M) per query in closed form, no p x p map per query
            divergence = one_layer_trace(
                prompt, parameters["U"], parameters["V"], residual=self.residual, exclude=exclude
            )
            return self._forward(parameters, queries, prompt, exclude), divergence
        maps = stacked_linear_maps(
            prompt, parameters["U"], parameters["V"], residual=self.residual, exclude=exclude
        )
        denoised = (maps @ queries.unsqueeze(-1)).squeeze(-1)
        divergence = torch.diagonal(maps, dim1=-2, dim2=-1).sum(-1).expand(len(queries))
        return denoised, divergence

    _ARCHITECTURE = ("n_heads", "n_layers", "residual")

    # no selective start to meta-train from: the linear one serves partial_fit
    _meta_training_start = "linear"

    def _auto_starts(self):
        return ("linear", "bayes")  # one map without clean targets: see _starts

    def _starts(self, train_X, train_y, prompt, noise_variance, random_state, names, left_out):
        starts = {}
        for name in names:
            if name == "random":
                starts[name] = self._random_layers(prompt, random_state)
            elif name == "bayes" and train_y is None and self.init == "auto":
                continue  # without clean targets "linear" is this very map already
            else:
                clean = train_y if name == "linear" else None
                starts[name] = self._layers_for(
                    best_linear_map(train_X, clean, noise_variance), prompt
                )
        return starts

    def _random_layers(self, prompt, random_state):
        n_features = prompt.shape[1]
        size = (self.n_layers, self.n_heads, n_features, n_features)
        scale = rms_scale(prompt)
        U = random_state.normal(scale=0.5 / np.sqrt(n_features), size=size) / scale / scale
        V = random_state.normal(scale=0.5 / np.sqrt(n_features), size=size)
        return {"U": U, "V": V}

    def _layers_for(self, linear_map, prompt):
        """Layer one applies ``linear_map`` (``U = Sigma^{-1}``), later layers the identity."""
        n_features = prompt.shape[1]
        size = (self.n_layers, self.n_heads, n_features, n_features)
        U, V = np.zeros(size), np.zeros(size)
        identity = np.eye(n_features)
        second_moment = prompt.T @ prompt / prompt.shape[0]
        # V Sigma U = V with U = Sigma^{-1}, on the range of Sigma
        U[0, 0] = np.linalg.pinv(second_moment, hermitian=True)
        V[0, 0] = linear_map - identity if self.residual else linear_map
        # ... and identity layers after it (zero heads when residual).
        if not self.residual:
            second_moment = linear_map @ second_moment @ linear_map.T
            for layer in range(1, self.n_layers):
                U[layer, 0] = np.linalg.pinv(second_moment, hermitian=True)
                V[layer, 0] = identity
        return {"U": U, "V": V}
