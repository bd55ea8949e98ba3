"""The softmax-attention classifier: the paper's LDA head, trained in context.

_classifier  SoftmaxAttentionClassifier, the estimator
_starts      its starting parameters (LDA, the paper's constructions)
_objective   its training loss and the training from its starts
_heads       the head's math: tokens, scores, constructions, coordinates
"""

from ._classifier import SoftmaxAttentionClassifier

__all__ = ["SoftmaxAttentionClassifier"]
