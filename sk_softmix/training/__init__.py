"""What every attention estimator shares to fit: input checks and the training scaffold.

Private to the package; the estimators supply a loss, a validation loss and
their starts, and these modules do the rest:

_validation  semantic input checks that parameter constraints cannot express
_units       the units training runs in (data divided by its root-mean-square)
_solvers     L-BFGS, Adam and gradient descent over a loss of query indices
_stopping    the validation checkpoint, the plateau rule, the paired test
_bandwidths  the scale of kernel heads' bandwidths (nearest-neighbour distance)
_selection   the held-out split, and training from several starts to keep
             the one that validates best against the untrained linear start
"""
