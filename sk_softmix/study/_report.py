"""Turning a :class:`~sk_softmix.study.StudyResult` into files.

``report.md`` holds the tables (mean +- standard deviation over folds),
``results.csv`` and ``results.json`` every fold's raw numbers with the
versions, device and seed, and the PNG figures come from
the figures module when matplotlib is installed.
"""

import csv
import json
from pathlib import Path

import numpy as np

from ._figures import make_figures
from ._summary import search_summary, summarise

# Column name, header, number format, for each table.
CLASSIFICATION_COLUMNS = [
    ("accuracy", "accuracy", ".3f"),
    ("accuracy_minus_lda", "accuracy - LDA", "+.3f"),
    ("log_loss", "log-loss", ".3f"),
    ("log_loss_over_bayes", "log-loss / Bayes", ".3f"),
    ("fit_seconds", "fit (s)", ".2f"),
    ("score_seconds", "predict (s)", ".3f"),
]
DENOISING_COLUMNS = [
    ("mse", "MSE", ".4f"),
    ("mse_over_bayes", "MSE / Bayes", ".3f"),
    ("psnr", "PSNR (dB)", ".2f"),
    ("fit_seconds", "fit (s)", ".2f"),
    ("score_seconds", "transform (s)", ".3f"),
]


def markdown(result) -> str:
    """The report as Markdown: settings, one table per task, searches, figures."""
    meta = result.metadata
    summary = summarise(result)
    lines = [
        "# sk_softmix comparison study",
        "",
        f"`{meta['command']}` on {meta['date']}: device {meta['device']} "
        f"({meta['device_name']}, {meta['cpu_count']} CPU cores, {meta['platform']}), "
        f"seed {meta['random_state']}, {meta['n_folds']}-fold cross-validation with the "
        f"same folds for every estimator of a task, {'quick' if meta['quick'] else 'full'} "
        f"mode, {meta['elapsed_seconds']:.0f} s in all.",
        "",
        "Versions: " + ", ".join(f"{name} {version}" for name, version in meta["versions"].items()),
        "",
        "Every cell is the mean +- standard deviation over the folds. Classifiers run in a "
        "`Pipeline` after `StandardScaler`; `Bayes (oracle)` knows the true mixture. "
        "`accuracy - LDA` and `log-loss / Bayes` are computed fold by fold. The RBF SVC "
        "has its probabilities each way scikit-learn offers them (pairwise coupling, "
        "one-vs-rest sigmoids): neither is the better on every task, so compare with the "
        "better row.",
    ]
    # a heading only for the kinds of task that ran
    for kind, heading, columns in (
        ("classification", "Classification", CLASSIFICATION_COLUMNS),
        ("denoising", "Denoising", DENOISING_COLUMNS),
    ):
        if summary.get(kind):
            lines += ["", f"## {heading}"]
            for task, estimators in summary[kind].items():
                lines += _table(result, kind, task, estimators, columns)
    searches = search_summary(result)
    if searches:
        lines += [
            "",
            "## Grid searches",
            "",
            "`GridSearchCV` with the same folds; scores are sklearn's (higher is better).",
            "",
            "| task | estimator | parameters | scoring | mean score | rank |",
            "|---|---|---|---|---:|---:|",
        ]
        for entry in searches:
            params = ", ".join(f"{key}={value}" for key, value in entry["params"].items())
            lines.append(
                f"| {entry['task']} | {entry['estimator']} | {params} | {entry['scoring']} "
                f"| {entry['mean_score']:.4f} +- {entry['std_score']:.4f} | {entry['rank']} |"
            )
    figures = meta.get("figures", [])
    if figures:
        lines += ["", "## Figures", ""]
        lines += [f"![{Path(name).stem}]({name})" for name in figures]
    elif meta.get("figures_skipped"):
        lines += ["", f"Figures skipped: {meta['figures_skipped']}"]
    if meta.get("warnings"):
        lines += ["", "## Warnings raised during the study", ""]
        lines += [f"- {message} (x{count})" for message, count in meta["warnings"].items()]
    return "\n".join(lines) + "\n"


def _table(result, section, task, estimators, columns) -> list[str]:
    present = [
        column for column in columns if any(column[0] in metrics for metrics in estimators.values())
    ]
    lines = [
        "",
        f"### {task}: {result.tasks[section, task].description}",
        "",
        "| estimator | " + " | ".join(header for _, header, _ in present) + " |",
        "|---|" + "---:|" * len(present),
    ]
    for estimator, metrics in estimators.items():
        cells = []
        for metric, _, number_format in present:
            if metric in metrics:
                mean, std = metrics[metric]
                cells.append(f"{mean:{number_format}} +- {std:{number_format.lstrip('+')}}")
            else:
                cells.append("")
        lines.append(f"| {estimator} | " + " | ".join(cells) + " |")
    return lines


def write_report(result, out) -> list[Path]:
    """Write ``report.md``, ``results.csv``, ``results.json`` and the figures.

    Parameters
    ----------
    result : StudyResult
        The output of :func:`run_study`.
    out : str or Path
        Directory, created if needed.

    Returns
    -------
    list of Path
        The files written.

    Examples
    --------
    >>> import tempfile
    >>> from sk_softmix.study import run_study, write_report
    >>> result = run_study(quick=True, device="cpu", tasks=["C1"], n_folds=2,
    ...                    max_samples=100, progress=False)
    >>> names = [path.name for path in write_report(result, tempfile.mkdtemp())]
    >>> names[-3:]
    ['results.csv', 'results.json', 'report.md']
    """

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = make_figures(result, out)
    result.metadata["figures"] = [path.name for path in written]
    paths = {name: out / name for name in ("results.csv", "results.json", "report.md")}
    _write_csv(result, paths["results.csv"])
    payload = {
        "metadata": result.metadata,
        "cross_validation": result.rows,
        "grid_searches": result.searches,
        "summary": summarise(result),
    }
    paths["results.json"].write_text(json.dumps(payload, indent=1, default=_jsonable))
    paths["report.md"].write_text(markdown(result))
    return written + list(paths.values())


def _write_csv(result, path: Path) -> None:
    meta = result.metadata
    rows = [dict(row, kind="cross_validate") for row in result.rows]
    rows += [
        dict(row, kind="grid_search", params=json.dumps(row["params"], sort_keys=True))
        for row in result.searches
    ]
    context = {"device": meta["device"], "seed": meta["random_state"]}
    columns = ["kind", "section", "task", "estimator", "params", "fold"]
    for row in rows:
        columns += [key for key in row if key not in columns]
    columns += list(context)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **context})


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
