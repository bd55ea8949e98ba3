"""The estimators the study compares, each under the name its tables use.

Classifiers sit in a ``Pipeline`` after ``StandardScaler``, as a user would
put them: the linear baselines (LDA, logistic regression), QDA, and the
nonlinear methods a practitioner reaches for (an RBF SVC, k nearest
neighbours, NCA before them, an MLP), each at scikit-learn's defaults but
for more iterations where the default stops before converging.
Denoisers work on the raw coordinates, where the noise is isotropic.
``quick`` trades training iterations for time.
"""

from sklearn.calibration import CalibratedClassifierCV
from sklearn.discriminant_analysis import (
    LinearDiscriminantAnalysis,
    QuadraticDiscriminantAnalysis,
)
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from ..classification._classifier import SoftmaxAttentionClassifier
from ..denoising._gaussian_mixture import GaussianMixtureDenoiser
from ..denoising._linear import LinearAttentionDenoiser
from ..denoising._softmax import SoftmaxAttentionDenoiser
from ._tasks import Task

ATTENTION_CLASSIFIER = "SoftmaxAttentionClassifier"
AFFINE = "best affine map (LinearRegression)"
BAYES = "Bayes (oracle)"

# NCA's gradient holds an n x n matrix of pair weights for each of its
# iterations: on the full study's 8,000 training points that is 512 MB and
# about a minute a fold, so it runs only on tasks up to this size.
NCA_MAX_SAMPLES = 5_000


def classifiers(task: Task, *, quick: bool, device: str, random_state: int) -> dict:
    """Name -> unfitted estimator for one classification task."""
    attention = SoftmaxAttentionClassifier(
        max_iter=60 if quick else 300, device=device, random_state=random_state
    )
    candidates = {
        ATTENTION_CLASSIFIER: make_pipeline(StandardScaler(), attention),
        "LinearDiscriminantAnalysis": make_pipeline(StandardScaler(), LinearDiscriminantAnalysis()),
        "QuadraticDiscriminantAnalysis": make_pipeline(StandardScaler(), _regularised_qda()),
        "LogisticRegression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2_000)),
        # log-loss needs probabilities: Platt's sigmoid fitted on the SVC's
        # out-of-fold decision values, one SVC refitted on all the data
        # (what SVC(probability=True) did before scikit-learn 1.9 deprecated it)
        "SVC (RBF)": make_pipeline(StandardScaler(), CalibratedClassifierCV(SVC(), ensemble=False)),
        "KNeighborsClassifier": make_pipeline(StandardScaler(), KNeighborsClassifier()),
        "MLPClassifier": make_pipeline(
            StandardScaler(), MLPClassifier(max_iter=1_000, random_state=random_state)
        ),
    }
    if len(task.X) <= NCA_MAX_SAMPLES:
        candidates["NCA + kNN"] = make_pipeline(
            StandardScaler(),
            NeighborhoodComponentsAnalysis(random_state=random_state),
            KNeighborsClassifier(),
        )
    if task.oracle is not None:
        candidates[BAYES] = task.oracle
    return candidates


def _regularised_qda() -> QuadraticDiscriminantAnalysis:
    """QDA that stays defined when a class has fewer samples than features.

    Digits has constant border pixels and, in small folds, fewer images per
    class than its 64 features. Recent scikit-learn refuses a rank-deficient
    class covariance under the default solver but accepts a fixed shrinkage
    (Ledoit-Wolf's "auto" still left one digit class singular); older
    versions regularise through ``reg_param``. Both shrink by 0.1 and gave
    the same digits accuracy (0.949 over 5 folds, scikit-learn 1.9).
    """
    if "shrinkage" in QuadraticDiscriminantAnalysis().get_params():
        return QuadraticDiscriminantAnalysis(solver="eigen", shrinkage=0.1)
    return QuadraticDiscriminantAnalysis(reg_param=0.1)


def denoisers(task: Task, *, quick: bool, device: str, random_state: int) -> dict:
    """Name -> unfitted estimator for one denoising task."""
    n_components = task.n_components
    attention = {
        "device": device,
        "random_state": random_state,
        "n_components": n_components,
        "max_iter": 100 if quick else 200,
    }
    candidates = {
        # with clean targets the default residual heads are kernel heads over
        # them; "bilinear" keeps the paper's heads over the noisy points
        "SoftmaxAttentionDenoiser (2 residual heads)": SoftmaxAttentionDenoiser(2, **attention),
        "SoftmaxAttentionDenoiser (2 residual heads, bilinear)": SoftmaxAttentionDenoiser(
            2, head="bilinear", **attention
        ),
        "SoftmaxAttentionDenoiser (2 plain heads)": SoftmaxAttentionDenoiser(
            2, residual=False, **attention
        ),
        "SoftmaxAttentionDenoiser (1 residual head)": SoftmaxAttentionDenoiser(1, **attention),
        # this package's extension: a key offset gives the gate its norm term,
        # and a key norm narrows each head to a Gaussian kernel
        "SoftmaxAttentionDenoiser (2 residual heads, key norm)": SoftmaxAttentionDenoiser(
            2, key_bias="norm", **attention
        ),
        "SoftmaxAttentionDenoiser (1 plain head)": SoftmaxAttentionDenoiser(
            1, residual=False, **attention
        ),
        # starts at the best linear estimator, so few steps are needed; each
        # step costs O(batch p^3) for the leave-self-out prompts
        "LinearAttentionDenoiser": LinearAttentionDenoiser(
            device=device, random_state=random_state, max_iter=20 if quick else 200
        ),
        # the plug-in baseline needs the noise level; the attention denoisers
        # estimate it from the (noisy, clean) pairs
        "GaussianMixtureDenoiser": GaussianMixtureDenoiser(
            n_components, noise_variance=task.noise_variance, random_state=random_state
        ),
        # the linear special case of every softmax denoiser with a skip path:
        # least squares from noisy to clean points, with an intercept
        AFFINE: LinearRegression(),
    }
    if task.oracle is not None:
        candidates[BAYES] = task.oracle
    return candidates
