"""SoftmaxAttentionClassifier: the paper's LDA head, trained in context."""

import math
from numbers import Integral, Real

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._device import as_tensor, resolve_device
from ._training import PlateauStop, minibatch_adam
from ._validation import choose_prompt, prompt_positions, unchanged_on_error
from .attention import softmax_attention
from .lda import class_statistics, effective_coordinates, lda_construction, lda_coordinates

_FLOAT_DTYPES = [np.float64, np.float32]

# How each parameter scales when the features are divided by their RMS
# ``scale``: scores x_i^T U11^T x scale as scale^2, y_i u12^T x and the read-out
# v21^T x_i as scale, so U11 * scale^2, u12 * scale and v21 * scale are invariant.
_SCALE_POWER = {"U11": 2, "u12": 1, "v21": 1, "v22": 0}


class SoftmaxAttentionClassifier(ClassifierMixin, BaseEstimator):
    """Classify by softmax attention over a prompt of labelled examples.

    The training pairs are the prompt: token ``i`` is ``(x_i, label block)``
    and a query is ``(x, 0)``. For two classes the label block is
    ``y_i`` in {-1, +1} and the prediction is the last output coordinate::

        f(x) = sum_heads sum_i softmax_i(x_i^T U11^T x + y_i u12^T x) (v21^T x_i + v22 y_i)

    trained with the logistic loss (the paper's model,
    ``theta = (U11, u12, v21, v22)``). With ``C > 2`` classes the label block is
    the one-hot ``e_{y_i}``, ``u12`` and ``v21`` gain a class axis, ``v22`` is
    ``C x C``, and the ``C`` output scores are trained with cross-entropy.

    Parameters
    ----------
    n_heads : int, default=1
        Number of softmax heads, whose scores are summed.
    init : {"zero", "random", "bayes"}, default="zero"
        ``"zero"``: ``U11 = 0``, ``u12 = 0``, ``v22 = 0``, ``v21`` random (the
        initialisation of Theorem 3.6; the default because it trains
        reliably, see Notes). ``"random"``: every block Gaussian.
        ``"bayes"``: the exact construction of Lemma B.3 from the prompt's
        class means, pooled covariance and prior (for ``C > 2`` classes its
        one-hot analogue), so that with ``max_iter=0`` the decision function
        is LDA's up to the finite-prompt error. That error is amplified by the
        construction's read-out, which grows like ``1 / |2 pi_+ - 1|`` as
        the prompt's prior nears 1/2: on 20,000 points with prior 0.495 the
        untrained head scored at chance while LDA reached 0.92 accuracy, so
        train from it (or use ``"zero"``).
    prompt_size : int, default=None
        ``None``: every training pair is in the prompt; an int: a random
        subset of that size (an error if it misses a class).
    max_iter : int, default=300
        Iterations of the solver; 0 keeps the initial parameters.
    learning_rate : float, default=0.02
        Step size (peak step for Adam, decayed on a cosine schedule; constant
        for gradient descent).
    alpha : float, default=0.01
        L2 penalty on the key-query blocks ``U11`` and ``u12``, in units where
        the features have root-mean-square 1 (the read-out is not
        penalised). Without it Adam lets the gate sharpen on the sample's
        noise in high dimension: on the paper's C2 configuration (d = 20,
        n = 5,000, learning rate 0.02) held-out log-loss was 12-29% above
        Bayes without the penalty and 0.6% above with it. Set 0 to study
        the unregularised dynamics of Section 3.3.
    tol : float, default=None
        Early stopping. ``None`` runs exactly ``max_iter`` iterations (Adam's
        cosine decay is planned over them) and never warns. A float: the
        training loss (mean log-loss plus penalty) is averaged over blocks of
        10 iterations and training stops once ``n_iter_no_change`` blocks in
        a row fail to beat the best block by ``tol``; running out of
        ``max_iter`` first emits a ``ConvergenceWarning``.
    n_iter_no_change : int, default=5
        Blocks of 10 iterations without an improvement of ``tol`` that stop
        training; used only with ``tol``.
    batch_size : int, default=256
        Training queries per Adam step, and queries evaluated at once by the
        prediction methods and by each gradient-descent pass.
    solver : {"adam", "gd"}, default="adam"
        ``"gd"``: full-batch gradient descent with a constant step, for
        studying the training dynamics of Section 3.3.
    device : str, default="auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the prompt subset and the minibatches.
    verbose : int, default=0
        Print the training loss about ten times (1) or every iteration (2).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels; ``classes_[1]`` is the positive class (+1) when binary.
    prompt_X_ : ndarray of shape (L, n_features)
        Features of the prompt.
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
    history_ : dict of ndarray
        Per iteration, at the parameters where that iteration's loss was
        computed (before its step): ``"loss"``, and for binary problems the effective
        coordinates ``"w"`` (n_iter, n_heads, d), ``"b"``, ``"r"`` (n_iter,
        n_heads), ``"s"`` (n_iter, n_heads, d), computed from the prompt's
        class means, pooled covariance and prior, and ``"balance"``
        ``||U11||_F^2 - ||v21||^2`` (n_iter, n_heads).
    n_iter_ : int
        Number of training iterations run.
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
    sk_softmix.lda.effective_coordinates : The formulas behind ``history_``.

    Notes
    -----
    On the population ``x | y = c ~ N(m_c, Gamma)`` a binary head equals
    ``f(x) = w^T x + b + r sigmoid(s0 + s^T x)`` with ``w = U11 Gamma v21``,
    ``b = v21^T m_{-1} - v22``, ``r = v21^T Delta + 2 v22``,
    ``s = 2 u12 + U11 Delta``, ``s0 = log(pi_+/(1 - pi_+))`` (eq. 6-7); one
    head represents the LDA score exactly and every critical point of the
    effective risk is a global minimum (Theorem 3.1). From the zero
    initialisation gradient flow converges exponentially to Bayes in the
    balanced symmetric case while ``||U11||_F^2 - ||v21||^2`` is conserved
    (Theorem 3.6); the paper reports that an all-Gaussian initialisation
    struggles in dimension 20 while this one converges fast, hence the
    default. On several clusters per class the gate becomes selective, which
    LDA cannot be.

    Training runs in float32 on features divided by their root-mean-square
    (an exact symmetry of the model), each training query left out of its
    own prompt. Prediction costs ``O(n_queries L n_features n_heads)``.

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
    >>> clf = SoftmaxAttentionClassifier(max_iter=100, learning_rate=0.1, random_state=0)
    >>> bool(clf.fit(X, y).score(X, y) > 0.85)  # Bayes accuracy here: 0.92
    True

    The head's effective ``w`` points along the prompt's LDA direction ``w*``:

    >>> w, w_star = clf.effective_coordinates()["w"][0], clf.bayes_coordinates()[0]
    >>> bool(w @ w_star / (np.linalg.norm(w) * np.linalg.norm(w_star)) > 0.99)
    True
    """

    _parameter_constraints: dict = {
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"zero", "random", "bayes"})],
        "prompt_size": [Interval(Integral, 2, None, closed="left"), None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"adam", "gd"})],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "alpha": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_heads=1,
        *,
        init="zero",
        prompt_size=None,
        max_iter=300,
        learning_rate=0.02,
        alpha=0.01,
        tol=None,
        n_iter_no_change=5,
        batch_size=256,
        solver="adam",
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.n_heads = n_heads
        self.init = init
        self.prompt_size = prompt_size
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.solver = solver
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
        with unchanged_on_error(self):
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
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=_FLOAT_DTYPES)
        scores = self._scores(X)
        return scores[:, 0] if len(self.classes_) == 2 else scores

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
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=_FLOAT_DTYPES)
        logits = torch.from_numpy(self._scores(X))
        if len(self.classes_) == 2:
            logits = torch.cat([torch.zeros_like(logits), logits], dim=1)
        return torch.log_softmax(logits, dim=1).numpy()

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
        log_proba = self.predict_log_proba(X)
        return self.classes_[np.argmax(log_proba, axis=1)]

    def effective_coordinates(self) -> dict:
        """Effective coordinates ``(w, b, r, s, s0)`` of a fitted binary model.

        Computed head by head from the prompt's class means, pooled covariance
        and prior (:func:`sk_softmix.lda.effective_coordinates`); compare
        ``w`` and ``b`` (with ``r``, ``s``) to
        ``LinearDiscriminantAnalysis().coef_`` and ``intercept_``, or to
        :func:`sk_softmix.lda.lda_coordinates`.

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
        per_head = [
            effective_coordinates(
                self.U11_[h], self.u12_[h], self.v21_[h], self.v22_[h], *statistics
            )
            for h in range(self.n_heads)
        ]
        coordinates = {key: np.array([c[key] for c in per_head]) for key in ("w", "b", "r", "s")}
        coordinates["s0"] = per_head[0]["s0"]
        return coordinates

    def bayes_coordinates(self) -> tuple[np.ndarray, float]:
        """Bayes (LDA) coordinates ``(w*, b*)`` of the prompt of a binary model.

        From the prompt's class means, pooled covariance and prior
        (:func:`sk_softmix.lda.lda_coordinates`): the score ``w*^T x + b*``
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
        X, y = validate_data(self, X, y, dtype=_FLOAT_DTYPES, ensure_min_samples=2)
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
        device = resolve_device(self.device)
        random_state = check_random_state(self.random_state)
        prompt_indices = choose_prompt(len(X), self.prompt_size, random_state)
        prompt_X, prompt_y = X[prompt_indices], labels[prompt_indices]
        if len(np.unique(prompt_y)) < len(classes):
            raise ValueError(
                f"The prompt of prompt_size={self.prompt_size} misses a class; use a larger "
                "prompt_size."
            )
        self.classes_ = classes  # needed by the helpers below; restored on error
        parameters = self._initial_parameters(prompt_X.astype(np.float64), prompt_y, random_state)
        history = {"loss": np.empty(0)}
        if self.max_iter > 0:
            parameters, history = self._train(
                X, labels, prompt_indices, parameters, random_state, device
            )
        for name, value in parameters.items():
            setattr(self, f"{name}_", value)
        self.prompt_X_, self.prompt_y_, self.prompt_indices_ = prompt_X, prompt_y, prompt_indices
        self.history_ = history
        self.n_iter_ = len(history["loss"])
        self.device_ = str(device)

    def _initial_parameters(self, prompt_X, prompt_y, random_state):
        """Starting ``(U11, u12, v21, v22)``, NumPy float64 in the data's units."""
        n_features, n_classes = prompt_X.shape[1], len(self.classes_)
        binary = n_classes == 2
        label_width = 1 if binary else n_classes
        H = self.n_heads
        scale = math.sqrt(max(float(np.mean(prompt_X**2)), np.finfo(float).tiny))
        shapes = {
            "U11": (H, n_features, n_features),
            "u12": (H, label_width, n_features),
            "v21": (H, label_width, n_features),
            "v22": (H, label_width, label_width),
        }
        if self.init == "bayes":
            blocks = self._bayes_blocks(prompt_X, prompt_y, binary)
            parameters = {
                name: np.concatenate([block[None], np.zeros((H - 1, *block.shape))])
                for name, block in blocks.items()
            }
        else:
            # unit-variance read-out in units where the features have RMS 1
            parameters = {
                name: random_state.normal(size=shape) / np.sqrt(n_features)
                for name, shape in shapes.items()
            }
            for name in parameters:
                parameters[name] /= scale ** _SCALE_POWER[name]
            if self.init == "zero":
                for name in ("U11", "u12", "v22"):
                    parameters[name] = np.zeros(shapes[name])
        return self._squeeze_binary(parameters) if binary else parameters

    def _bayes_blocks(self, prompt_X, prompt_y, binary):
        if binary:
            U11, u12, v21, v22 = lda_construction(*class_statistics(prompt_X, 2 * prompt_y - 1))
            return {"U11": U11, "u12": u12[None], "v21": v21[None], "v22": np.array([[v22]])}
        # One-hot analogue: u12 = -M U11^T keeps the gate at the priors, then
        # v21 Gamma = W and v22 (pi) = b - v21 mbar give the LDA logits W x + b.
        n_classes = len(self.classes_)
        means = np.stack([prompt_X[prompt_y == c].mean(axis=0) for c in range(n_classes)])
        priors = np.bincount(prompt_y, minlength=n_classes) / len(prompt_y)
        centred = prompt_X - means[prompt_y]
        covariance = centred.T @ centred / len(prompt_X)
        weights = np.linalg.solve(covariance, means.T).T  # (C, d): Gamma^{-1} m_c
        biases = -0.5 * np.sum(weights * means, axis=1) + np.log(priors)
        v21 = np.linalg.solve(covariance, weights.T).T  # W Gamma^{-1}
        v22 = np.outer(biases - v21 @ (priors @ means), np.ones(n_classes))
        return {"U11": np.eye(prompt_X.shape[1]), "u12": -means, "v21": v21, "v22": v22}

    @staticmethod
    def _squeeze_binary(parameters):
        """Binary blocks in the paper's shapes: u12, v21 (H, d) and v22 (H,)."""
        return {
            "U11": parameters["U11"],
            "u12": parameters["u12"][:, 0],
            "v21": parameters["v21"][:, 0],
            "v22": parameters["v22"][:, 0, 0],
        }

    def _train(self, X, labels, prompt_indices, parameters, random_state, device):
        scale = math.sqrt(
            max(float(np.mean(np.square(X[prompt_indices], dtype=np.float64))), 1e-300)
        )
        queries = as_tensor(X / scale, device, torch.float32)
        targets = as_tensor(labels, device)
        prompt = self._tokens(
            queries[as_tensor(prompt_indices, device)], targets[as_tensor(prompt_indices, device)]
        )
        exclude = as_tensor(prompt_positions(prompt_indices, len(X)), device)
        trained = {
            name: as_tensor(
                value * scale ** _SCALE_POWER[name], device, torch.float32
            ).requires_grad_(True)
            for name, value in parameters.items()
        }
        snapshots = []

        def loss_on(batch):
            scores = self._forward(trained, queries[batch], prompt, exclude[batch])
            if len(self.classes_) == 2:
                signs = 2.0 * targets[batch].to(scores.dtype) - 1
                loss = F.softplus(-signs * scores[:, 0]).mean()
            else:
                loss = F.cross_entropy(scores, targets[batch])
            snapshots.append({name: value.detach().clone() for name, value in trained.items()})
            if self.alpha:
                loss = loss + self.alpha * (
                    (trained["U11"] ** 2).sum() + (trained["u12"] ** 2).sum()
                )
            return loss

        if self.solver == "adam":
            losses = minibatch_adam(
                loss_on,
                list(trained.values()),
                len(X),
                max_iter=self.max_iter,
                learning_rate=self.learning_rate,
                batch_size=self.batch_size,
                random_state=random_state,
                device=device,
                verbose=self.verbose,
                name=type(self).__name__,
                tol=self.tol,
                n_iter_no_change=self.n_iter_no_change,
            )
        else:
            losses = self._gradient_descent(loss_on, trained, len(X), device)
        fitted = {
            name: tensor.detach().cpu().numpy().astype(np.float64) / scale ** _SCALE_POWER[name]
            for name, tensor in trained.items()
        }
        history = {"loss": losses}
        if len(self.classes_) == 2:
            history.update(self._coordinate_history(snapshots, prompt_indices, X, labels, scale))
        return fitted, history

    def _gradient_descent(self, loss_on, trained, n_queries, device):
        """Full-batch gradient descent: every training query, every step."""
        everything = torch.arange(n_queries, device=device)
        losses = torch.empty(self.max_iter, device=device)
        report_every = 1 if self.verbose > 1 else max(1, self.max_iter // 10)
        plateau = PlateauStop(self.tol, self.n_iter_no_change)
        n_run = self.max_iter
        for iteration in range(self.max_iter):
            loss = loss_on(everything)
            gradients = torch.autograd.grad(loss, list(trained.values()))
            with torch.no_grad():
                for tensor, gradient in zip(trained.values(), gradients, strict=True):
                    tensor -= self.learning_rate * gradient
            losses[iteration] = loss.detach()
            if self.verbose and (iteration % report_every == 0 or iteration == self.max_iter - 1):
                print(
                    f"[{type(self).__name__}] iteration {iteration + 1}/{self.max_iter}  "
                    f"loss {loss.item():.6g}"
                )
            if plateau.should_stop(losses, iteration):
                n_run = iteration + 1
                break
        plateau.warn_if_unconverged(self.max_iter, type(self).__name__)
        return losses[:n_run].cpu().numpy().astype(np.float64)

    def _coordinate_history(self, snapshots, prompt_indices, X, labels, scale):
        """Effective coordinates and balance at each iteration (data units)."""
        statistics = class_statistics(
            X[prompt_indices].astype(np.float64), 2 * labels[prompt_indices] - 1
        )
        history = {key: [] for key in ("w", "b", "r", "s", "balance")}
        # one device-to-host copy per parameter for the whole run, not per iteration
        stacked = {
            name: torch.stack([snapshot[name] for snapshot in snapshots]).cpu().numpy()
            for name in snapshots[0]
        }
        for iteration in range(len(snapshots)):
            theta = {
                name: values[iteration].astype(np.float64) / scale ** _SCALE_POWER[name]
                for name, values in stacked.items()
            }
            per_head = [
                effective_coordinates(
                    theta["U11"][h], theta["u12"][h], theta["v21"][h], theta["v22"][h], *statistics
                )
                for h in range(self.n_heads)
            ]
            for key in ("w", "b", "r", "s"):
                history[key].append([c[key] for c in per_head])
            history["balance"].append(
                np.sum(theta["U11"] ** 2, axis=(1, 2)) - np.sum(theta["v21"] ** 2, axis=1)
            )
        return {key: np.asarray(value) for key, value in history.items()}

    # -- the forward pass --------------------------------------------------------

    def _tokens(self, features, labels):
        """Prompt tokens ``(x_i, label block)``: ``y_i`` in {-1, 1}, or one-hot."""
        n_classes = len(self.classes_)
        if n_classes == 2:
            block = (2.0 * labels.to(features.dtype) - 1).unsqueeze(-1)
        else:
            block = F.one_hot(labels, n_classes).to(features.dtype)
        return torch.cat([features, block], dim=-1)

    def _forward(self, parameters, features, prompt, exclude):
        """Scores (n, 1) or logits (n, C) of the queries ``(x, 0)``."""
        U11, u12, v21, v22 = (parameters[name] for name in ("U11", "u12", "v21", "v22"))
        if u12.dim() == 2:  # binary: one label column, one output
            u12, v21, v22 = u12.unsqueeze(1), v21.unsqueeze(1), v22.view(-1, 1, 1)
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
        V = torch.cat([v21, v22], dim=2)  # (H, outputs, d + width)
        queries = torch.cat(
            [
                features,
                torch.zeros(len(features), width, dtype=features.dtype, device=features.device),
            ],
            dim=1,
        )
        heads = softmax_attention(
            queries, prompt, U, V, exclude=exclude, batch_size=self.batch_size
        )
        return heads.sum(dim=0)

    def _scores(self, X):
        device = resolve_device(self.device)
        dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        parameters = {
            name: as_tensor(getattr(self, f"{name}_"), device, dtype) for name in _SCALE_POWER
        }
        prompt = self._tokens(
            as_tensor(self.prompt_X_, device, dtype), as_tensor(self.prompt_y_, device)
        )
        queries = as_tensor(X, device, dtype)
        with torch.no_grad():
            # the engine chunks by batch_size, reusing one scores buffer
            return self._forward(parameters, queries, prompt, None).cpu().numpy()
