"""The paper's statements as plain NumPy functions, used as test oracles.

lda            the classifier head on an LDA population: effective
               coordinates (eq. 6-7), the LDA score, the Bayes construction
lda_dynamics   training that head on the population: its risk, gradient
               descent, Theorem 3.6's invariant-subspace start
constructions  closed-form heads that equal the Bayes denoiser (Section 4)
affine_maps    the denoisers' linear special case: the best affine and
               linear maps, and heads equal to the affine one on a prompt
population     softmax attention on a whole Gaussian mixture (the
               large-prompt limit, Proposition 2.1)
risk           Bayes, best linear and best affine risks of a mixture
dynamics       the iterated denoiser and its clustering transition

``_mixture`` holds what they share: checks of a mixture's parameters and its
posterior (weights, mean, divergence, spread). Nothing here imports the
engine or the estimators; the few functions that differentiate with torch
import it when called.
"""
