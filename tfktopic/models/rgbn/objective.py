"""The objective of rGBN-RNN / GBN-RNN (Guo et al. 2020, eq. 7), per batch of document chunks.

    loss = lm_nll / B + tm_weight * (-log p(d | Phi^1 theta^1) + sum_l kl_weights[l] KL^l)

with the LM's summed token NLL (`token_nll`) averaged over the B document chunks
of the batch, and the topic-model terms of `tfktopic.models.rgbn.prior.
rgbn_elbo_terms` (Poisson likelihood of eq. 1, closed-form Weibull-Gamma KL of
every layer, averaged over the chunks). The paper has unit weights; the
released code uses tm_weight 0.001 and kl_weights (0.1, 0.01, 0.001).

`RGBNRNN.objective` calls `negative_elbo` on the outputs of its forward pass.

Example:
>>> outputs = model.forward(batch, training=True, features=True)      # doctest: +SKIP
>>> negative_elbo(batch, outputs, model.topic_model, model.softmax,
...               model.kl_weights, model.tm_weight)["loss"]           # doctest: +SKIP
"""

from keras import ops

from tfktopic.evaluation.perplexity import gathered_token_nll, masked_token_nll
from tfktopic.models.rgbn.prior import rgbn_elbo_terms

__all__ = ["token_nll", "negative_elbo"]


def token_nll(softmax, data, outputs):
    """(nll_sum, num_tokens) of the LM, from ``logits`` or ``features``.

    From ``features`` (the softmax input of the non-empty ``windows`` only,
    `RGBNRNN.call` with ``return_features``) the softmax -- the largest cost of
    a step: N T sum_l H_l V multiply-adds -- and the cross-entropy are computed
    only at the positions with mask > 0, gathered first; the padding windows
    and padded positions of a chunk (~45% of B J T on APNEWS) are skipped. The
    result is the same sum as from the full logits.

    Args:
        softmax: the model's output layer (features -> logits).
        data: the batch (``targets``, ``mask`` [B, J, T]).
        outputs: the forward pass's ``logits`` [B, J, T, V], or its
            ``features`` [N, T, sum_l H_l] and ``windows`` [N, 1].

    Returns:
        (float sum of the token NLLs, float number of tokens).
    """
    mask = ops.cast(data["mask"], "float32")
    if "logits" in outputs:
        return masked_token_nll(data["targets"], outputs["logits"], mask)
    length = ops.shape(mask)[-1]
    windows = outputs["windows"]
    mask = ops.take(ops.reshape(mask, (-1, length)), windows[:, 0], axis=0)
    targets = ops.take(ops.reshape(data["targets"], (-1, length)), windows[:, 0], axis=0)
    return gathered_token_nll(softmax, outputs["features"], targets, mask)


def negative_elbo(data, outputs, topic_model, softmax, kl_weights, tm_weight):
    """The loss of eq. 7 and its terms for one batch.

    Args:
        data: the batch (``targets``, ``mask`` [B, J, T], ``context_bow``
            [B, J, V_c]).
        outputs: the forward pass (``logits`` or ``features``/``windows``, and
            the lists over layers ``thetas``, ``ks``, ``lams`` [B, J, K_l]).
        topic_model: the `tfktopic.bayes.tlasgr.TLASGRTopics` owning Phi and Pi.
        softmax: the model's output layer (`token_nll`).
        kl_weights: per-layer KL weights.
        tm_weight: weight of the topic-model part.

    Returns:
        dict of ``loss`` (per document chunk), ``nll_sum``, ``num_tokens``,
        ``kl`` (summed over layers) and ``tm_nll`` (per chunk), ``num_docs``.
    """
    mask = ops.cast(data["mask"], "float32")
    nll_sum, num_tokens = token_nll(softmax, data, outputs)
    num_docs = ops.cast(ops.shape(mask)[0], "float32")
    sentence_mask = ops.cast(ops.sum(mask, axis=-1) > 0, "float32")
    log_likelihood, kls = rgbn_elbo_terms(
        data["context_bow"], outputs["thetas"], outputs["ks"], outputs["lams"], topic_model,
        sentence_mask)
    tm_nll = -ops.mean(log_likelihood)
    kl_per_layer = [ops.mean(kl) for kl in kls]
    tm_loss = tm_nll + sum(w * kl for w, kl in zip(kl_weights, kl_per_layer))
    loss = nll_sum / num_docs + tm_weight * tm_loss
    return {"loss": loss, "nll_sum": nll_sum, "num_tokens": num_tokens,
            "kl": sum(kl_per_layer), "tm_nll": tm_nll, "num_docs": num_docs}
