"""The study's data: classification and denoising tasks, with their oracles.

Each task is a small record of arrays plus, where the truth is known, the
Bayes-optimal estimator to compare against.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.utils import check_random_state

from ..datasets import make_gaussian_mixture, make_lda
from ..denoising._bayes import BayesDenoiser
from ._oracle import MixtureBayesClassifier

# The paper's LDA configurations (Gamma = I): C1 in the plane with an
# unbalanced prior, C2 in dimension 20 with the classes apart along e_1.
C1 = {"means": np.array([[0.0, 1.0], [1.0, 0.0]]), "prior": 0.6}
C2 = {"means": np.zeros((2, 20)), "prior": 0.5}
C2["means"][0, 0], C2["means"][1, 0] = -1.0, 1.0

# Each class of the XOR mixture is two antipodal unit-variance clusters, so
# every linear rule is near chance while the Bayes rule gets about 95.6%.
XOR_CENTRES = {0: np.array([[2.0, -2.0], [-2.0, 2.0]]), 1: np.array([[2.0, 2.0], [-2.0, -2.0]])}

# The paper's Figure 2 task: two clusters in the plane, gamma = 1, xi = 2.
FIGURE_2 = {"means": np.array([[3.0, 0.0], [0.0, 3.0]]), "covariance": 1.0, "noise_variance": 4.0}

# Three clusters of norms 0, 5 and 7: the paper's dot-product scores have no
# gate term for unequal norms (user guide, "Key-bias heads").
UNEQUAL_NORMS = {
    "means": np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 7.0]]),
    "covariance": 1.0,
    "noise_variance": 1.0,
}

# Pixel noise of the digits task, on intensities scaled to [0, 1].
DIGITS_NOISE_STD = 0.3


TASK_NAMES = (
    "C1",
    "C2",
    "XOR",
    "iris",
    "wine",
    "breast_cancer",
    "digits",
    "figure2",
    "unequal_norms",
    "mixture16",
    "digits_noisy",
)


@dataclass
class Task:
    """One dataset of the study.

    ``X`` holds features (classification) or noisy points (denoising) and
    ``y`` labels or clean points; ``oracle`` is the Bayes estimator when the
    truth is known, else None. Denoising tasks also carry the noise variance
    a number of mixture components for the estimators that need them and,
    for images, the peak intensity that PSNR refers to.
    """

    name: str
    description: str
    X: np.ndarray
    y: np.ndarray
    oracle: BaseEstimator | None = None
    noise_variance: float | None = None
    n_components: int | None = None
    peak: float | None = None


def xor_mixture(n_samples: int, random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Draw the XOR mixture: labels in {0, 1}, each class two antipodal clusters."""
    rng = check_random_state(random_state)
    y = rng.randint(2, size=n_samples)
    cluster = rng.randint(2, size=n_samples)
    centres = np.stack([XOR_CENTRES[label][k] for label, k in zip(y, cluster, strict=True)])
    return centres + rng.standard_normal((n_samples, 2)), y


def _lda_oracle(config: dict) -> MixtureBayesClassifier:
    means = {-1: config["means"][:1], 1: config["means"][1:]}
    return MixtureBayesClassifier(means, {-1: 1 - config["prior"], 1: config["prior"]})


def classification_tasks(n_synthetic: int, random_state: int) -> list[Task]:
    """The paper's C1 and C2, the XOR mixture and four datasets shipped with sklearn."""
    X1, y1 = make_lda(n_synthetic, **C1, random_state=random_state)
    X2, y2 = make_lda(n_synthetic, **C2, random_state=random_state + 1)
    X3, y3 = xor_mixture(n_synthetic, random_state=random_state + 2)
    tasks = [
        Task("C1", "paper's LDA configuration C1 (d = 2, prior 0.6)", X1, y1, _lda_oracle(C1)),
        Task("C2", "paper's LDA configuration C2 (d = 20, balanced)", X2, y2, _lda_oracle(C2)),
        Task(
            "XOR",
            "XOR mixture (two clusters per class, d = 2)",
            X3,
            y3,
            MixtureBayesClassifier(XOR_CENTRES, {0: 0.5, 1: 0.5}),
        ),
    ]
    for name, loader in [
        ("iris", load_iris),
        ("wine", load_wine),
        ("breast_cancer", load_breast_cancer),
        ("digits", load_digits),
    ]:
        X, y = loader(return_X_y=True)
        tasks.append(Task(name, f"sklearn.datasets.load_{name}", X.astype(np.float64), y))
    return tasks


def _high_dimensional_mixture(random_state: int) -> dict:
    """Four components in dimension 16 with means of norm 4 in random directions."""
    rng = np.random.default_rng(random_state)
    means = rng.standard_normal((4, 16))
    means *= 4.0 / np.linalg.norm(means, axis=1, keepdims=True)
    return {"means": means, "covariance": 0.5, "noise_variance": 1.0}


def noisy_digits(random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """``load_digits`` scaled to [0, 1], plus Gaussian pixel noise of std 0.3."""
    clean = load_digits().data / 16.0
    rng = np.random.default_rng(random_state)
    return clean + DIGITS_NOISE_STD * rng.standard_normal(clean.shape), clean


def denoising_tasks(n_synthetic: int, random_state: int) -> list[Task]:
    """Figure 2's task, a mixture of unequal norms, a 16-dimensional
    four-component mixture, and noisy digits."""
    tasks = []
    for name, description, mixture in [
        ("figure2", "paper's Figure 2 task (p = 2, gamma = 1, xi = 2)", FIGURE_2),
        (
            "unequal_norms",
            "three components of norms 0, 5 and 7 (p = 2, gamma = 1, xi = 1)",
            UNEQUAL_NORMS,
        ),
        (
            "mixture16",
            "four components in p = 16 (|m_k| = 4, gamma^2 = 0.5, xi = 1)",
            _high_dimensional_mixture(random_state),
        ),
    ]:
        Z, X, _ = make_gaussian_mixture(n_synthetic, **mixture, random_state=random_state)
        oracle = BayesDenoiser(**mixture)
        n_components = len(mixture["means"])
        tasks.append(Task(name, description, Z, X, oracle, mixture["noise_variance"], n_components))
    Z, X = noisy_digits(random_state)
    description = f"load_digits / 16 plus N(0, {DIGITS_NOISE_STD}^2) pixel noise"
    # one component per digit class
    tasks.append(Task("digits_noisy", description, Z, X, None, DIGITS_NOISE_STD**2, 10, peak=1.0))
    return tasks
