"""The output softmax at the predicted positions only (issue 18): the same objective.

The language models' objectives gather the real (mask > 0) positions before the
output layer (`tfktopic.evaluation.perplexity.gather_real_positions`), so the
padding of the sentence windows (37 % of APNEWS' positions) costs no softmax.
Every model's gathered objective is checked here against the full-softmax
reference computed from the model's full outputs (``model(batch)`` /
``language_model`` / the gate on every position) and `masked_token_nll`, on a
batch with padding and a window of padding only: the loss, the reported sums
and the gradients of every variable, in training (dropout and theta samples
drawn from the same restored random state) and in evaluation.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from keras import ops

from test_models_harness import _batch, _build, data  # noqa: F401 (fixture)
from tfktopic.evaluation.perplexity import (gather_real_positions, gathered_token_nll,
                                            masked_token_nll)
from tfktopic.models.topicrnn.stopword_gate import StopwordGate
from tfktopic.layers.topic_decoder import topic_diversity

#: Float32 rounding: the gathered softmax multiplies [N, H] instead of [B, T, H], and a
#: window's gradient (e.g. TCNLM's t) sums its positions in another order. Gradients are
#: compared elementwise (RTOL) or norm-wise (GRADIENT_ATOL x the largest entry of the
#: variable's gradient: entries that are differences of larger terms round so).
RTOL, ATOL, GRADIENT_ATOL = 1e-5, 1e-6, 1e-5


# ------------------------------------------------------------------------------ the helper
def test_gather_real_positions_keeps_row_major_order_and_each_windows_row():
    mask = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0]], np.float32)   # a padding row
    targets = np.arange(12, dtype=np.int32).reshape(3, 4) + 10
    hidden = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    theta = np.array([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]], np.float32)
    real = gather_real_positions(mask, targets, per_position=(hidden,), per_row=(theta,))
    expected = [(0, 0), (0, 1), (2, 0), (2, 2)]
    assert real.index.numpy().tolist() == [list(p) for p in expected]
    assert real.targets.numpy().tolist() == [targets[p] for p in expected]
    np.testing.assert_array_equal(real.mask.numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(real.per_position[0].numpy(), [hidden[p] for p in expected])
    np.testing.assert_array_equal(real.per_row[0].numpy(), theta[[0, 0, 2, 2]])


def test_gather_real_positions_of_chunks_keeps_weights_and_the_window_of_each_position():
    mask = np.zeros((2, 3, 4), np.float32)
    mask[0, 1, :2] = 1.0
    mask[1, 2, 3] = 0.5                                      # a weight, kept as it is
    theta = np.random.default_rng(0).normal(size=(2, 3, 5)).astype(np.float32)
    real = gather_real_positions(mask, np.ones((2, 3, 4), np.int32), per_row=(theta,))
    assert real.index.numpy().tolist() == [[0, 1, 0], [0, 1, 1], [1, 2, 3]]
    np.testing.assert_array_equal(real.mask.numpy(), [1.0, 1.0, 0.5])
    np.testing.assert_array_equal(real.per_row[0].numpy(), theta[[0, 0, 1], [1, 1, 2]])


def test_a_batch_of_padding_only_gathers_nothing_and_sums_to_zero():
    head = keras.layers.Dense(7)
    hidden = tf.random.normal((2, 3, 4))
    mask = tf.zeros((2, 3))
    real = gather_real_positions(mask, tf.zeros((2, 3), tf.int32), per_position=(hidden,))
    assert real.index.shape == (0, 2) and real.per_position[0].shape == (0, 4)
    with tf.GradientTape() as tape:
        tape.watch(hidden)
        nll, num = gathered_token_nll(head, hidden, tf.zeros((2, 3), tf.int32), mask)
    assert float(nll) == 0.0 and float(num) == 0.0
    np.testing.assert_array_equal(tape.gradient(nll, hidden).numpy(), np.zeros((2, 3, 4)))


def test_gathered_token_nll_equals_the_full_softmax_and_its_gradients():
    rng = np.random.default_rng(1)
    head = keras.layers.Dense(11)
    hidden = tf.constant(rng.normal(size=(3, 5, 4)).astype(np.float32))
    targets = tf.constant(rng.integers(0, 11, size=(3, 5)).astype(np.int32))
    mask = tf.constant([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]], tf.float32)
    results = []
    for gathered in (False, True):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            if gathered:
                nll, num = gathered_token_nll(head, hidden, targets, mask)
            else:
                nll, num = masked_token_nll(targets, head(hidden), mask)
        results.append((nll, num, *tape.gradient(nll, [hidden, *head.trainable_weights])))
    for full, fast in zip(*results):
        np.testing.assert_allclose(fast.numpy(), full.numpy(), rtol=RTOL, atol=ATOL)
    assert float(results[1][1]) == 4.0


def test_the_gate_takes_a_gathered_topic_bias_instead_of_theta():
    gate = StopwordGate(6, [-1, -1, 0, -1, 1, 2], num_topics=2)
    hidden = tf.random.normal((2, 3, 4))
    theta = tf.random.normal((2, 2))
    stop = tf.constant([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    full = gate(hidden, theta, stop_indicator=stop, marginal=True)
    bias = ops.expand_dims(gate.topic_bias(theta), 1) + tf.zeros((2, 3, 1))
    flat = gate(tf.reshape(hidden, (6, 4)), stop_indicator=tf.reshape(stop, (6,)),
                marginal=True, bias=tf.reshape(bias, (6, 6)))
    for key, value in full.items():
        np.testing.assert_allclose(flat[key].numpy(), tf.reshape(value, flat[key].shape).numpy(),
                                   rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="one of theta .* and bias"):
        gate(hidden)


# ------------------------------------------------------------------------ every model
def _padded(batch):
    """The batch with its first window turned into padding only (mask 0)."""
    batch = dict(batch)
    mask = np.array(batch["mask"], np.float32)
    mask[0] = 0.0
    assert 0.0 < mask.mean() < 1.0
    batch["mask"] = tf.constant(mask)
    return batch


def _lm_reference(model, batch, training):
    logits = model(batch, training=training)
    nll_sum, num_tokens = masked_token_nll(batch["targets"], logits, batch["mask"])
    return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "nll_sum": nll_sum,
            "num_tokens": num_tokens}


def _topicrnn_reference(model, batch, training):
    """The ELBO of the full [..., T, C] gate outputs (the objective before the gather)."""
    targets, mask = batch["targets"], ops.cast(batch["mask"], "float32")
    if model.streamed:   # DocumentTopicRNN: the state carried from the batch's reset flags
        hidden = model.hidden_states(batch, training=training)
        theta, mean, log_std = model.infer_topics(batch["context_bow"], training=training)
    else:
        hidden = model.hidden_states(batch["tokens"], training=training)
        theta, mean, log_std = model.topic_posterior(batch["context_bow"], training=training)
    stop = model.gate.stop_indicator(targets)
    outputs = model.gate(hidden, theta, stop_indicator=stop, marginal=True)
    token_nll, num_tokens = masked_token_nll(targets, outputs["logits"], mask)
    stop_nll = -ops.sum(tfp.distributions.Bernoulli(
        logits=outputs["stop_logits"], dtype="float32").log_prob(stop) * mask)
    # Each window's share n_w / N_w of its document's KL (the batches carry doc_targets).
    share = ops.sum(mask, axis=-1) / ops.maximum(ops.cast(batch["doc_targets"], "float32"), 1.0)
    kl = ops.sum(share * ops.cast(model.encoder.kl(mean, log_std), "float32"))
    marginal_nll, _ = masked_token_nll(targets, outputs["log_probs"], mask, from_logits=False)
    terms = {"token_nll": token_nll, "stop_nll": stop_nll, "kl": kl, "num_tokens": num_tokens,
             "loss": (token_nll + stop_nll + kl) / ops.maximum(num_tokens, 1.0),
             "nll_sum": token_nll + stop_nll if training else marginal_nll}
    if not training:
        terms["marginal_nll"] = marginal_nll
    if not training and not model.streamed:
        # The model's own output is the marginal over l_t at every position.
        np.testing.assert_allclose(
            masked_token_nll(targets, model(batch), mask, from_logits=False)[0].numpy(),
            marginal_nll.numpy(), rtol=RTOL)
    return terms


def _tcnlm_reference(model, batch, training):
    t, kl, tm_log_likelihood = model.topic_model(batch["context_bow"], training=training)
    predictions, _ = model.language_model(batch["tokens"], t, training=training)
    nll_sum, num_tokens = masked_token_nll(batch["targets"], predictions, batch["mask"],
                                           from_logits=model.mixture == "factorized")
    tm_nll = -ops.sum(ops.cast(tm_log_likelihood, "float32"))
    diversity = ops.cast(topic_diversity(model.topic_model.decoder.beta()), "float32")
    loss = ((nll_sum + tm_nll + ops.sum(ops.cast(kl, "float32"))) / ops.maximum(num_tokens, 1.0)
            - model.diversity_weight * diversity)
    return {"loss": loss, "nll_sum": nll_sum, "num_tokens": num_tokens}


def _chunks_with_document_targets(data):
    """The harness's document chunks [B, J, T] with ``doc_targets`` [B, J] (each document's
    targets in the chunk), for a chunked TopicRNN."""
    batch = dict(data["chunk_batch"])
    mask = np.asarray(batch["mask"], np.float32)
    batch["doc_targets"] = tf.constant(np.broadcast_to(mask.sum(axis=(1, 2))[:, None],
                                                       mask.shape[:2]).copy())
    return batch


#: case -> (registry family, model settings, reference objective[, batch of the data])
CASES = {
    "lstm": ("lstm", {"embedding_dim": 12, "hidden_dim": 16, "dropout": 0.3}, _lm_reference),
    "lstm_2_layers_gru": ("lstm", {"embedding_dim": 12, "hidden_dim": 16, "num_layers": 2,
                                   "cell": "gru"}, _lm_reference),
    "doc_lstm_chunked": ("doc_lstm_chunked", {"embedding_dim": 12, "hidden_dim": 16,
                                              "dropout": 0.3}, _lm_reference),
    "doc_lstm": ("doc_lstm", {"embedding_dim": 12, "hidden_dim": 16, "max_streams": 4,
                              "dropout": 0.3}, _lm_reference),
    "lda_lstm": ("lda_lstm", {"num_topics": 4, "embedding_dim": 12, "hidden_dim": 16,
                              "dropout": 0.3}, _lm_reference),
    "topicrnn": ("topicrnn", {"num_topics": 4, "hidden_dim": 16, "encoder_units": (16,),
                              "dropout": 0.3, "seed": 3}, _topicrnn_reference),
    "topicrnn_disjoint_gru": ("topicrnn", {"num_topics": 4, "hidden_dim": 16, "cell": "gru",
                                           "encoder_units": (16,), "variant": "disjoint"},
                              _topicrnn_reference),
    "topicrnn_chunks": ("topicrnn", {"num_topics": 4, "hidden_dim": 16, "encoder_units": (16,),
                                     "dropout": 0.3, "seed": 3}, _topicrnn_reference,
                        _chunks_with_document_targets),
    "doc_topicrnn": ("doc_topicrnn", {"num_topics": 4, "hidden_dim": 16, "encoder_units": (16,),
                                      "max_streams": 4, "dropout": 0.3, "seed": 3},
                     _topicrnn_reference),
    "tcnlm": ("tcnlm", {"num_topics": 4, "embedding_dim": 12, "hidden_dim": 16,
                        "ntm_units": (16,), "dropout": 0.3}, _tcnlm_reference),
    "tcnlm_moe": ("tcnlm", {"num_topics": 3, "embedding_dim": 12, "hidden_dim": 8,
                            "ntm_units": (16,), "mixture": "moe"}, _tcnlm_reference),
}


def _terms_and_gradients(model, objective, batch, training, state):
    """Terms of `objective` and the loss's gradients, from the random state `state`."""
    for variable, value in zip(model.variables, state):   # seed generators, carried states
        variable.assign(value)
    with tf.GradientTape() as tape:
        terms = objective(model, batch, training)
    gradients = tape.gradient(terms["loss"], model.trainable_variables)
    return terms, [ops.convert_to_numpy(tf.convert_to_tensor(g)) for g in gradients]


@pytest.mark.parametrize("training", [True, False], ids=["training", "evaluation"])
@pytest.mark.parametrize("case", list(CASES))
def test_gathered_objective_equals_the_full_softmax_reference(data, case, training):
    name, settings, reference, *batch_of = CASES[case]
    model = _build(name, data, model_settings=settings)
    batch = _padded(batch_of[0](data) if batch_of else _batch(name, data))
    model(batch)                                     # built (and any carried state set)
    if getattr(model, "reset_states", None):
        model.reset_states()
    state = [ops.convert_to_numpy(v) for v in model.variables]
    fast, fast_gradients = _terms_and_gradients(
        model, lambda m, b, t: m.objective(b, training=t), batch, training, state)
    full, full_gradients = _terms_and_gradients(model, reference, batch, training, state)
    assert set(full) <= set(fast), case
    for key in full:
        np.testing.assert_allclose(ops.convert_to_numpy(fast[key]),
                                   ops.convert_to_numpy(full[key]), rtol=RTOL, err_msg=key)
    assert float(fast["num_tokens"]) == float(np.sum(batch["mask"]))
    assert len(fast_gradients) == len(model.trainable_variables)
    for variable, got, expected in zip(model.trainable_variables, fast_gradients,
                                       full_gradients):
        scale = max(float(np.abs(expected).max()), 1e-30)
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=GRADIENT_ATOL * scale,
                                   err_msg=variable.path)
    if training and settings.get("dropout"):
        # Dropout was on: the gathered path drew the same masks as the reference.
        assert any(np.abs(g).max() > 0 for g in fast_gradients)


#: TCNLM's XLA training step (which holds the same gathered objective) is
#: tests/test_tcnlm.py::test_training_step_compiles_with_xla; here its evaluation
#: step is checked, so its training step is not compiled twice in the suite.
XLA_TRAINS = {"lstm": True, "topicrnn": True, "tcnlm": False}


@pytest.mark.parametrize("name", list(XLA_TRAINS))
def test_the_gathered_step_compiles_with_xla_as_keras_does_on_a_gpu(data, name):
    """The gather has a data-dependent shape; `compile(jit_compile="auto")` turns XLA on
    on a GPU, so the steps must compile (XLA's bounded dynamic shapes): the evaluation
    step gives the loss of the uncompiled one, and training steps lower the loss (their
    theta samples come from XLA's own random stream, so they are not compared)."""
    batch = _padded(_batch(name, data))
    evaluation = {}
    for jit in (False, True):
        model = _build(name, data)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit)
        evaluation[jit] = float(model.test_on_batch(batch, return_dict=True)["loss"])
        if jit and XLA_TRAINS[name]:
            losses = [float(model.train_on_batch(batch, return_dict=True)["loss"])
                      for _ in range(3)]
            after = float(model.test_on_batch(batch, return_dict=True)["loss"])
            assert np.all(np.isfinite(losses)) and after < evaluation[jit], (losses, after)
    np.testing.assert_allclose(evaluation[True], evaluation[False], rtol=1e-5)
