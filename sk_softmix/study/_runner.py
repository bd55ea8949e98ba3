"""Running the study: cross-validation and grid searches over every task.

Every estimator of a task is scored on the same folds (one splitter with a
fixed seed per task), so that per-fold ratios such as MSE / Bayes compare
like with like.
"""

import datetime
import os
import platform
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import scipy
import sklearn
import torch
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_validate

from ..attention._device import resolve_device
from ..classification._classifier import SoftmaxAttentionClassifier
from ._estimators import bilinear_training, classifiers, denoisers
from ._summary import add_relative_scores
from ._tasks import TASK_NAMES, Task, classification_tasks, denoising_tasks

CLASSIFICATION_SCORING = {"accuracy": "accuracy", "log_loss": "neg_log_loss"}
DENOISING_SCORING = {"mse": "neg_mean_squared_error"}
# classification folds keep the class proportions
SPLITTERS = {"classification": StratifiedKFold, "denoising": KFold}
SEARCH_SCORING = {"classification": "neg_log_loss", "denoising": "neg_mean_squared_error"}
# sklearn's scorers are "higher is better"; these are reported as losses
LOSSES = ("log_loss", "mse")


@dataclass
class StudyResult:
    """Everything a report needs.

    Parameters
    ----------
    rows : list of dict
        One per (section, task, estimator, fold): the fold's scores and times.
    searches : list of dict
        One per (search, candidate, fold) of the grid searches.
    fitted : dict
        ``(section, task, estimator)`` -> the estimator fitted on the first
        fold's training part, for the figures.
    test_indices : dict
        ``(section, task)`` -> the first fold's test indices.
    tasks : dict
        ``(section, task)`` -> a ``Task`` record (arrays, oracle, noise level).
    metadata : dict
        Versions, device, seed, machine, date, settings, the seconds each
        unit of work took and the warnings seen.

    See Also
    --------
    run_study : Fills one in.
    write_report : Writes one out.

    Examples
    --------
    >>> from sk_softmix.study import StudyResult
    >>> StudyResult().rows
    []
    """

    rows: list = field(default_factory=list)
    searches: list = field(default_factory=list)
    fitted: dict = field(default_factory=dict)
    test_indices: dict = field(default_factory=dict)
    tasks: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)


def run_study(
    *,
    quick: bool = False,
    device: str = "auto",
    random_state: int = 0,
    n_jobs: int | None = None,
    n_folds: int = 5,
    n_synthetic: int | None = None,
    max_samples: int | None = None,
    tasks=None,
    progress: bool = True,
) -> StudyResult:
    """Cross-validate every estimator on every task and run the grid searches.

    Parameters
    ----------
    quick : bool, default=False
        Fewer training iterations and smaller synthetic samples (about two
        minutes on 2 CPU cores instead of about ten).
    device : str, default="auto"
        Device of the attention estimators: ``"auto"``, ``"cpu"`` or ``"cuda"``.
    random_state : int, default=0
        Seed of the data, the folds and every estimator.
    n_jobs : int, default=None
        Passed to ``cross_validate`` and ``GridSearchCV``.
    n_folds : int, default=5
        Folds of every cross-validation.
    n_synthetic : int, default=None
        Size of each synthetic dataset; 2,000 in quick mode, 10,000 otherwise.
    max_samples : int, default=None
        When set, every dataset (synthetic or real) is subsampled to at most
        this many rows, for smoke tests.
    tasks : list of str, default=None
        Names of the tasks to run (``"C1"``, ``"C2"``, ``"XOR"``, ``"iris"``,
        ``"wine"``, ``"breast_cancer"``, ``"digits"``, ``"figure2"``, ``"unequal_norms"``,
        ``"mixture16"``, ``"digits_noisy"``); None runs them all. A grid
        search runs when its task does.
    progress : bool, default=True
        Show a progress bar (tqdm) on standard error.

    Returns
    -------
    StudyResult
        Every fold's scores, the grid searches, the first fold's fitted
        estimators and the run's metadata.

    Examples
    --------
    >>> from sk_softmix.study import run_study
    >>> result = run_study(quick=True, device="cpu", tasks=["C1"], n_folds=2,
    ...                    max_samples=100, progress=False)
    >>> sorted({row["estimator"] for row in result.rows})[:2]
    ['Bayes (oracle)', 'KNeighborsClassifier']
    """
    from tqdm.auto import tqdm

    resolved = resolve_device(device)
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2; got {n_folds}.")
    if n_synthetic is None:
        n_synthetic = 2_000 if quick else 10_000
    started = time.perf_counter()
    result = StudyResult()
    settings = {"quick": quick, "device": str(resolved), "random_state": random_state}
    units = _plan(result, settings, n_jobs, n_folds, n_synthetic, max_samples, tasks)
    warm_up_seconds = _warm_up(resolved)
    seen_warnings: dict[str, int] = {}
    unit_seconds = {}
    with tqdm(total=len(units), desc="sk-softmix compare", disable=not progress) as bar:
        for label, unit in units:
            bar.set_postfix_str(label, refresh=True)
            unit_started = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                unit()
            unit_seconds[label] = time.perf_counter() - unit_started
            for warning in caught:
                key = (
                    f"{label}: {warning.category.__name__}: {str(warning.message).splitlines()[0]}"
                )
                seen_warnings[key] = seen_warnings.get(key, 0) + 1
            bar.update()
    add_relative_scores(result)
    result.metadata = _metadata(settings, n_jobs, n_folds, n_synthetic, max_samples)
    result.metadata["warnings"] = seen_warnings
    result.metadata["unit_seconds"] = unit_seconds
    result.metadata["warm_up_seconds"] = warm_up_seconds
    result.metadata["elapsed_seconds"] = time.perf_counter() - started
    return result


def _warm_up(device) -> float:
    """Seconds of one tiny fit and prediction, run before any fold is timed.

    torch's one-off start-up (importing ``torch._dynamo`` on the first
    optimiser, about 1.5 s; CUDA's context on a GPU) would otherwise land in
    the first fold's fit time. Workers of ``n_jobs`` each still pay it once.
    """
    started = time.perf_counter()
    X = np.random.default_rng(0).normal(size=(20, 2))
    labels = np.arange(20) % 2
    # bilinear heads: they train with an optimiser, as the denoisers do
    model = SoftmaxAttentionClassifier(
        head="bilinear", max_iter=2, device=str(device), random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, labels).predict(X)
    return time.perf_counter() - started


def _subsample(task: Task, max_samples: int | None, random_state: int) -> Task:
    if max_samples is None or len(task.X) <= max_samples:
        return task
    keep = np.random.default_rng(random_state).permutation(len(task.X))[:max_samples]
    description = task.description + f", subsample of {max_samples}"
    return replace(task, description=description, X=task.X[keep], y=task.y[keep])


def _plan(result, settings, n_jobs, n_folds, n_synthetic, max_samples, selected) -> list:
    """The study as a list of (label, callable) units, one progress step each."""
    known = set(TASK_NAMES)
    if selected is not None and not set(selected) <= known:
        unknown = sorted(set(selected) - known)
        raise ValueError(f"unknown task(s) {unknown}; choose from {list(TASK_NAMES)}.")
    seed, quick, device = settings["random_state"], settings["quick"], settings["device"]
    units = []
    for section, make_tasks, make_estimators, scoring in [
        ("classification", classification_tasks, classifiers, CLASSIFICATION_SCORING),
        ("denoising", denoising_tasks, denoisers, DENOISING_SCORING),
    ]:
        for task in make_tasks(n_synthetic, seed):
            if selected is not None and task.name not in selected:
                continue
            task = _subsample(task, max_samples, seed)
            result.tasks[section, task.name] = task
            folds = SPLITTERS[section](n_folds, shuffle=True, random_state=seed)
            estimators = make_estimators(task, quick=quick, device=device, random_state=seed)
            for name, estimator in estimators.items():
                units.append(
                    (
                        f"{task.name} / {name}",
                        _cross_validation(
                            result, section, task, name, estimator, folds, scoring, n_jobs
                        ),
                    )
                )
    units += _grid_searches(result, settings, n_jobs, n_folds)
    return units


def _cross_validation(result, section, task, name, estimator, folds, scoring, n_jobs) -> Callable:
    def run():
        scores = cross_validate(
            estimator,
            task.X,
            task.y,
            cv=folds,
            scoring=scoring,
            n_jobs=n_jobs,
            return_estimator=True,
            return_indices=True,
            error_score="raise",
        )
        for fold in range(len(scores["fit_time"])):
            row = {
                "section": section,
                "task": task.name,
                "estimator": name,
                "fold": fold,
                "fit_seconds": float(scores["fit_time"][fold]),
                "score_seconds": float(scores["score_time"][fold]),
            }
            for metric in scoring:
                sign = -1.0 if metric in LOSSES else 1.0
                row[metric] = sign * float(scores[f"test_{metric}"][fold])
            result.rows.append(row)
        result.fitted[section, task.name, name] = scores["estimator"][0]
        result.test_indices[section, task.name] = scores["indices"]["test"][0]

    return run


def _grid_searches(result, settings, n_jobs, n_folds) -> list:
    """Small searches: the classifier's kind and number of heads, the denoisers' components.

    Each search tunes the very estimator the cross-validation tables report.
    """
    seed, quick, device = settings["random_state"], settings["quick"], settings["device"]
    builders = {"classification": classifiers, "denoising": denoisers}
    searches = [
        (
            "classification",
            "breast_cancer",
            "SoftmaxAttentionClassifier",
            {},
            [
                {
                    "softmaxattentionclassifier__head": ["kernel"],
                    "softmaxattentionclassifier__n_heads": [1, 2],
                },
                {
                    # the paper's heads train; the kernel heads' grid has no iterations
                    "softmaxattentionclassifier__head": ["bilinear"],
                    "softmaxattentionclassifier__n_heads": [1, 2],
                    "softmaxattentionclassifier__max_iter": [60 if quick else 300],
                },
            ],
        ),
        (
            "classification",
            "breast_cancer",
            "LinearDiscriminantAnalysis",
            # shrinkage needs a solver that forms the covariance
            {"lineardiscriminantanalysis__solver": "lsqr"},
            {"lineardiscriminantanalysis__shrinkage": [None, "auto", 0.5]},
        ),
        (
            "denoising",
            "mixture16",
            "SoftmaxAttentionDenoiser (2 residual heads)",
            {},
            # kernel heads over the clean targets (the default with y) or the
            # paper's heads, trained
            lambda task: [
                {"head": ["kernel"], "n_heads": [1, 2]},
                {
                    "head": ["bilinear"],
                    "n_heads": [1, 2],
                    **{
                        name: [value]
                        for name, value in bilinear_training(task, quick=quick).items()
                    },
                },
            ],
        ),
        (
            "denoising",
            "mixture16",
            "GaussianMixtureDenoiser",
            {},
            {"n_components": [2, 4, 8]},
        ),
    ]
    units = []
    for section, task_name, name, fixed, grid in searches:
        task = result.tasks.get((section, task_name))
        if task is None:
            continue
        candidates = builders[section](task, quick=quick, device=device, random_state=seed)
        estimator = candidates[name].set_params(**fixed)
        if callable(grid):  # a grid that depends on the task
            grid = grid(task)

        def run(section=section, task=task, name=name, estimator=estimator, grid=grid):
            search = GridSearchCV(
                estimator,
                grid,
                scoring=SEARCH_SCORING[section],
                cv=SPLITTERS[section](n_folds, shuffle=True, random_state=seed),
                n_jobs=n_jobs,
                error_score="raise",
            ).fit(task.X, task.y)
            cv = search.cv_results_
            for candidate, params in enumerate(cv["params"]):
                for fold in range(n_folds):
                    result.searches.append(
                        {
                            "section": section,
                            "task": task.name,
                            "estimator": name,
                            "params": {key.split("__")[-1]: value for key, value in params.items()},
                            "scoring": SEARCH_SCORING[section],
                            "fold": fold,
                            "score": float(cv[f"split{fold}_test_score"][candidate]),
                            "rank": int(cv["rank_test_score"][candidate]),
                            "fit_seconds": float(cv["mean_fit_time"][candidate]),
                        }
                    )

        units.append((f"grid search: {task_name} / {name}", run))
    return units


def _metadata(settings, n_jobs, n_folds, n_synthetic, max_samples) -> dict:
    from .._version import __version__

    device = settings["device"]
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **settings,
        "device_name": torch.cuda.get_device_name(device)
        if device.startswith("cuda")
        else platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "n_jobs": n_jobs,
        "n_folds": n_folds,
        "n_synthetic": n_synthetic,
        "max_samples": max_samples,
        # the command line replaces this when the study runs from it
        "command": f"run_study(quick={settings['quick']}, device={settings['device']!r})",
        "versions": {
            "python": platform.python_version(),
            "sk_softmix": __version__,
            "scikit-learn": sklearn.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
    }
