"""SoftmaxAttentionClassifier: the paper's LDA head, trained in context."""

import warnings
from numbers import Real

import numpy as np
from scipy.special import log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..attention._device import resolve_device
from ..attention._threads import (
    numpy_blas_threads_for,
)
from ..theory.lda import class_statistics, lda_coordinates
from ..training._inactive import warn_inactive
from ..training._persistence import ParametersAddedSinceMixin
from ..training._solvers import SOLVERS
from ..training._units import checked_scale, rms_scale
from ..training._validation import (
    FLOAT_DTYPES,
    Count,
    torch_dtype_of,
    unchanged_on_error,
    unstandardised_features,
)
from ._bilinear_fit import fit_bilinear_classifier
from ._heads import (
    heads_coordinates,
    to_fitted_shapes,
)
from ._kernel_fit import KernelSettings, fit_kernel_classifier
from ._linear_starts import (
    quadratic_scores,
)
from ._metric import METRICS
from ._prediction import attention_scores, neighbour_scores
from ._tokens import (
    check_class_counts,
    distinct_tokens,
    equal_weights,
    left_in_shares,
    repeats_are_observations,
    row_weights,
)

# what trains the paper's bilinear heads, and nothing else: set with kernel
# heads, they warn
BILINEAR_TRAINING_PARAMETERS = (
    "max_iter",
    "learning_rate",
    "alpha",
    "solver",
    "validation_fraction",
    "tol",
    "n_iter_no_change",
    "batch_size",
)


class SoftmaxAttentionClassifier(ParametersAddedSinceMixin, ClassifierMixin, BaseEstimator):
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

    By default the classifier starts on the best regularised linear
    classifier for the data (LDA, its linear special case, unless shrinkage
    LDA or logistic regression is clearly better) and adds kernel heads, a
    soft nearest-neighbour vote over the prompt, only where held-out
    log-loss shows they help: linear when it can, selective when it must
    (see Notes).

    Parameters
    ----------
    n_heads : int, default=1
        Number of softmax heads, whose scores are summed.
    head : {"auto", "kernel", "bilinear"}, default="auto"
        The heads' score of token ``i`` for query ``x``.

        - ``"bilinear"``: the paper's, ``x_i^T U11^T x + label_i^T u12 x``,
          trained from ``init`` by the ``solver``.
        - ``"kernel"``: ``x_i^T U11 x - 1/2 x_i^T W x_i`` with a key norm
          ``W = U11 = I / h^2``: up to a term of the query, which the
          softmax ignores, ``-||x - x_i||^2 / (2 h^2)``, so that the head
          reads out (``v22 = beta I``, ``v21 = 0``) ``beta`` times the
          Gaussian-kernel vote of the query's neighbours' labels. The
          bandwidth ``h`` and read-out ``beta`` of each head are chosen on
          a grid by leave-one-out log-loss (user guide, "Kernel heads"), on
          top of the linear start (``init``: ``"auto"`` or ``"lda"``); they
          are kept only where they beat it (``early_stopping``).
        - ``"auto"``: ``"kernel"`` with ``init="auto"``, else
          ``"bilinear"`` (the paper's starts are bilinear heads).
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
        - ``"auto"``: with kernel heads, the linear start is the one of
          ``LinearDiscriminantAnalysis()``,
          ``LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")``
          and ``LogisticRegression()``, or logistic regression on the
          features and their products (the quadratic start, up to 43
          features), of lowest 5-fold cross-validated
          log-loss on the training set, LDA unless another beats it by one
          standard error without losing accuracy by more than one
          (``linear_start_`` says which), and the heads are kept only if
          their held-out log-loss beats it by two standard errors and their
          accuracy is not lower by more than one. With
          ``head="bilinear"``, ``"lda"``, trained, then kept
          only if it beats the untrained LDA on the held-out data
          (``early_stopping``); with ``residual=False``, ``"zero"``.
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
        root-mean-square 1 (the read-out is not penalised). Without it Adam
        lets the gate sharpen on the sample's noise in high dimension: on the
        paper's C2 configuration (d = 20, n = 5,000, learning rate 0.02)
        held-out log-loss was 12-29% above Bayes without the penalty and 0.6%
        above with it. Set 0 to study the unregularised dynamics of Section
        3.3.
    solver : {"auto", "lbfgs", "adam", "gd"}, default="auto"
        Bilinear heads only (see ``max_iter``). ``"lbfgs"``: full-batch L-BFGS
        with a strong-Wolfe line search. ``"adam"``: minibatches of
        ``batch_size`` training queries. ``"gd"``: full-batch gradient descent
        with a constant step, for the training dynamics of Section 3.3.
        ``"auto"``: ``"lbfgs"`` while one pass over the training queries costs
        at most 2**23 query-token-feature products (about 15 ms), ``"adam"``
        above, as scikit-learn uses lbfgs for small data.
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
        explicit ``init``). Kernel heads are compared with the linear start
        on leave-one-out and out-of-fold log-loss instead, over every
        training pair; ``False`` keeps them without the comparison.
    validation_fraction : float, default=0.1
        Bilinear heads only (see ``max_iter``): the fraction of the training
        pairs held out by ``early_stopping``.
    tol : float, default=None
        Bilinear heads only (see ``max_iter``). With a validation set: the
        improvement a check must bring to count (``None``: any). Without one:
        ``None`` runs exactly ``max_iter`` iterations and never warns; a float
        averages the training loss over blocks of 10 iterations and stops once
        ``n_iter_no_change`` blocks in a row fail to beat the best block by
        ``tol``, emitting a ``ConvergenceWarning`` if ``max_iter`` runs out
        first (for ``"lbfgs"``, the change of the loss below which it stops).
    n_iter_no_change : int, default=5
        Bilinear heads only (see ``max_iter``). Checks (of 10 iterations each)
        without improvement that stop Adam and gradient descent.
    batch_size : int, default=256
        Bilinear heads only (see ``max_iter``). Training queries per Adam step
        (L-BFGS takes every training query).
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
        Scale dividing every centred feature: ones when not standardised,
        but for kernel heads, which work at unit root-mean-square (the power
        of two nearest it, so that the division rounds nothing).
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
        mass that the restriction left out on a tuning query, a bound (each
        vote entry is within twice it of the exact head's); 0 otherwise.
    metric_ : ndarray of shape (rank, n_features)
        Kernel heads only: the metric ``A`` of their kernel, ``U11_[h] =
        A^T A / h^2`` (``metric``), in the model's coordinates; the identity
        where the isotropic metric is kept (or none was tried).
    temperature_ : float
        The read-out temperature of kernel heads: the skip map, intercept
        and read-outs are its multiples of those fitted, so that the
        held-out log-loss is lowest; it changes no predicted label. Where
        the start is kept alone, 1 unless a temperature lowers its
        out-of-fold log-loss by two standard errors; 1 for bilinear heads.
    prompt_weights_ : ndarray of shape (L,)
        Each prompt token's weight (kernel heads): the summed
        ``sample_weight`` times ``class_weight`` of its rows. A token's score
        gains ``log`` of it. Ones for bilinear heads.
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
        ``"shrinkage_lda"`` or ``"logistic"``, or ``"quadratic"`` (always
        ``"lda"`` for bilinear heads); ``None`` with ``residual=False``.
    quadratic_ : ndarray of shape (1 or n_classes, n_features, n_features) or None
        The quadratic start's ``Q`` (symmetric, one per score as ``skip_``):
        the decision function gains ``x^T Q x`` in the model's coordinates;
        ``None`` for every other start.
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
    clusters per class the gate becomes selective, which LDA cannot be
    (``head="bilinear"``; the default's kernel heads are below).

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

    **Kernel heads** (the default). Trained bilinear heads on top of LDA
    found nothing on real data (iris, wine, breast cancer, digits: the
    model was LDA, at 30-100 times its cost), because the paper's score
    ``x_i^T U11^T x`` has no key norm: its gate tilts between half-spaces
    but cannot pick a query's neighbours. A key norm ``W = U11 = I / h^2``
    makes the score ``-||x - x_i||^2 / (2 h^2)`` plus a term of the query,
    so that the head reads out the labels of the query's neighbours, a
    soft nearest-neighbour vote; neighbourhood components analysis trains
    the same softmax with a learned metric. The fit is closed-form and
    held-out throughout:

    1. The start: LDA, shrinkage LDA, logistic regression and logistic
       regression on the features and their pairwise products (a quadratic
       score, ``quadratic_``) are compared by 5-fold cross-validated
       log-loss on the training set; LDA stays unless another beats it by
       one standard error (``linear_start_``). Their out-of-fold scores are
       kept.
    2. Each head's bandwidth ``h`` (13 half-octave multiples of the median
       nearest-neighbour distance) and read-out ``beta`` (17 values and 0)
       minimise the log-loss of the out-of-fold linear score plus the
       leave-one-out vote (each training query votes without its own token),
       on at most 2,000 training queries; heads are added greedily, and a
       read-out temperature (``temperature_``) scales the sum.
    3. ``metric="auto"``: a diagonal metric ``A`` (``U11 = W = A^T A /
       h^2``), fitted by the same loss on each half of those queries,
       replaces the isotropic one where it beats it on the other half by
       two standard errors (``metric_``); the grid of step 2 then runs in
       the features ``A x``.
    4. The heads are kept where that held-out log-loss (with a learned
       metric, the one of the metric fitted on the other half) beats the
       start's by two standard errors of the per-sample difference and
       their held-out accuracy is not below the start's by more than one;
       else the model is its start and predicts at its cost.

    Measured on real data next to the baselines a practitioner would pick:
    user guide, "Kernel heads: selective on real data".

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
    >>> clf.init_, clf.linear_start_
    ('linear', 'lda')
    >>> bool(np.allclose(clf.decision_function(X), lda.decision_function(X)))
    True

    Where each class is two clusters on opposite corners (XOR), no linear
    score does better than chance; the product ``x1 x2`` draws the boundary,
    and the quadratic start alone is kept:

    >>> corners = rng.choice([-2.0, 2.0], size=(400, 2))
    >>> X_xor, y_xor = corners + rng.normal(size=(400, 2)), (corners[:, 0] * corners[:, 1] > 0)
    >>> xor = SoftmaxAttentionClassifier(random_state=0).fit(X_xor[:300], y_xor[:300])
    >>> xor.init_, xor.linear_start_, bool(xor.score(X_xor[300:], y_xor[300:]) > 0.9)
    ('linear', 'quadratic', True)

    A band of radii is neither linear nor quadratic: the kernel heads are
    kept, on LDA's start:

    >>> X_band = rng.normal(size=(400, 2)) * 1.5
    >>> radius = np.sqrt(np.square(X_band).sum(axis=1))
    >>> y_band = (radius > 1.0) & (radius < 2.2)
    >>> band = SoftmaxAttentionClassifier(random_state=0).fit(X_band[:300], y_band[:300])
    >>> band.init_, band.linear_start_, bool(band.score(X_band[300:], y_band[300:]) > 0.9)
    ('kernel', 'lda', True)

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
        if np.any(getattr(self, "W_", 0.0)):
            raise ValueError(
                "Effective coordinates (eq. 7) are those of the paper's bilinear heads; this "
                "model has kernel heads (a key norm W_). Fit with head='bilinear'."
            )
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

    def _fit(self, X, y, sample_weight=None):
        X, y = validate_data(self, X, y, dtype=FLOAT_DTYPES, ensure_min_samples=2)
        checked_scale(X, type(self).__name__)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"SoftmaxAttentionClassifier needs at least 2 classes in y; got {len(classes)} "
                f"({classes.tolist()})."
            )
        if self.init == "lda" and not self.residual:
            raise ValueError(
                "init='lda' puts LDA's score in the skip map, which needs residual=True; "
                "with residual=False use init='bayes' (Lemma B.3) or 'zero'."
            )
        kernel = self._kernel_heads()
        if kernel:
            warn_inactive(
                self,
                BILINEAR_TRAINING_PARAMETERS,
                "kernel heads are tuned on a grid of bandwidths in closed form, not "
                "trained; these parameters train head='bilinear' (max_iter=0 turns the "
                "kernel heads off).",
                stacklevel=5,
            )
        weights = row_weights(y, classes, sample_weight, self.class_weight, X)
        left_in = None
        if kernel:
            rows, weights, counts = distinct_tokens(X, labels, weights, return_counts=True)
            if len(rows) == len(X) and equal_weights(weights):
                weights = None  # no repeated row, no weight: the plain fit, exactly
            X, labels = X[rows], labels[rows]
            if counts.max() == 1 or not repeats_are_observations(X):
                counts = None  # no repeated row, or copies: Kish's count of the weights
            left_in = None if counts is None else left_in_shares(counts)
        elif not equal_weights(weights):
            raise ValueError(
                "sample_weight and class_weight weigh the tokens of kernel heads; the "
                f"bilinear heads of head={self.head!r}, init={self.init!r} take no weights. "
                "Use head='auto' with init='auto', or equal weights."
            )
        check_class_counts(labels, classes, minimum=1 if kernel else 2)
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
        self.feature_mean_, self.feature_scale_ = feature_standardisation(X, standardise, weights)
        if kernel and not standardise:
            # kernel heads are tuned in float32: at unit root-mean-square the
            # squared distances of data at any scale float64 serves (1e-20,
            # 1e19) stay inside float32's range; a power of two rounds nothing
            unit = 2.0 ** np.round(np.log2(rms_scale(X)))
            self.feature_scale_ = np.full(X.shape[1], unit)
        if standardise or kernel:
            X = ((X - self.feature_mean_) / self.feature_scale_).astype(X.dtype, copy=False)
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        n_classes = len(classes)
        if kernel:
            self._fit_kernel_heads(
                X, labels, classes, random_state, device, weights, rows, left_in, counts
            )
            return
        fit = fit_bilinear_classifier(self, X, labels, n_classes, random_state, device)
        self._set_fitted(fit.parameters, classes, X, labels, fit.prompt_indices, device)
        self.init_ = fit.init
        self.linear_start_ = "lda" if self.residual else None
        self.history_ = fit.history
        self.n_iter_ = fit.n_iter

    def _kernel_heads(self) -> bool:
        """Whether the heads are kernel heads (``head``, resolved), checking
        the combinations that do not exist."""
        if self.head == "bilinear" or (self.head == "auto" and self.init != "auto"):
            return False
        if not self.residual:
            raise ValueError(
                f"head={self.head!r} puts kernel heads on top of a linear start, which "
                "needs residual=True; with residual=False use head='bilinear'."
            )
        if self.init not in ("auto", "lda"):
            raise ValueError(
                f"init={self.init!r} is a start of the paper's bilinear heads; kernel heads "
                "start from init='auto' (the best linear start) or 'lda'. Use "
                "head='bilinear'."
            )
        return True

    def _fit_kernel_heads(
        self, X, labels, classes, random_state, device, weights, rows, left_in=None, counts=None
    ):
        """The linear start, then kernel heads on top where they beat it (see Notes).

        ``X`` and ``labels`` are the distinct tokens, ``weights`` theirs
        (``None``: equal), ``rows`` the training rows that hold them,
        ``left_in`` the share of its token a leave-one-out query keeps
        (``_tokens.left_in_shares``), ``counts`` the rows each token holds
        (``None``: one each).
        """
        settings = KernelSettings(**{name: getattr(self, name) for name in KernelSettings.names()})
        fit = fit_kernel_classifier(
            X, labels, len(classes), settings, random_state, device, weights, left_in, counts
        )
        self._set_fitted(
            fit.parameters, classes, X, labels, fit.prompt_indices, device, weights, rows
        )
        self.quadratic_ = fit.quadratic
        self.n_neighbors_ = fit.n_neighbors
        self.neighbour_mass_left_out_ = fit.mass_left_out
        self.temperature_ = fit.temperature
        self.metric_ = fit.metric
        self.init_ = "kernel" if fit.kept else ("linear" if self.init == "auto" else "lda")
        self.linear_start_ = fit.linear_start
        self.history_ = {"loss": np.empty(0)}
        self.n_iter_ = int(self.max_iter > 0)  # the grid search, one pass

    def _set_fitted(
        self, parameters, classes, X, labels, prompt_indices, device, weights=None, rows=None
    ):
        """Fitted attributes; ``X`` and ``labels`` are the tokens (rows ``rows`` of the
        training set, all of them by default) and ``weights`` theirs."""
        for name, value in parameters.items():
            setattr(self, f"{name}_", to_fitted_shapes(name, value, len(classes)))
        self.classes_ = classes
        self.prompt_X_, self.prompt_y_ = X[prompt_indices], labels[prompt_indices]
        self.prompt_indices_ = prompt_indices if rows is None else rows[prompt_indices]
        self.prompt_weights_ = (
            np.ones(len(prompt_indices)) if weights is None else weights[prompt_indices]
        )
        self.device_ = str(device)
        self.temperature_ = 1.0
        self.quadratic_ = None

    def _scores(self, X):
        features = (X - self.feature_mean_) / self.feature_scale_  # the model's coordinates
        # the quadratic start's x^T Q x (models saved before it have none)
        quadratic = quadratic_scores(getattr(self, "quadratic_", None), features)
        n_classes = len(self.classes_)
        # models saved before token weights and learned metrics have neither
        token_weights = getattr(self, "prompt_weights_", None)
        if token_weights is None:
            token_weights = np.ones(len(self.prompt_y_))
        if self.residual and not (np.any(self.v21_) or np.any(self.v22_)):
            # heads that read out nothing return exactly 0: the start alone
            scores = features @ self.skip_.T.astype(features.dtype) + self.intercept_
        elif getattr(self, "n_neighbors_", None) is not None:
            metric = getattr(self, "metric_", None)
            scores = neighbour_scores(
                features,
                {name: getattr(self, f"{name}_") for name in ("U11", "v22", "skip", "intercept")},
                np.eye(self.U11_.shape[1]) if metric is None else metric,
                self.prompt_X_,
                self.prompt_y_,
                token_weights,
                self.n_neighbors_,
                n_classes,
            )
        else:
            scores = attention_scores(
                features,
                {name: np.asarray(getattr(self, f"{name}_")) for name in self._parameter_names()},
                self.prompt_X_,
                self.prompt_y_,
                token_weights,
                n_classes,
                resolve_device(self.device),
                torch_dtype_of(X),
                self.transform_batch_size,
            )
        return (scores + quadratic).astype(X.dtype, copy=False)

    def _parameter_names(self):
        heads = ("U11", "u12", "v21", "v22")
        # W_: a key norm, nonzero for kernel heads only (models saved before
        # kernel heads existed have none)
        if np.any(getattr(self, "W_", 0.0)):
            heads = heads + ("W",)
        return heads + ("skip", "intercept") if self.residual else heads


def feature_standardisation(
    X, standardise: bool, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The centre and scale of each feature the model works in.

    ``(mean, standard deviation)`` of ``X``'s columns when ``standardise``
    (a constant column keeps scale 1), else zeros and ones; weighted by the
    rows' ``weights`` where given, so that repeated rows merged into one
    weighted token give the same coordinates as the rows themselves.
    """
    n_features = X.shape[1]
    if not standardise:
        return np.zeros(n_features), np.ones(n_features)
    X = X.astype(np.float64)
    if weights is None:
        mean = X.mean(axis=0)
        scale = X.std(axis=0)
    else:
        mean = np.average(X, axis=0, weights=weights)
        scale = np.sqrt(np.average(np.square(X - mean), axis=0, weights=weights))
    # below float64's resolution of the column the spread is rounding: constant
    constant = scale <= 1e-12 * np.maximum(np.abs(mean), scale.max())
    scale[constant] = 1.0
    return mean, scale
