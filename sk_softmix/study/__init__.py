"""The comparison study behind ``python -m sk_softmix compare``.

Cross-validated scores of the attention estimators next to scikit-learn's
LDA, QDA, logistic regression and Gaussian-mixture baselines (and the Bayes
oracle where the truth is known), small grid searches, and a report written
as Markdown, CSV, JSON and PNG figures.
"""

from ._cli import main
from ._compare_denoisers import compare_denoisers, format_table
from ._oracle import MixtureBayesClassifier
from ._report import write_report
from ._runner import StudyResult, run_study
from ._summary import summarise

__all__ = [
    "MixtureBayesClassifier",
    "StudyResult",
    "compare_denoisers",
    "format_table",
    "main",
    "run_study",
    "summarise",
    "write_report",
]
