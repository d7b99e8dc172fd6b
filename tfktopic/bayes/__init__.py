"""Bayesian learning of (recurrent) Keras models by SG-MCMC.

`SGLD` and `PSGLD` are `keras.optimizers.Optimizer` subclasses that turn
`model.fit` into a posterior sampler (Gan et al. 2017, ACL).
"""

from tfktopic.bayes.sgmcmc import PSGLD, SGLD

__all__ = ["SGLD", "PSGLD"]
