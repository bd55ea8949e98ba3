"""Section 10: the default classifier on real data, beside the baselines practitioners pick.

Run on its own: ``python benchmarks/real_data.py``. Five-fold stratified
cross-validation (the same folds for every estimator), each estimator after
a ``StandardScaler`` at its defaults: accuracy, log-loss, the per-fold
accuracy difference to LDA with its standard error, and the mean fit time
of every estimator measured in this run. The last table holds issue 29's
targets, the digits fit time as a ratio to the slower of the RBF SVC and
NCA + kNN measured here. ``lfw_subset`` needs scikit-image (the ``image``
extra) and penguins ``palmerpenguins`` (the ``benchmark`` extra); each is
skipped without its package.
"""

import os
import sys

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

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


def data_sets():
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
    return sets


def estimators():
    return {
        "SoftmaxAttentionClassifier": SoftmaxAttentionClassifier(device="cpu", random_state=0),
        "LinearDiscriminantAnalysis": LinearDiscriminantAnalysis(),
        "LogisticRegression": LogisticRegression(max_iter=2000),
        "SVC (RBF, Platt)": CalibratedClassifierCV(SVC(), ensemble=False),
        "KNeighborsClassifier": KNeighborsClassifier(),
        "NCA + kNN": make_pipeline(
            NeighborhoodComponentsAnalysis(random_state=0), KNeighborsClassifier()
        ),
    }


def main():
    print(f"load average at the start: {os.getloadavg()}")
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    targets, fit_seconds = [], {}
    for data_name, (X, y) in data_sets().items():
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
                    f"{difference.mean():+.4f} +- {difference.std(ddof=1) / np.sqrt(5):.4f}",
                    f"{scores['fit_time'].mean():.3f}",
                ]
            )
        fitted = results["SoftmaxAttentionClassifier"]["estimator"]
        kept = ", ".join(f"{m[-1].init_}/{m[-1].linear_start_}" for m in fitted)
        print_table(
            f"{data_name} ({X.shape[0]} x {X.shape[1]}); attention kept: {kept}",
            ["estimator", "accuracy", "log-loss", "accuracy - LDA (SE)", "fit (s)"],
            rows,
        )
        if data_name == "4 clusters x 3 classes":
            print(f"Bayes rule of the true mixture on this sample: {clusters_bayes_accuracy():.4f}")
        ours = results["SoftmaxAttentionClassifier"]
        nonlinear = max(
            ("SVC (RBF, Platt)", "KNeighborsClassifier"),
            key=lambda name: results[name]["test_accuracy"].mean(),
        )
        to_nonlinear = ours["test_accuracy"] - results[nonlinear]["test_accuracy"]
        difference = ours["test_accuracy"] - lda
        linear_loss = min(
            -results[name]["test_neg_log_loss"].mean()
            for name in ("LinearDiscriminantAnalysis", "LogisticRegression")
        )
        targets.append(
            [
                data_name,
                f"{difference.mean():+.4f} >= -{difference.std(ddof=1) / np.sqrt(5):.4f}",
                f"{-ours['test_neg_log_loss'].mean() / linear_loss:.2f} <= 1.10",
                f"{to_nonlinear.mean():+.4f} ({to_nonlinear.std(ddof=1) / np.sqrt(5):.4f})",
            ]
        )
        fit_seconds[data_name] = {name: s["fit_time"].mean() for name, s in results.items()}
    print_table(
        "targets (issue 29): accuracy - LDA >= -1 SE; log-loss / min(LDA, LogReg); "
        "accuracy - the better of SVC and kNN (SE)",
        ["data", "accuracy - LDA", "log-loss ratio", "accuracy - best of SVC, kNN (SE)"],
        targets,
    )
    digits = fit_seconds["digits"]
    slower = max(digits["SVC (RBF, Platt)"], digits["NCA + kNN"])
    print(
        f"digits fit: attention {digits['SoftmaxAttentionClassifier']:.3f} s, slower of "
        f"SVC and NCA + kNN {slower:.3f} s, ratio "
        f"{digits['SoftmaxAttentionClassifier'] / slower:.2f} (target <= 3)"
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
