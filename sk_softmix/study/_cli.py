"""Command line: ``sk-softmix compare`` (or ``python -m sk_softmix compare``)."""

import argparse
import sys
import tempfile
from pathlib import Path

from ..attention._device import resolve_device
from ._report import write_report
from ._runner import run_study
from ._tasks import TASK_NAMES


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as a single line on standard error, exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``sk-softmix`` argument parser."""
    parser = _OneLineParser(
        prog="sk-softmix",
        description="Softmax attention on Gaussian mixtures, as scikit-learn estimators.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    compare = commands.add_parser(
        "compare",
        help="cross-validate the attention estimators against sklearn's baselines",
        description="Cross-validated comparison of the attention estimators with "
        "scikit-learn's baselines (classification: LDA, QDA, logistic regression, an RBF SVC "
        "with probabilities both ways, kNN, NCA + kNN, an MLP; denoising: the best affine "
        "map, linear attention, the Gaussian-mixture plug-in) and the Bayes oracle; writes "
        "report.md, results.csv, results.json and PNG figures.",
    )
    compare.add_argument(
        "--quick", action="store_true", help="smaller, faster study (about 5 minutes on 2 cores)"
    )
    compare.add_argument(
        "--out", default="sk_softmix_report", help="report directory (default: %(default)s)"
    )
    compare.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    compare.add_argument("--seed", type=int, default=0, help="seed of data, folds and estimators")
    compare.add_argument("--n-jobs", type=int, default=None, help="joblib workers (default 1)")
    compare.add_argument("--folds", type=_positive, default=5, help="cross-validation folds")
    compare.add_argument(
        "--n-synthetic", type=_positive, default=None, help="size of each synthetic dataset"
    )
    compare.add_argument(
        "--max-samples", type=_positive, default=None, help="subsample every dataset (smoke tests)"
    )
    compare.add_argument(
        "--tasks",
        nargs="+",
        choices=TASK_NAMES,
        default=None,
        metavar="TASK",
        help="run only these tasks: " + ", ".join(TASK_NAMES),
    )
    compare.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _check_writable(parser, out: Path) -> bool:
    """Make sure ``out`` can take the report; returns whether it was created."""
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        parser.error(f"cannot write the report to --out {str(out)!r}: {error.strerror or error}")
    return created


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments after the program name; ``sys.argv[1:]`` when omitted.

    Returns
    -------
    int
        0 on success. Usage errors exit with status 2 and one line on
        standard error.

    Examples
    --------
    >>> import tempfile
    >>> from sk_softmix.study import main
    >>> out = tempfile.mkdtemp()
    >>> main(["compare", "--quick", "--tasks", "C1", "--folds", "2", "--max-samples", "100",
    ...       "--device", "cpu", "--no-progress", "--out", out])  # doctest: +ELLIPSIS
    Report written to .../report.md
    ...
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.folds < 2:
        parser.error(f"--folds must be at least 2, got {args.folds}")
    # every training fold needs a few points of each class (digits has 10)
    smallest = 10 * args.folds
    for option in ("max_samples", "n_synthetic"):
        value = getattr(args, option)
        if value is not None and value < smallest:
            parser.error(
                f"--{option.replace('_', '-')} must be at least 10 x --folds = {smallest}, "
                f"got {value}: every fold needs points of every class to train on"
            )
    if args.n_jobs == 0:
        parser.error("--n-jobs must be a positive number of workers or negative (-1: all cores)")
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed must lie in [0, 2**32), got {args.seed}")
    try:
        resolve_device(args.device)
    except ValueError as error:
        parser.error(str(error))
    out = Path(args.out)
    created = _check_writable(parser, out)
    try:
        result = run_study(
            quick=args.quick,
            device=args.device,
            random_state=args.seed,
            n_jobs=args.n_jobs,
            n_folds=args.folds,
            n_synthetic=args.n_synthetic,
            max_samples=args.max_samples,
            tasks=args.tasks,
            progress=not args.no_progress,
        )
    except (KeyboardInterrupt, ValueError) as error:
        if created and not any(out.iterdir()):
            out.rmdir()  # leave no empty report directory behind
        if isinstance(error, ValueError):  # the estimators' clear errors, one line each
            parser.error(f"the study cannot run with these options: {error}")
        print("sk-softmix: interrupted; no report written", file=sys.stderr)
        return 130
    arguments = sys.argv[1:] if argv is None else argv
    result.metadata["command"] = " ".join(["sk-softmix", *arguments])
    written = write_report(result, out)
    print(f"Report written to {out / 'report.md'}")
    print("Also: " + ", ".join(str(path) for path in written if path.name != "report.md"))
    return 0
