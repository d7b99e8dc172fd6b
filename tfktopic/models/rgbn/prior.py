"""The generative prior of rGBN-RNN / GBN-RNN (Guo et al. 2020, eqs. 1-2) and its ELBO terms.

Per document and sentence j (reference rgbn_rnn.md §1.1; tau0 a gamma *rate*):

    theta^L_1 ~ Gam(tau0, tau0),   theta^L_j ~ Gam(tau0 Pi^L theta^L_{j-1}, tau0)   (eq. 2)
    theta^l_j ~ Gam(tau0 (Phi^{l+1} theta^{l+1}_j + Pi^l theta^l_{j-1}), tau0)     (eq. 2)
    d_j ~ Pois(Phi^1 theta^1_j)                                                   (eq. 1)

(no Pi term at j = 1; GBN drops every Pi term). The prior shapes
e^l_j and the Poisson rate are computed by the layer that owns Phi and Pi,
`tfktopic.bayes.tlasgr.TLASGRTopics` (`gamma_shapes`, `poisson_rate`): its
TLASGR augmentation needs the same shapes as CRT concentrations, and
`tfktopic.bayes` never imports `tfktopic.models` (that arrow would close an
import circle), so the formula is written there once. This module uses it for

* `rgbn_elbo_terms`: the topic-model terms of the ELBO (eq. 7);
* `prior_chain`: ancestral draws of theta, top-down and forward through Pi
  (generation of sentences and paragraphs);
* `topic_thetas`: the deterministic theta of a chosen topic (or mix of topics),
  the other layers following Phi.

Example:
>>> chain = prior_chain(model.topic_model, num=2, num_sentences=3,
...                     rng=np.random.default_rng(0))           # doctest: +SKIP
>>> [t.shape for t in chain[0]]                                   # doctest: +SKIP
[(2, 100), (2, 80), (2, 50)]
"""

import numpy as np
from keras import ops

from tfktopic.distributions import poisson_log_prob, weibull_gamma_kl

__all__ = ["REAL_MIN", "SHAPE_FLOOR", "rgbn_elbo_terms", "prior_chain", "topic_thetas"]

REAL_MIN = 2.2e-20      # the released code's floor (`real_min`)
SHAPE_FLOOR = 1e-10     # floor of the gamma prior shapes (reference §8.6)


def rgbn_elbo_terms(bow, thetas, ks, lams, topic_model, sentence_mask=None):
    """The topic-model terms of rGBN-RNN's ELBO (eq. 7), per document chunk.

    The prior shapes e^l_j (reference rgbn_rnn.md §1.2) and the
    Poisson rate Phi^1 theta^1_j come from `topic_model`
    (`TLASGRTopics.gamma_shapes` / `poisson_rate`); Phi and Pi are constants
    here (they are sampled, not optimised), gradients flow through theta.

    Args:
        bow: float [B, J, V_c], the context counts d_j.
        thetas, ks, lams: lists over layers of float [B, J, K_l]: the Weibull
            samples (reparameterised) and the Weibull parameters.
        topic_model: the `TLASGRTopics` holding Phi, Pi and tau0.
        sentence_mask: float [B, J], 1 for real sentences (padding windows
            are left out of both terms); `None` keeps all.

    Returns:
        (log_likelihood, kls): float [B] Poisson log-likelihood
        sum_j log Pois(d_j | Phi^1 theta^1_j) (with its log d! constant, unlike
        the released code; the gradients are the same), and a list over
        layers of float [B] sum_j KL(Weibull(k, lam) || Gam(tau0 e, tau0)).
    """
    if sentence_mask is None:
        sentence_mask = ops.ones(ops.shape(thetas[0])[:2], thetas[0].dtype)
    rate = ops.maximum(topic_model.poisson_rate(thetas[0]), REAL_MIN)
    log_likelihood = ops.sum(poisson_log_prob(bow, rate), axis=-1)
    log_likelihood = ops.sum(log_likelihood * sentence_mask, axis=1)
    tau0 = topic_model.tau0
    kls = []
    for k, lam, shape in zip(ks, lams, topic_model.gamma_shapes(thetas)):
        kl = ops.sum(weibull_gamma_kl(k, lam, tau0 * shape, tau0), axis=-1)
        kls.append(ops.sum(kl * sentence_mask, axis=1))
    return log_likelihood, kls


def prior_chain(topic_model, num, num_sentences, rng, previous=None):
    """theta draws from the rGBN prior: top-down, then forward through Pi.

    Sentence by sentence and layer by layer from the top, theta^l_j ~
    Gam(tau0 e^l_j, tau0) with e^l_j from `TLASGRTopics.gamma_shapes`
    (evaluated on the pair (theta_{j-1}, theta_j so far); the entries not
    drawn yet do not enter layer l's shape).

    Args:
        topic_model: the `TLASGRTopics` holding Phi, Pi and tau0.
        num: parallel chains.
        num_sentences: sentences per chain.
        rng: numpy Generator.
        previous: optional list over layers of [num, K_l], the theta of a
            sentence to continue from (rGBN-RNN).

    Returns:
        A list over sentences of lists over layers of float64 [num, K_l].
    """
    tau0, chain = topic_model.tau0, []
    for _ in range(num_sentences):
        current = [np.zeros((num, k)) for k in topic_model.topic_sizes]
        for l in reversed(range(topic_model.num_layers)):
            if previous is not None and topic_model.recurrent:
                pair = [np.stack([p, c], axis=1) for p, c in zip(previous, current)]
            else:
                pair = [c[:, None] for c in current]
            pair = [ops.convert_to_tensor(t, "float32") for t in pair]
            shape = np.asarray(topic_model.gamma_shapes(pair)[l][:, -1], np.float64)
            current[l] = rng.gamma(tau0 * np.maximum(shape, SHAPE_FLOOR), 1.0 / tau0)
        chain.append(current)
        previous = current
    return chain


def topic_thetas(phis, topic, topic_layer=0):
    """theta per layer [K_l] for a chosen topic or mix of topics.

    Layers given in `topic` take those weights. Unfixed layers below the
    highest fixed layer are filled top-down with the prior mean
    theta^l = Phi^{l+1} theta^{l+1} (tau0 cancels); unfixed layers above it
    bottom-up with theta^{l+1} = Phi^{l+1}^T theta^l (each parent weighted
    by its loading on the chosen topics). The paper's code instead walks
    one-hot down the argmax of Phi's columns (reference §6.2).

    Args:
        phis: the Phi^l matrices, bottom first ([V_c, K_1], [K_1, K_2], ...).
        topic: an int (one topic of layer `topic_layer`), a weight vector over
            that layer's topics, or a dict ``{layer: int | weights}``.
        topic_layer: 0-based layer of an int / vector `topic`.

    Returns:
        A list over layers of float64 [K_l].
    """
    phis = [np.asarray(p, np.float64) for p in phis]
    num_layers = len(phis)
    topic_sizes = [p.shape[1] for p in phis]
    spec = topic if isinstance(topic, dict) else {topic_layer: topic}
    fixed = {}
    for layer, value in spec.items():
        if not 0 <= int(layer) < num_layers:
            raise ValueError(f"topic_layer must be in [0, {num_layers}), got {layer}")
        K = topic_sizes[int(layer)]
        if np.ndim(value) == 0:
            if not 0 <= int(value) < K:
                raise ValueError(f"topic must be in [0, {K}) at layer {layer}, got {value}")
            weights = np.zeros(K)
            weights[int(value)] = 1.0
        else:
            weights = np.asarray(value, np.float64)
            if weights.shape != (K,) or weights.min() < 0 or weights.sum() <= 0:
                raise ValueError(f"topic weights at layer {layer} must be {K} non-negative "
                                 f"numbers, not all zero; got shape {weights.shape}")
        fixed[int(layer)] = weights
    thetas = [fixed.get(l) for l in range(num_layers)]
    for l in range(max(fixed) - 1, -1, -1):
        if thetas[l] is None:
            thetas[l] = phis[l + 1] @ thetas[l + 1]
    for l in range(max(fixed) + 1, num_layers):
        thetas[l] = phis[l].T @ thetas[l - 1]
    return thetas
