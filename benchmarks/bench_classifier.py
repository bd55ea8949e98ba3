"""Fit time and predict throughput of SoftmaxAttentionClassifier next to LDA.

On the paper's two LDA configurations (C1: d = 2, m_1 = (1, 0),
m_-1 = (0, 1), P(y=1) = 0.6; C2: d = 20, m_+-1 = +-e_1, P(y=1) = 0.5), with
5,000 training points and default settings, every number next to
``LinearDiscriminantAnalysis`` measured in the same run.

Usage: ``python benchmarks/bench_classifier.py [--quick]``.
"""

import argparse
import time

import numpy as np
import torch
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from sk_softmix import SoftmaxAttentionClassifier
from sk_softmix.datasets import make_lda


def configurations():
    c2 = np.zeros((2, 20))
    c2[0, 0], c2[1, 0] = -1.0, 1.0
    return {
        "C1": {"means": np.array([[0.0, 1.0], [1.0, 0.0]]), "prior": 0.6},
        "C2": {"means": c2, "prior": 0.5},
    }


def seconds(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 training points")
    args = parser.parse_args()
    n = 1_000 if args.quick else 5_000
    print(f"torch threads: {torch.get_num_threads()}; {n} training points, 20,000 queries")
    print()
    print(
        "| config | fit s (ours) | fit s (LDA) | predict q/s (ours) | predict q/s (LDA) "
        "| ours / LDA predict |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, config in configurations().items():
        X, y = make_lda(n, **config, random_state=0)
        queries, _ = make_lda(20_000, **config, random_state=1)
        ours = SoftmaxAttentionClassifier(random_state=0)
        lda = LinearDiscriminantAnalysis()
        fit_ours, fit_lda = seconds(ours.fit, X, y), seconds(lda.fit, X, y)
        predict_ours = len(queries) / seconds(ours.predict, queries)
        predict_lda = len(queries) / seconds(lda.predict, queries)
        print(
            f"| {name} | {fit_ours:.2f} | {fit_lda:.4f} | {predict_ours:,.0f} | "
            f"{predict_lda:,.0f} | {predict_ours / predict_lda:.4f} |"
        )


if __name__ == "__main__":
    main()
