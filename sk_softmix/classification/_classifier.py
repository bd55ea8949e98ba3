"""SoftmaxAttentionClassifier: the paper's LDA head, trained in context."""

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..attention._device import resolve_device
from ..attention._threads import (
    numpy_blas_threads_for,
)
from ..training._inactive import warn_inactive
from ..training._persistence import ParametersAddedSinceMixin
from ..training._solvers import SOLVERS
from ..training._units import checked_scale
from ..training._validation import (
    FLOAT_DTYPES,
    Count,
    unchanged_on_error,
)
from ._bilinear_fit import BILINEAR_TRAINING_PARAMETERS, BilinearSettings, fit_bilinear_classifier
from ._coordinates import EffectiveCoordinatesMixin
from ._heads import (
    to_fitted_shapes,
)
from ._kernel_fit import KernelSettings, fit_kernel_classifier, uses_kernel_heads
from ._metric import METRICS
from ._prediction import AttentionClassifierMixin
from ._training_data import training_tokens


class SoftmaxAttentionClassifier(
    AttentionClassifierMixin,
    EffectiveCoordinatesMixin,
    ParametersAddedSinceMixin,
    ClassifierMixin,
    BaseEstimator,
):
    """Classify by softmax attention over a prompt of labelled examples.

    The training pairs are the prompt: token ``i`` is ``(x_i, label block)``
    and a query is ``(x, 0)``. For two classes the label block is
    ``y_i`` in {-1, +1} and the score is::

        f(x) = skip x + intercept
               + sum_heads sum_i softmax_i(x_i^T U11^T x + y_i u12^T x) (v21^T x_i + v22 y_i)

    trained with the logistic loss. The sum over heads is the paper's model,
    ``theta = (U11, u12, v21, v22)``; the skip map and intercept read the
    query itself, as a residual stream does, and hold the linear part of the
    score (``residual=False`` drops them). With ``C > 2`` classes the label
    block is the one-hot ``e_{y_i}``, ``u12`` and ``v21`` gain a class axis,
    ``v22`` is ``C x C``, the skip map is ``C x d``, and the ``C`` output
    scores are trained with cross-entropy.

    By default the score starts on the best linear (or quadratic) classifier
    for the data and adds kernel heads, a soft nearest-neighbour vote over
    the prompt, only where held-out log-loss shows they help (see Notes).

    Parameters
    ----------
    n_heads : int, default=1
        Number of softmax heads, whose scores are summed.
    head : {"auto", "kernel", "bilinear"}, default="auto"
        The heads' score of token ``i`` for query ``x``.

        - ``"bilinear"``: the paper's, ``x_i^T U11^T x + label_i^T u12 x``,
          trained from ``init`` by the ``solver``.
        - ``"kernel"``: ``x_i^T U11 x - 1/2 x_i^T W x_i`` with a key norm
          ``W = U11 = I / h^2``, that is ``-||x - x_i||^2 / (2 h^2)`` up to
          a term of the query: the head reads out ``beta`` times the
          Gaussian-kernel vote of the query's neighbours' labels, its
          bandwidth and read-out tuned on a grid by leave-one-out log-loss
          on top of the linear start, and kept only where they beat it
          (user guide, "Kernel heads: selective on real data").
        - ``"auto"``: ``"kernel"`` with ``init="auto"``, else
          ``"bilinear"`` (the paper's starts are bilinear heads).
    residual : bool, default=True
        Whether the score has the skip map and intercept. ``False`` is the
        paper's model, heads only.
    init : {"auto", "lda", "zero", "krylov", "random", "bayes"}, default="auto"
        Where training starts.

        - ``"lda"``: the linear start: the skip map and intercept are
          ``LinearDiscriminantAnalysis().fit(X, y)``'s, the heads the zero
          start, so that with ``max_iter=0`` the decision function is
          LDA's. Needs ``residual=True``.
        - ``"auto"``: with kernel heads, the linear start of lowest 5-fold
          cross-validated log-loss among LDA, shrinkage LDA, logistic
          regression, logistic regression on the features and their
          products (``"quadratic"``, up to 43 features) and QDA with
          Ledoit-Wolf covariances (``"qda"``, up to 43 features; the two
          quadratic ones compete as one, by log-loss), LDA unless another
          beats it by one standard error, among the starts whose accuracy is
          within one standard error of the most accurate's (LDA: two)
          (``linear_start_``); the heads are kept only if their
          held-out log-loss beats it by two standard errors. With bilinear
          heads, ``"lda"`` (``"zero"`` with ``residual=False``).
        - ``"zero"``: ``U11 = 0``, ``u12 = 0``, ``v22 = 0``, a Gaussian
          ``v21`` and a zero skip map (the paper's Figure 5 heuristic).
        - ``"krylov"``: the zero start with ``v21`` projected onto the
          complement of the Krylov space of the class means under the
          pooled covariance (Theorem 3.6); where that space is all of
          ``R^d`` (Proposition B.35) it warns and starts from ``"zero"``.
        - ``"random"``: every head block Gaussian.
        - ``"bayes"``: the exact population construction of Lemma B.3 (its
          one-hot analogue for ``C > 2``) from the prompt's statistics;
          where it does not exist it warns and starts from ``"lda"``.

        Trained starts that score worse on held-out pairs than the
        untrained linear start give way to it, with a warning unless
        ``init="auto"`` or ``"lda"`` (``init_`` says which was kept; user
        guide, "Linear when it can, by default").
    prompt_size : int, default=None
        ``None``: every training pair is in the prompt; an int: a random
        subset of that size (an error if it misses a class).
    n_neighbors : int, "auto" or None, default="auto"
        Kernel heads only: each query's softmax runs over its
        ``n_neighbors`` nearest prompt tokens (a tree from
        :mod:`sklearn.neighbors`), in leave-one-out tuning and prediction
        alike, instead of over the whole prompt (``None``, exact). Tokens
        beyond a few bandwidths weigh less than rounding; the share of mass
        left out is bounded and reported (``neighbour_mass_left_out_``).
        ``"auto"``: exact up to 20,000 prompt tokens, 64 neighbours above,
        so that cost grows as ``n log n`` rather than ``n^2``.
    metric : {"auto", "isotropic", "diagonal", "full"}, default="auto"
        Kernel heads only: the metric of their kernel, ``U11 = W = A^T A /
        h^2`` (user guide, "A learned metric").

        - ``"isotropic"``: ``A = I``, every standardised feature alike.
        - ``"diagonal"``: ``A = diag(s)``, a scale per feature, fitted by
          the leave-one-out log-loss of the heads on top of the linear
          score (neighbourhood components analysis's objective), by L-BFGS
          on the engine.
        - ``"full"``: ``A`` of ``metric_rank`` rows, fitted likewise.
        - ``"auto"``: the diagonal metric where, fitted on each half of the
          tuning queries and judged on the other, it beats the isotropic
          heads by two standard errors of the held-out log-loss; else
          isotropic (always where a half has fewer queries than there are
          features).
    metric_rank : int or None, default=None
        Rows of ``A`` for ``metric="full"`` (``None``, or any value above
        ``n_features``: ``n_features``); the fit starts from the leading
        principal directions below full rank. Unused by the other metrics.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`~sklearn.linear_model.LogisticRegression`: a dict ``{label:
        weight}``, or ``"balanced"`` for ``n_samples / (n_classes *
        count(label))``. Kernel heads only (see ``fit``'s ``sample_weight``).
    max_iter : int, default=300
        Iterations of the solver (loss evaluations for ``"lbfgs"``) of
        bilinear heads; 0 keeps the start (for kernel heads: the linear
        start, without the heads). Kernel heads take no iterations: their
        grid search is their training. This and ``learning_rate``,
        ``alpha``, ``solver``, ``validation_fraction``, ``tol``,
        ``n_iter_no_change`` and ``batch_size`` train the bilinear heads
        only: set to anything but their defaults (``max_iter`` to anything
        but 0) with kernel heads, they change nothing and ``fit`` warns,
        naming them.
    learning_rate : float, default=0.02
        Bilinear heads only (see ``max_iter``). Step size of ``"adam"`` (peak
        step, decayed on a cosine schedule) and ``"gd"`` (constant);
        ``"lbfgs"`` finds its own steps.
    alpha : float, default=0.01
        Bilinear heads only (see ``max_iter``). L2 penalty on the key-query
        blocks ``U11`` and ``u12``, in units where the features have
        root-mean-square 1; 0 for the unregularised dynamics of Section 3.3.
    solver : {"auto", "lbfgs", "adam", "gd"}, default="auto"
        Bilinear heads only (see ``max_iter``). Full-batch L-BFGS, Adam on
        minibatches of ``batch_size``, or full-batch gradient descent with
        a constant step; ``"auto"``: ``"lbfgs"`` while one pass over the
        training queries costs at most 2**23 query-token-feature products,
        ``"adam"`` above.
    early_stopping : "auto" or bool, default="auto"
        Hold out ``validation_fraction`` of the training pairs (stratified),
        train on the rest and keep what scores best on them: a checkpoint
        better than the final parameters by two standard errors, the
        untrained linear start unless the trained heads beat it by two.
        ``"auto"``: whenever every class keeps 2 training pairs and 1
        held-out pair, else the linear start untrained; ``False`` trains
        on every pair and keeps the final parameters (the paper's
        dynamics). Kernel heads are compared with the linear start on
        leave-one-out and out-of-fold log-loss instead; ``False`` keeps
        them without the comparison.
    validation_fraction : float, default=0.1
        Bilinear heads only (see ``max_iter``): the fraction of the training
        pairs held out by ``early_stopping``.
    tol : float, default=None
        Bilinear heads only (see ``max_iter``). The improvement a check must
        bring to count (``None``: any); without a validation set, a float
        stops once ``n_iter_no_change`` blocks of 10 iterations fail to beat
        the best by ``tol`` (with a ``ConvergenceWarning`` if ``max_iter``
        runs out), ``None`` runs exactly ``max_iter`` iterations.
    n_iter_no_change : int, default=5
        Bilinear heads only (see ``max_iter``). Checks (of 10 iterations each)
        without improvement that stop Adam and gradient descent.
    batch_size : int, default=256
        Bilinear heads only (see ``max_iter``). Training queries per Adam step
        (L-BFGS takes every training query).
    transform_batch_size : int, default=None
        Queries evaluated at once by the prediction methods. ``None``: as
        many as fill about 2**24 scores (64 MiB in float32).
    standardize : "auto" or bool, default="auto"
        Whether the model works on standardised features (``(x - mean) /
        std`` per feature). ``"auto"``: when ``X`` is far from standardised
        (a feature's mean beyond one standard deviation from 0, or standard
        deviations spread over more than a factor of 10).
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the held-out split, the prompt subset and
        the minibatches.
    verbose : int, default=0
        1: say what the fit chose and by what rule (the linear starts'
        out-of-fold scores, the heads against the start), and for bilinear
        heads show a progress bar over training (standard error) and print
        the loss about ten times; 2: the loss at every iteration.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels; ``classes_[1]`` is the positive class (+1) when binary.
    prompt_X_ : ndarray of shape (L, n_features)
        Features of the prompt, standardised when the model is
        (``(x - feature_mean_) / feature_scale_``); the parameters below,
        ``effective_coordinates`` and ``bayes_coordinates`` live in the
        same coordinates.
    feature_mean_ : ndarray of shape (n_features,)
        Centre subtracted from every feature (zeros when not standardised).
    feature_scale_ : ndarray of shape (n_features,)
        Scale dividing every centred feature: ones when not standardised
        (for kernel heads, the power of two nearest the root-mean-square).
    prompt_y_ : ndarray of shape (L,)
        Class indices (into ``classes_``) of the prompt.
    prompt_indices_ : ndarray of shape (L,)
        Rows of the training set that form the prompt. With kernel heads,
        repeated ``(x, label)`` rows are one token, held by the first of them.
    n_neighbors_ : int or None
        The number of nearest prompt tokens each query of the kernel heads
        attends to, ``None`` for all (``n_neighbors`` resolved).
    neighbour_mass_left_out_ : float
        With ``n_neighbors_``: the largest share of a kept head's softmax
        mass left out on a tuning query (each vote entry is within twice it
        of the exact head's); 0 otherwise.
    metric_ : ndarray of shape (rank, n_features)
        The metric ``A`` of kernel heads, ``U11_[h] = A^T A / h^2``
        (``metric``); the identity for isotropic and bilinear heads.
    temperature_ : float
        The read-out temperature of kernel heads (the skip map, intercept
        and read-outs are its multiples of those fitted): the one of lowest
        held-out log-loss; it changes no label. 1 for bilinear heads.
    prompt_weights_ : ndarray of shape (L,)
        Each prompt token's weight, its rows' summed ``sample_weight`` times
        ``class_weight`` (a token's score gains its ``log``).
    U11_ : ndarray of shape (n_heads, n_features, n_features)
        Feature-feature blocks of the key-query matrices: the score of token
        ``i`` for query ``x`` has the term ``x_i^T U11^T x``.
    u12_ : ndarray of shape (n_heads, n_features) or (n_heads, n_classes, n_features)
        Label-feature blocks: the score has the term ``y_i u12^T x`` (binary)
        or ``e_{y_i}^T u12 x``.
    v21_ : ndarray of shape (n_heads, n_features) or (n_heads, n_classes, n_features)
        Read-out of the token's features: ``v21^T x_i`` (binary) or
        ``v21 x_i``.
    v22_ : ndarray of shape (n_heads,) or (n_heads, n_classes, n_classes)
        Read-out of the token's label: ``v22 y_i`` or ``v22 e_{y_i}``.
    skip_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Skip map applied to the query (``residual=True`` only); at the linear
        start, LDA's ``coef_``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Constant of the score (``residual=True`` only).
    W_ : ndarray of shape (n_heads, n_features, n_features)
        Key norms: the score has the term ``-1/2 x_i^T W x_i``. Equal to
        ``U11_`` for kernel heads, zero for the paper's bilinear heads.
    init_ : str
        The start whose parameters were kept: ``"kernel"`` when kernel heads
        were kept, ``"linear"`` when ``init="auto"``'s linear start was
        (``linear_start_`` says which), ``"lda"`` when LDA's linear start
        won the validation or training never ran, else the paper's start.
    linear_start_ : str or None
        The start in the skip map: the linear classifiers ``"lda"``,
        ``"shrinkage_lda"`` or ``"logistic"``, or the quadratic ones
        ``"quadratic"`` and ``"qda"`` (always ``"lda"`` for bilinear heads);
        ``None`` with ``residual=False``.
    quadratic_ : ndarray of shape (1 or n_classes, n_features, n_features) or None
        The quadratic starts' ``Q`` (symmetric, one per score as ``skip_``):
        the decision function gains ``x^T Q x`` in the model's coordinates;
        ``None`` for every other start.
    history_ : dict of ndarray
        For the kept run of bilinear heads, per loss evaluation: ``"loss"``,
        and for two classes the effective coordinates ``"w"``, ``"b"``,
        ``"r"``, ``"s"`` and the balance ``||U11||_F^2 - ||v21||^2`` of
        each head, from the prompt's statistics (a copy of the parameters
        is kept per evaluation while ``fit`` runs).
    n_iter_ : int
        Number of training iterations run, over every start trained (1 for
        kernel heads' grid search, 0 where it did not run).
    device_ : str
        Device the model was fitted on.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``, when ``X`` has string column
        names.

    See Also
    --------
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis : The Bayes
        classifier of the model this head learns.
    sk_softmix.theory.lda.effective_coordinates : The formulas behind ``history_``.

    Notes
    -----
    On the population ``x | y = c ~ N(m_c, Gamma)`` a binary head equals
    ``f(x) = w^T x + b + r sigmoid(s0 + s^T x)`` (eq. 6-7): one head
    represents the LDA score exactly, every critical point of the effective
    risk is a global minimum (Theorem 3.1), and gradient flow from the zero
    start with ``v21(0)`` in ``K-perp`` converges exponentially (Theorem
    3.6, balanced symmetric case). This estimator trains with Adam or L-BFGS
    and a penalty from a Gaussian ``v21``, so for it fast convergence is
    observed, not proved (user guide, "Classification: the gate is
    redundant").

    A finite prompt is not the population: a head alone matches LDA only up
    to Monte Carlo error, so the skip map carries the linear score exactly
    and the heads are kept only where held-out log-loss shows they help, by
    two standard errors of the per-sample difference (log-loss has a heavy
    tail). The default's kernel heads add a key norm, ``W = U11 = I / h^2``,
    which makes the score ``-||x - x_i||^2 / (2 h^2)`` and the head a soft
    nearest-neighbour vote, tuned in closed form and held out throughout.
    The user guide gives the procedure and its measurements: "Linear when
    it can, by default" (bilinear heads), "Kernel heads: selective on real
    data" (the starts, the grid, the rules that keep the heads), "A learned
    metric", and "Practical notes" (scaling, threads, devices).

    Training runs in float32 on features divided by their root-mean-square
    (an exact symmetry of the model), each training query left out of its
    own prompt. Prediction costs ``O(n_queries L n_features n_heads)`` over
    the whole prompt, ``O(n_queries n_neighbors n_features)`` plus a tree
    query with ``n_neighbors_``.

    References
    ----------
    .. [1] Gabet, Boursier & Boyer, "Softmax Attention on Gaussian Mixtures:
       Linear When It Can, Selective When It Must", arXiv 2610.11798, 2026
       (Section 3, Lemma B.3, Theorems 3.1 and 3.6).

    Examples
    --------
    >>> import numpy as np
    >>> from sk_softmix import SoftmaxAttentionClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(2, size=200)
    >>> X = rng.normal(size=(200, 2)) + 2.0 * y[:, None]
    >>> clf = SoftmaxAttentionClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.85)  # Bayes accuracy here: 0.92
    True

    Two Gaussian classes need no selection, so the linear start (LDA) is kept:

    >>> from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    >>> lda = LinearDiscriminantAnalysis().fit(X, y)
    >>> clf.init_, clf.linear_start_
    ('linear', 'lda')
    >>> bool(np.allclose(clf.decision_function(X), lda.decision_function(X)))
    True

    Where the classes are not linearly separated the kernel heads or the
    quadratic start take over: user guide, "Kernel heads: selective on real
    data", and the gallery.
    """

    _parameter_constraints: dict = {
        "n_heads": [Count(1)],
        "head": [StrOptions({"auto", "kernel", "bilinear"})],
        "residual": ["boolean"],
        "init": [StrOptions({"auto", "lda", "zero", "krylov", "random", "bayes"})],
        "prompt_size": [Count(2), None],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "n_neighbors": [Count(1), StrOptions({"auto"}), None],
        "metric": [StrOptions(set(METRICS))],
        "metric_rank": [Count(1), None],
        "max_iter": [Count(0)],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions(set(SOLVERS))],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Count(1)],
        "batch_size": [Count(1)],
        "transform_batch_size": [Count(1), None],
        "standardize": [StrOptions({"auto"}), "boolean"],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_heads=1,
        *,
        head="auto",
        residual=True,
        init="auto",
        prompt_size=None,
        class_weight=None,
        n_neighbors="auto",
        metric="auto",
        metric_rank=None,
        max_iter=300,
        learning_rate=0.02,
        alpha=0.01,
        solver="auto",
        early_stopping="auto",
        validation_fraction=0.1,
        tol=None,
        n_iter_no_change=5,
        batch_size=256,
        transform_batch_size=None,
        standardize="auto",
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.n_heads = n_heads
        self.head = head
        self.residual = residual
        self.init = init
        self.prompt_size = prompt_size
        self.class_weight = class_weight
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.metric_rank = metric_rank
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.solver = solver
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.transform_batch_size = transform_batch_size
        self.standardize = standardize
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # -- public API ------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Make the training pairs the prompt and train the heads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points; they (or a random ``prompt_size`` of them), with
            their labels, become the prompt.
        y : array-like of shape (n_samples,)
            Class labels (any type scikit-learn accepts).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training pairs, as multiplicities:
            ``sample_weight=k`` on a row gives the model that ``k`` copies of
            it fit (for discrete features, whose repeated rows are taken as
            observations, approximately: see the user guide). A token's
            weight enters its score as ``log w_i`` (so the vote weighs it
            ``w_i`` times), and the linear start's choice,
            the heads' bandwidths and read-outs and the comparison with the
            linear start use weighted log-losses. Rows of weight 0 are left
            out. Only relative weights count. Kernel heads only: bilinear
            heads (``head="bilinear"``) raise a ``ValueError`` for unequal
            weights.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        with unchanged_on_error(self), numpy_blas_threads_for(X):
            self._fit(X, y, sample_weight)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    # -- fitting ---------------------------------------------------------------

    def _fit(self, X, y, sample_weight=None):
        X, y = validate_data(self, X, y, dtype=FLOAT_DTYPES, ensure_min_samples=2)
        checked_scale(X, type(self).__name__)
        check_classification_targets(y)
        kernel = uses_kernel_heads(self.head, self.init, self.residual)
        if kernel:
            warn_inactive(
                self,
                BILINEAR_TRAINING_PARAMETERS,
                "kernel heads are tuned on a grid of bandwidths in closed form, not "
                "trained; these parameters train head='bilinear' (max_iter=0 turns the "
                "kernel heads off).",
                stacklevel=5,
            )
        tokens = training_tokens(
            X,
            y,
            sample_weight,
            class_weight=self.class_weight,
            kernel=kernel,
            standardize=self.standardize,
            warn_unstandardised=self.max_iter > 0,
        )
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        n_classes = len(tokens.classes)
        if kernel:
            fit = fit_kernel_classifier(
                tokens.X,
                tokens.labels,
                n_classes,
                KernelSettings.of(self.get_params()),
                random_state,
                device,
                tokens.weights,
                tokens.left_in,
                tokens.counts,
            )
            self._set_fitted(
                tokens,
                fit.parameters,
                fit.prompt_indices,
                device,
                init="kernel" if fit.kept else ("linear" if self.init == "auto" else "lda"),
                linear_start=fit.linear_start,
                n_iter=int(self.max_iter > 0),  # the grid search, one pass
                quadratic=fit.quadratic,
                n_neighbors=fit.n_neighbors,
                mass_left_out=fit.mass_left_out,
                temperature=fit.temperature,
                metric=fit.metric,
            )
            return
        settings = BilinearSettings.of(self.get_params())
        fit = fit_bilinear_classifier(
            tokens.X, tokens.labels, n_classes, settings, random_state, device
        )
        self._set_fitted(
            tokens,
            fit.parameters,
            fit.prompt_indices,
            device,
            init=fit.init,
            linear_start="lda" if self.residual else None,
            n_iter=fit.n_iter,
            history=fit.history,
        )

    def _set_fitted(
        self,
        tokens,
        parameters,
        prompt_indices,
        device,
        *,
        init,
        linear_start,
        n_iter,
        history=None,
        quadratic=None,
        n_neighbors=None,
        mass_left_out=0.0,
        temperature=1.0,
        metric=None,
    ):
        """Every fitted attribute, in one place: the heads' parameters, the
        classes and coordinates, the prompt (the tokens at
        ``prompt_indices``), and how the fit chose them."""
        for name, value in parameters.items():
            setattr(self, f"{name}_", to_fitted_shapes(name, value, len(tokens.classes)))
        self.classes_ = tokens.classes
        self.feature_mean_, self.feature_scale_ = tokens.feature_mean, tokens.feature_scale
        self.prompt_X_ = tokens.X[prompt_indices]
        self.prompt_y_ = tokens.labels[prompt_indices]
        rows, weights = tokens.rows, tokens.weights
        self.prompt_indices_ = prompt_indices if rows is None else rows[prompt_indices]
        self.prompt_weights_ = (
            np.ones(len(prompt_indices)) if weights is None else weights[prompt_indices]
        )
        self.device_ = str(device)
        self.init_ = init
        self.linear_start_ = linear_start
        self.n_iter_ = n_iter
        self.history_ = {"loss": np.empty(0)} if history is None else history
        self.quadratic_ = quadratic
        self.n_neighbors_ = n_neighbors
        self.neighbour_mass_left_out_ = mass_left_out
        self.temperature_ = temperature
        self.metric_ = np.eye(tokens.X.shape[1]) if metric is None else metric
