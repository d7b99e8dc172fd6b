"""Bayesian learning of (recurrent) Keras models by SG-MCMC.

`SGLD` and `PSGLD` are `keras.optimizers.Optimizer` subclasses that turn
`model.fit` into a posterior sampler (Gan et al. 2017, ACL); `SampleCollector`
collects the samples during `fit` and `PredictiveSamples` averages their
predictive probabilities (eq. 5). `TLASGRTopics` runs the TLASGR-MCMC
step of rGBN-RNN's topics inside a model's `train_step`.
"""

from tfktopic.bayes.collection import (
    SCHEMES,
    PredictiveSamples,
    SampleCollector,
    collection_indices,
)
from tfktopic.bayes.sgmcmc import PSGLD, SGLD
from tfktopic.bayes.tlasgr import TLASGRTopics

__all__ = ["SGLD", "PSGLD", "SampleCollector", "PredictiveSamples", "collection_indices",
           "SCHEMES", "TLASGRTopics"]
