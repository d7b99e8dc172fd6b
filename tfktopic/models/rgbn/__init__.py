"""rGBN-RNN and GBN-RNN (Guo, Chen, Lu, Zhou, ICML 2020), split by concern.

* `model`: the `RGBNRNN` keras.Model and its objective (eq. 7);
* `prior`: the generative prior of eqs. 1-2 (ELBO terms, the theta chain of
  generation, the theta of a chosen topic);
* `generation`: the LM's topic input and the token-by-token decoding loop;
* `hierarchy`: the topic hierarchy (JSON dict) and its DOT / SVG export;
* `presets`: `PRESETS` and the Adam optimizer of a preset.

The TLASGR-MCMC sampler of Phi and Pi is `tfktopic.bayes.tlasgr.TLASGRTopics`.
"""

from tfktopic.models.rgbn.generation import normalize_theta
from tfktopic.models.rgbn.hierarchy import hierarchy_to_dot, hierarchy_to_svg, topic_hierarchy
from tfktopic.models.rgbn.model import RGBNRNN
from tfktopic.models.rgbn.presets import (PAPER_HIDDEN_SIZES, PAPER_TOPIC_SIZES, PER_LAYER_KEYS,
                                          PRESETS, TRAINING_KEYS, make_optimizer)
from tfktopic.models.rgbn.prior import prior_chain, rgbn_elbo_terms, topic_thetas

__all__ = ["RGBNRNN", "PRESETS", "PAPER_HIDDEN_SIZES", "PAPER_TOPIC_SIZES", "TRAINING_KEYS",
           "PER_LAYER_KEYS", "make_optimizer", "normalize_theta", "rgbn_elbo_terms",
           "prior_chain", "topic_thetas", "topic_hierarchy", "hierarchy_to_dot",
           "hierarchy_to_svg"]
