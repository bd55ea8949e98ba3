"""SoftmaxAttentionClassifier: the paper's LDA head, trained in context."""

import warnings
from numbers import Real

import numpy as np
import torch
from scipy.special import log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..attention._device import as_tensor, resolve_device
from ..attention._fused import fused_kernel_available
from ..attention._kernels import queries_per_chunk
from ..attention._threads import (
    numpy_blas_threads_for,
    one_cpu_thread,
    predict_on_threads,
)
from ..theory.lda import class_statistics, lda_coordinates
from ..training._selection import validation_split
from ..training._solvers import SOLVERS
from ..training._units import checked_scale
from ..training._validation import (
    FLOAT_DTYPES,
    Count,
    choose_prompt,
    torch_dtype_of,
    unchanged_on_error,
    unstandardised_features,
)
from ._heads import (
    classifier_scores,
    classifier_tokens,
    from_fitted_shapes,
    heads_coordinates,
    to_fitted_shapes,
)
from ._objective import train_heads
from ._starts import classifier_starts


class SoftmaxAttentionClassifier(ClassifierMixin, BaseEstimator):
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

    By default (``init="auto"``) the classifier starts exactly on
    ``LinearDiscriminantAnalysis``, its linear special case, and keeps what
    training adds only where a held-out part of the training data shows it
    helps: linear when it can, selective when it must (see Notes).

    Parameters
    ----------
    n_heads : int, default=1
        Number of softmax heads, whose scores are summed.
    residual : bool, default=True
        Whether the score has the skip map and intercept. ``False`` is the
        paper's model, heads only.
    init : {"auto", "lda", "zero", "krylov", "random", "bayes"}, default="auto"
        Where training starts.

        - ``"lda"``: the linear start. The skip map and intercept are
          ``LinearDiscriminantAnalysis().fit(X, y)``'s ``coef_`` and
          ``intercept_`` and the heads are the zero start
          (``U11 = 0``, ``u12 = 0``, ``v22 = 0``, ``v21`` Gaussian), which reads
          out a constant that the intercept cancels: with ``max_iter=0`` the
          decision function is LDA's, for any prior, any number of classes
          and constant features alike. Needs ``residual=True``.
        - ``"auto"``: ``"lda"``, trained, then kept only if it beats the
          untrained LDA on the held-out data (``early_stopping``); with
          ``residual=False``, ``"zero"``.
        - ``"zero"``: the zero start with a Gaussian ``v21`` (the paper's
          Figure 5 heuristic; Theorem 3.6 asks ``v21(0)`` in the Krylov
          complement ``K-perp``), with a zero skip map.
        - ``"krylov"``: Theorem 3.6's start, the zero start with ``v21``
          projected onto ``K-perp``. ``K`` is the Krylov space of the
          prompt's centred class means under its pooled covariance, up to
          the directions the prompt cannot resolve (Arnoldi steps below
          ``2 sqrt(d / n)`` of the covariance's norm). On data with an
          anisotropic covariance ``K`` is generically all of ``R^d``
          (Proposition B.35): then it warns and starts from ``"zero"``.
          The theorem's convergence is for gradient flow on the population;
          this estimator trains with its solver and penalty on a sample.
        - ``"random"``: every head block Gaussian.
        - ``"bayes"``: the exact population construction of Lemma B.3 from
          the prompt's class means, pooled covariance and prior (for ``C >
          2`` classes its one-hot analogue). Its read-out grows like
          ``1 / |2 pi_+ - 1|`` as the prompt's prior nears 1/2: on 20,000
          points with prior 0.495 the untrained head scored at chance. The
          pooled covariance is pseudo-inverted (a constant feature, or more
          features than samples, gets a finite start), and where the head
          does not exist on the data it warns and starts from ``"lda"``
          (``"zero"`` without a skip map).

        With a held-out set and ``residual=True``, heads trained from
        ``"zero"``, ``"krylov"``, ``"random"`` or ``"bayes"`` that score worse there than
        the untrained linear start (LDA) give way to it, with a warning
        (``init_`` says which was kept).
    prompt_size : int, default=None
        ``None``: every training pair is in the prompt; an int: a random
        subset of that size (an error if it misses a class).
    max_iter : int, default=300
        Iterations of the solver (loss evaluations for ``"lbfgs"``); 0 keeps
        the start.
    learning_rate : float, default=0.02
        Step size of ``"adam"`` (peak step, decayed on a cosine schedule) and
        ``"gd"`` (constant); ``"lbfgs"`` finds its own steps.
    alpha : float, default=0.01
        L2 penalty on the key-query blocks ``U11`` and ``u12``, in units where
        the features have root-mean-square 1 (the read-out is not
        penalised). Without it Adam lets the gate sharpen on the sample's
        noise in high dimension: on the paper's C2 configuration (d = 20,
        n = 5,000, learning rate 0.02) held-out log-loss was 12-29% above
        Bayes without the penalty and 0.6% above with it. Set 0 to study
        the unregularised dynamics of Section 3.3.
    solver : {"auto", "lbfgs", "adam", "gd"}, default="auto"
        ``"lbfgs"``: full-batch L-BFGS with a strong-Wolfe line search.
        ``"adam"``: minibatches of ``batch_size`` training queries.
        ``"gd"``: full-batch gradient descent with a constant step, for the
        training dynamics of Section 3.3. ``"auto"``: ``"lbfgs"`` while one
        pass over the training queries costs at most 2**23 query-token-feature
        products (about 15 ms), ``"adam"`` above, as scikit-learn uses lbfgs
        for small data.
    early_stopping : "auto" or bool, default="auto"
        Hold out ``validation_fraction`` of the training pairs (stratified),
        train on the rest, and keep the parameters that score best on the
        held-out pairs (log-loss): the final ones unless an earlier
        checkpoint is better by two standard errors, and the untrained linear
        start unless the trained heads beat it by two standard errors. Adam
        and gradient descent stop after ``n_iter_no_change`` checks (one
        every 10 iterations) without improvement, L-BFGS (checked at every
        evaluation) after ten times as many. ``"auto"`` holds out
        whenever every class keeps at least 2 training pairs and 1 held-out
        pair, and otherwise keeps the linear start untrained; ``False``
        trains on every pair and keeps the final parameters (what the
        paper's dynamics studies need, with ``residual=False`` and an
        explicit ``init``).
    validation_fraction : float, default=0.1
        Fraction of the training pairs held out by ``early_stopping``.
    tol : float, default=None
        With a validation set: the improvement a check must bring to count
        (``None``: any). Without one: ``None`` runs exactly ``max_iter``
        iterations and never warns; a float averages the training loss over
        blocks of 10 iterations and stops once ``n_iter_no_change`` blocks in
        a row fail to beat the best block by ``tol``, emitting a
        ``ConvergenceWarning`` if ``max_iter`` runs out first (for
        ``"lbfgs"``, the change of the loss below which it stops).
    n_iter_no_change : int, default=5
        Checks (of 10 iterations each) without improvement that stop Adam and
        gradient descent.
    batch_size : int, default=256
        Training queries per Adam step (L-BFGS takes every training query).
    transform_batch_size : int, default=None
        Queries evaluated at once by the prediction methods (memory
        ``n_heads * transform_batch_size * L`` scores). ``None``: as many as
        fill about 2**24 scores (64 MiB in float32) whatever the prompt
        length ``L``.
    standardize : "auto" or bool, default="auto"
        Whether the model works on standardised features, ``(x - mean) /
        std`` per feature from the training data (see Notes, Scaling).
        ``"auto"``: when ``X`` is far from standardised (a feature's mean
        beyond one standard deviation from 0, or standard deviations spread
        over more than a factor of 10), so that standardised input and the
        paper's synthetic settings are used as given.
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the held-out split, the prompt subset and
        the minibatches.
    verbose : int, default=0
        Print the training loss about ten times (1) or every iteration (2),
        and which start was kept.

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
        Scale dividing every centred feature (ones when not standardised).
    prompt_y_ : ndarray of shape (L,)
        Class indices (into ``classes_``) of the prompt.
    prompt_indices_ : ndarray of shape (L,)
        Rows of the training set that form the prompt.
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
    init_ : str
        The start whose parameters were kept (``"lda"`` when the linear start
        won the validation, or training never ran).
    history_ : dict of ndarray
        For the kept run, per loss evaluation, at the parameters where that
        loss was computed (before the step): ``"loss"``, and for binary problems the effective
        coordinates ``"w"`` (n_iter, n_heads, d), ``"b"``, ``"r"`` (n_iter,
        n_heads), ``"s"`` (n_iter, n_heads, d), computed from the prompt's
        class means, pooled covariance and prior, and ``"balance"``
        ``||U11||_F^2 - ||v21||^2`` (n_iter, n_heads). For them ``fit``
        keeps a copy of the parameters at every evaluation, about
        ``max_iter * n_heads * d**2`` floats while it runs (40 MB at
        ``d = 100``, 2 heads and 500 iterations).
    n_iter_ : int
        Number of training iterations run, over every start trained.
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
    ``f(x) = w^T x + b + r sigmoid(s0 + s^T x)`` with ``w = U11 Gamma v21``,
    ``b = v21^T m_{-1} - v22``, ``r = v21^T Delta + 2 v22``,
    ``s = 2 u12 + U11 Delta``, ``s0 = log(pi_+/(1 - pi_+))`` (eq. 6-7); one
    head represents the LDA score exactly and every critical point of the
    effective risk is a global minimum (Theorem 3.1). Theorem 3.6 proves,
    in the balanced symmetric case, that gradient flow from ``U11 = 0``,
    ``u12 = 0``, ``v22 = 0`` and ``v21(0)`` in ``K-perp`` (``K`` the Krylov
    space of ``m`` and ``Gamma``) converges exponentially to Bayes while
    ``||U11||_F^2 - ||v21||^2`` is conserved. This estimator draws ``v21``
    from a Gaussian and trains with Adam or L-BFGS and a penalty, so for it
    fast convergence is observed, not proved: the paper reports (Figure 5)
    that an all-Gaussian initialisation struggles in dimension 20 while the
    zero start with a Gaussian ``v21`` converges fast, which is why the
    linear start puts those heads next to the skip map. On several
    clusters per class the gate becomes selective, which LDA cannot be.

    A finite prompt is not the population, so a head alone matches LDA only
    up to Monte Carlo error (and Lemma B.3's read-out amplifies it near
    balanced priors); the skip map carries LDA's score exactly instead. LDA
    is therefore always within reach, and the held-out comparison decides
    whether the heads add anything. The bar is two standard errors of the
    per-sample log-loss difference because log-loss has a heavy tail: on
    iris, 12 held-out points with no error among them let overconfident
    heads pass one standard error in 4 folds of 5 and triple LDA's
    held-out log-loss. On the XOR mixture the heads beat LDA by 0.5 nats per
    point and are always kept. The parameters kept are validated with the
    prompt they were trained with (the held-out pairs join the prompt only
    when the linear start is kept): adding 10% more tokens to sharply
    trained heads cost up to 22 points of XOR accuracy.

    Training runs in float32 on features divided by their root-mean-square
    (an exact symmetry of the model), each training query left out of its
    own prompt. Prediction costs ``O(n_queries L n_features n_heads)``.

    **Scaling.** The heads need standardised features: centred, with
    comparable standard deviations. Rescaling one feature is an exact
    symmetry of the heads but not of their training, and shifting one is
    not a symmetry at all (the scores ``x_i^T U11^T x`` have no key bias).
    On the XOR mixture, heads trained on the raw features stayed at the
    linear start (LDA's 0.33) once one feature was shifted by 5 standard
    deviations or scaled by 100, where standardised features reach 0.956.
    So with ``standardize="auto"`` the model standardises such features
    itself (``feature_mean_``, ``feature_scale_``), which makes raw input as
    good as ``make_pipeline(StandardScaler(), ...)``; with
    ``standardize=False`` it warns instead. LDA, the linear start, is
    unchanged by any affine map of the features, so no setting falls below
    it (iris, wine, breast cancer and digits score the same raw and
    standardised).

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
    >>> clf.init_, bool(np.allclose(clf.decision_function(X), lda.decision_function(X)))
    ('lda', True)

    The paper's model (heads only) trained from the zero start: the
    head's effective ``w`` points along the prompt's LDA direction ``w*``:

    >>> paper = SoftmaxAttentionClassifier(residual=False, init="zero", early_stopping=False,
    ...                                    max_iter=100, learning_rate=0.1, solver="adam",
    ...                                    random_state=0).fit(X, y)
    >>> w, w_star = paper.effective_coordinates()["w"][0], paper.bayes_coordinates()[0]
    >>> bool(w @ w_star / (np.linalg.norm(w) * np.linalg.norm(w_star)) > 0.99)
    True
    """

    _parameter_constraints: dict = {
        "n_heads": [Count(1)],
        "residual": ["boolean"],
        "init": [StrOptions({"auto", "lda", "zero", "krylov", "random", "bayes"})],
        "prompt_size": [Count(2), None],
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
        residual=True,
        init="auto",
        prompt_size=None,
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
        self.residual = residual
        self.init = init
        self.prompt_size = prompt_size
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
    def fit(self, X, y):
        """Make the training pairs the prompt and train the heads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points; they (or a random ``prompt_size`` of them), with
            their labels, become the prompt.
        y : array-like of shape (n_samples,)
            Class labels (any type scikit-learn accepts).

        Returns
        -------
        self : object
            The fitted classifier.
        """
        with unchanged_on_error(self), numpy_blas_threads_for(X):
            self._fit(X, y)
        return self

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

    def effective_coordinates(self) -> dict:
        """Effective coordinates ``(w, b, r, s, s0)`` of a fitted binary model.

        Computed head by head from the prompt's class means, pooled covariance
        and prior (:func:`sk_softmix.theory.lda.effective_coordinates`); compare
        ``w`` and ``b`` (with ``r``, ``s``) to
        ``LinearDiscriminantAnalysis().coef_`` and ``intercept_``, or to
        :func:`sk_softmix.theory.lda.lda_coordinates`.

        Returns
        -------
        dict
            ``w`` (n_heads, d), ``b``, ``r`` (n_heads,), ``s`` (n_heads, d),
            ``s0`` (float).
        """
        check_is_fitted(self)
        if len(self.classes_) != 2:
            raise ValueError("Effective coordinates are defined for two classes only.")
        statistics = class_statistics(self.prompt_X_, 2 * self.prompt_y_ - 1)
        return heads_coordinates(self.U11_, self.u12_, self.v21_, self.v22_, statistics)

    def bayes_coordinates(self) -> tuple[np.ndarray, float]:
        """Bayes (LDA) coordinates ``(w*, b*)`` of the prompt of a binary model.

        From the prompt's class means, pooled covariance and prior
        (:func:`sk_softmix.theory.lda.lda_coordinates`): the score ``w*^T x + b*``
        that :meth:`effective_coordinates` should approach, equal to
        ``LinearDiscriminantAnalysis(solver="lsqr")``'s ``coef_`` and
        ``intercept_`` fitted on the prompt.

        Returns
        -------
        w : ndarray of shape (n_features,)
        b : float
        """
        check_is_fitted(self)
        if len(self.classes_) != 2:
            raise ValueError("Bayes-LDA coordinates are defined for two classes only.")
        return lda_coordinates(*class_statistics(self.prompt_X_, 2 * self.prompt_y_ - 1))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    # -- fitting ---------------------------------------------------------------

    def _fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=FLOAT_DTYPES, ensure_min_samples=2)
        checked_scale(X, type(self).__name__)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"SoftmaxAttentionClassifier needs at least 2 classes in y; got {len(classes)} "
                f"({classes.tolist()})."
            )
        counts = np.bincount(labels)
        if counts.min() < 2:
            raise ValueError(
                "Every class needs at least 2 samples (a training query leaves itself "
                f"out of the prompt); class {classes.tolist()[counts.argmin()]!r} has "
                f"{counts.min()}."
            )
        if self.init == "lda" and not self.residual:
            raise ValueError(
                "init='lda' puts LDA's score in the skip map, which needs residual=True; "
                "with residual=False use init='bayes' (Lemma B.3) or 'zero'."
            )
        problem = unstandardised_features(X)
        if problem is not None and self.standardize is False and self.max_iter > 0:
            warnings.warn(
                f"SoftmaxAttentionClassifier: X is not standardised ({problem}) and "
                "standardize=False. The heads train on the features as given, where a "
                "selective solution is hard to find, so the fit may stay at its linear "
                "start (LDA's accuracy). Use standardize='auto', or put a "
                "StandardScaler in front.",
                UserWarning,
                stacklevel=4,
            )
        standardise = self.standardize is True or (
            self.standardize == "auto" and problem is not None
        )
        self.feature_mean_, self.feature_scale_ = feature_standardisation(X, standardise)
        if standardise:
            X = ((X - self.feature_mean_) / self.feature_scale_).astype(X.dtype, copy=False)
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        n_classes = len(classes)
        # Trained heads fall back on the untrained linear start (LDA) when it
        # validates better: by choice with init="auto" or "lda", with a
        # warning from the paper's starts.
        reference = "lda" if self.residual else None
        by_default = self.init in ("auto", "lda") and reference is not None
        early_stopping = self.early_stopping if self.max_iter > 0 else False
        train_rows, validation_rows = validation_split(
            len(X), early_stopping, self.validation_fraction, random_state, labels
        )
        prompt_indices = choose_prompt(len(X), self.prompt_size, random_state, train_rows)
        if len(np.unique(labels[prompt_indices])) < n_classes:
            raise ValueError(
                f"The prompt of prompt_size={self.prompt_size} misses a class; use a larger "
                "prompt_size."
            )
        head_seed = random_state.randint(2**31 - 1)

        def starts_on_training_rows(names=None):
            return classifier_starts(
                self,
                X[train_rows],
                labels[train_rows],
                X[prompt_indices],
                labels[prompt_indices],
                n_classes,
                head_seed,
                names,
            )

        starts = starts_on_training_rows()
        untrained = next(iter(starts))
        reference_start = None
        if reference is not None:
            reference_start = (
                starts.get(reference) or starts_on_training_rows([reference])[reference]
            )
        history, n_iter = {"loss": np.empty(0)}, 0
        skip_training = self.max_iter == 0 or (
            validation_rows is None and self.early_stopping == "auto" and by_default
        )
        if skip_training:
            chosen, parameters, trained = untrained, starts[untrained], False
        else:
            outcome, history = train_heads(
                self,
                X,
                labels,
                n_classes,
                prompt_indices,
                validation_rows,
                starts,
                None if reference is None else (reference, reference_start),
                random_state,
                device,
            )
            chosen, parameters, trained = outcome.start, outcome.parameters, outcome.trained
            n_iter = outcome.n_iter
            if not by_default and chosen == reference and untrained != reference:
                warnings.warn(
                    f"SoftmaxAttentionClassifier: trained from init={self.init!r}, the "
                    "heads scored worse on the held-out points than the untrained "
                    "linear start (LDA), which is kept (init_='lda'). Use init='auto', "
                    "or early_stopping=False to keep the trained heads anyway.",
                    UserWarning,
                    stacklevel=3,
                )
        if validation_rows is not None and not trained:
            # The linear start again, from every row. Trained heads keep the
            # prompt they were validated with: adding the held-out rows to it
            # afterwards cost trained XOR heads up to 22 points of accuracy.
            if self.prompt_size is None:
                prompt_indices = np.arange(len(X))
            parameters = classifier_starts(
                self,
                X,
                labels,
                X[prompt_indices],
                labels[prompt_indices],
                n_classes,
                head_seed,
                [chosen],
            )[chosen]
        for name, value in parameters.items():
            setattr(self, f"{name}_", to_fitted_shapes(name, value, n_classes))
        self.classes_ = classes
        self.prompt_X_, self.prompt_y_ = X[prompt_indices], labels[prompt_indices]
        self.prompt_indices_ = prompt_indices
        self.init_ = chosen
        self.history_ = history
        self.n_iter_ = n_iter
        self.device_ = str(device)

    def _scores(self, X):
        device = resolve_device(self.device)
        n_classes = len(self.classes_)
        dtype = torch_dtype_of(X)
        # the tensor set-up on one thread too: a kernel on torch's pool would
        # leave its threads spinning through the prediction
        with torch.no_grad(), one_cpu_thread(device):
            fitted = {
                name: as_tensor(np.asarray(getattr(self, f"{name}_")), device, dtype)
                for name in self._parameter_names()
            }
            parameters = from_fitted_shapes(fitted, n_classes)
            prompt = classifier_tokens(
                as_tensor(self.prompt_X_, device, dtype),
                as_tensor(self.prompt_y_, device),
                n_classes,
            )
            # the model's coordinates (see ``standardize``)
            features = as_tensor((X - self.feature_mean_) / self.feature_scale_, device, dtype)
        chunk = queries_per_chunk(self.transform_batch_size, self.n_heads, len(prompt))

        def scores(start, stop):
            # the engine chunks the queries, reusing one scores buffer
            return classifier_scores(parameters, features[start:stop], prompt, None, chunk)

        fused_scores = len(X) * len(prompt) * self.n_heads
        if not fused_kernel_available(device, leave_one_out=False):
            fused_scores = None
        with torch.no_grad():
            return predict_on_threads(device, len(X), chunk, scores, fused_scores).cpu().numpy()

    def _parameter_names(self):
        heads = ("U11", "u12", "v21", "v22")
        return heads + ("skip", "intercept") if self.residual else heads


def feature_standardisation(X, standardise: bool) -> tuple[np.ndarray, np.ndarray]:
    """The centre and scale of each feature the model works in.

    ``(mean, standard deviation)`` of ``X``'s columns when ``standardise``
    (a constant column keeps scale 1), else zeros and ones.
    """
    n_features = X.shape[1]
    if not standardise:
        return np.zeros(n_features), np.ones(n_features)
    X = X.astype(np.float64)
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    # below float64's resolution of the column the spread is rounding: constant
    constant = scale <= 1e-12 * np.maximum(np.abs(mean), scale.max())
    scale[constant] = 1.0
    return mean, scale
