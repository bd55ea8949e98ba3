"""The paper's statements as plain NumPy functions, used as test oracles.

lda            the classifier head's effective coordinates, the LDA
               construction and the population dynamics of its training
constructions  closed-form heads that equal the Bayes denoiser, and the
               best linear and affine maps
population     softmax attention on a whole Gaussian mixture (the
               large-prompt limit)
risk           Bayes, best linear and best affine risks of a mixture
dynamics       the iterated denoiser and its clustering transition

``_mixture`` holds what they share: checks of a mixture's parameters and its
posterior (weights, mean, divergence, spread). Nothing here imports torch or
the estimators.
"""
