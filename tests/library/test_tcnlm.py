"""TCNLM: factorised topic-compositional LSTM, neural topic model, training, generation, saving."""


import keras
import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, sentence_examples
from tfktopic.data.pipeline import sentence_dataset
from tfktopic.evaluation import evaluate_perplexity, unigram_perplexity
from tfktopic.models.tcnlm.factorized_lstm import (FactorizedTopicLSTM, FactorizedTopicLSTMCell,
                                             TopicExpertsLSTM)
from tfktopic.layers.topic_decoder import (NeuralTopicModel, TopicDecoder, bow_log_likelihood,
                                           topic_diversity)
from tfktopic import presets
from tfktopic.models.tcnlm import TCNLM

SCN_INIT = keras.initializers.RandomUniform(-0.5, 0.5, seed=3)  # non-trivial topic factors


def _rng(seed=0):
    return np.random.default_rng(seed)


def _simplex(rng, batch, k):
    return rng.dirichlet(np.ones(k), size=batch).astype(np.float32)


# ---------------------------------------------------------------------------- factorised LSTM

def test_factorised_weights_equal_the_explicit_topic_mixture_of_eq_12():
    n_x, n_h, n_f, K, B = 5, 6, 4, 3, 4
    cell = FactorizedTopicLSTMCell(n_h, K, factor_dim=n_f, factor_initializer=SCN_INIT,
                                   topic_initializer=keras.initializers.RandomUniform(-1, 1, seed=4),
                                   bias_initializer=keras.initializers.RandomNormal(seed=5))
    cell.build((None, n_x + K))
    # Parameter count of the paper, 4 n_f (n_x + 2T + 3 n_h), plus one bias per gate.
    assert cell.count_params() == 4 * n_f * (n_x + 2 * K + 3 * n_h) + 4 * n_h
    rng = _rng(1)
    # Distinct values for every weight (the seeded initializers give W_b and U_b the
    # same values, which would hide a W_b <-> U_b swap).
    for variable in cell.weights:
        variable.assign(rng.normal(scale=0.5, size=tuple(variable.shape)).astype(np.float32))
    x = rng.normal(size=(B, n_x)).astype(np.float32)
    h = rng.normal(size=(B, n_h)).astype(np.float32)
    t = _simplex(rng, B, K)
    Wc, Wb, Wa = (np.asarray(v, np.float64) for v in (cell.input_factor_kernel,
                                                       cell.input_topic_kernel,
                                                       cell.input_output_kernel))
    Uc, Ub, Ua = (np.asarray(v, np.float64) for v in (cell.recurrent_factor_kernel,
                                                       cell.recurrent_topic_kernel,
                                                       cell.recurrent_output_kernel))
    bias = np.asarray(cell.bias, np.float64)

    def explicit(a, b, c, topics):
        # Eq. (12): W(t) = W_a diag(W_b t) W_c, as an [n_h, n_in] matrix.
        return a.T @ np.diag(b.T @ topics) @ c.T

    expected = np.zeros((4, B, n_h))
    for g in range(4):
        for i in range(B):
            W = explicit(Wa[g], Wb[g], Wc[g], t[i])
            U = explicit(Ua[g], Ub[g], Uc[g], t[i])
            expected[g, i] = W @ x[i] + U @ h[i] + bias[g]
    # Eqs. (9)-(11) (the pre-activations are the t-mixture of the K topics' ones) are
    # checked on the cell itself in test_reference_equivalence.py.
    got = np.asarray(cell.gate_preactivations(x, h, t))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # The cell step applies sigmoid to i, f, o and tanh to the candidate (eq. 13-15);
    # gates in keras' order i, f, c, o.
    c = rng.normal(size=(B, n_h)).astype(np.float32)
    out, (h_new, c_new) = cell(np.concatenate([x, t], -1), [h, c])
    sig = lambda z: 1 / (1 + np.exp(-z))
    c_ref = sig(expected[1]) * c + sig(expected[0]) * np.tanh(expected[2])
    np.testing.assert_allclose(np.asarray(c_new), c_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), sig(expected[3]) * np.tanh(c_ref), atol=1e-5)


def test_fast_sequence_layer_equals_the_cell_run_step_by_step():
    keras.utils.set_random_seed(0)
    B, L, n_x, n_h, K = 3, 7, 5, 6, 4
    layer = FactorizedTopicLSTM(n_h, K, factor_dim=5, topic_initializer=SCN_INIT,
                                return_state=True)
    rng = _rng(2)
    x = rng.normal(size=(B, L, n_x)).astype(np.float32)
    t = _simplex(rng, B, K)
    h0 = rng.normal(size=(B, n_h)).astype(np.float32)
    c0 = rng.normal(size=(B, n_h)).astype(np.float32)
    mask = np.ones((B, L), bool)
    mask[1, 4:] = False            # right padding
    mask[2, 2] = False             # a hole: the state is carried over it
    outputs, h_last, c_last = layer(x, t, mask=mask, initial_state=[h0, c0])

    h, c, expected = h0, c0, []
    for step in range(L):
        out, (h_new, c_new) = layer.cell(np.concatenate([x[:, step], t], -1), [h, c])
        keep = mask[:, step:step + 1]
        h, c = np.where(keep, h_new, h), np.where(keep, c_new, c)
        expected.append(h)
    np.testing.assert_allclose(np.asarray(outputs), np.stack(expected, 1), atol=1e-5)
    np.testing.assert_allclose(np.asarray(h_last), h, atol=1e-5)
    np.testing.assert_allclose(np.asarray(c_last), c, atol=1e-5)
    # The cell also runs inside keras.layers.RNN (t tiled and concatenated to the inputs).
    tiled = np.concatenate([x, np.repeat(t[:, None], L, 1)], -1)
    rnn_out = keras.layers.RNN(layer.cell, return_sequences=True)(tiled)
    np.testing.assert_allclose(np.asarray(rnn_out), np.asarray(layer(x, t)[0]), atol=1e-5)
    # The topic changes the output (t enters both the input and the recurrent side).
    other = np.asarray(layer(x, np.roll(t, 1, axis=0), mask=mask)[0])
    assert np.abs(other - np.asarray(outputs)).max() > 1e-3


def test_topic_experts_are_independent_lstms():
    keras.utils.set_random_seed(0)
    layer = TopicExpertsLSTM(units=4, num_experts=3)
    x = _rng(3).normal(size=(2, 5, 6)).astype(np.float32)
    out = np.asarray(layer(x))
    assert out.shape == (2, 5, 3, 4)
    kernel, recurrent, bias = (np.asarray(w) for w in (layer.kernel, layer.recurrent_kernel,
                                                       layer.bias))
    for k in range(3):   # expert k == a keras LSTM with expert k's weights
        lstm = keras.layers.LSTM(4, return_sequences=True)
        lstm.build(x.shape)
        lstm.set_weights([kernel[k], recurrent[k], bias[k]])
        np.testing.assert_allclose(out[:, :, k], np.asarray(lstm(x)), atol=1e-5)
    assert not np.allclose(kernel[0], kernel[1])
    # From a given state (distinct h and c per expert), returning the final state.
    h0, c0 = (_rng(seed).normal(size=(3, 2, 4)).astype(np.float32) for seed in (5, 6))
    stateful = TopicExpertsLSTM(units=4, num_experts=3, return_state=True)
    stateful(x)
    stateful.set_weights(layer.get_weights())
    out, h, c = (np.asarray(v) for v in stateful(x, initial_state=[h0, c0]))
    for k in range(3):
        lstm = keras.layers.LSTM(4, return_sequences=True, return_state=True)
        lstm.build(x.shape)
        lstm.set_weights([kernel[k], recurrent[k], bias[k]])
        ref_out, ref_h, ref_c = lstm(x, initial_state=[h0[k], c0[k]])
        np.testing.assert_allclose(out[:, :, k], np.asarray(ref_out), atol=1e-5)
        np.testing.assert_allclose(h[k], np.asarray(ref_h), atol=1e-5)
        np.testing.assert_allclose(c[k], np.asarray(ref_c), atol=1e-5)


# ------------------------------------------------------------------------- neural topic model

def test_decoder_log_likelihood_equals_direct_computation_and_beta_is_on_the_simplex():
    keras.utils.set_random_seed(0)
    decoder = TopicDecoder(num_topics=4, vocab_size=9,
                           initializer=keras.initializers.RandomNormal(stddev=3.0, seed=1))
    rng = _rng(4)
    t = _simplex(rng, 5, 4)
    bow = rng.poisson(2.0, size=(5, 9)).astype(np.float32)
    bow[0] = 0.0
    log_word = decoder(t)
    beta = np.asarray(decoder.beta(), np.float64)
    assert beta.shape == (4, 9) and (beta >= 0).all()
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, atol=1e-6)
    direct = (bow * np.log(t.astype(np.float64) @ beta)).sum(axis=1)   # eq. (6)
    np.testing.assert_allclose(np.asarray(bow_log_likelihood(bow, log_word)), direct, rtol=1e-5)
    assert float(bow_log_likelihood(bow, log_word)[0]) == 0.0
    # log p(. | t) is a distribution over the topic vocabulary.
    np.testing.assert_allclose(np.exp(np.asarray(log_word, np.float64)).sum(axis=1), 1.0,
                               atol=1e-5)
    # The NTM layer: t = softmax(W theta + b) on the simplex, the KL is the Gaussian closed
    # form of its own (mu, log sigma) (Monte Carlo check: test_reference_equivalence.py),
    # and the log-likelihood is eq. (6) of its own t.
    ntm = NeuralTopicModel(num_topics=4, vocab_size=9, hidden_units=(8,))
    t_ntm, kl, log_lik = ntm(bow, training=False)
    theta, mean, log_std = ntm.encoder(bow, training=False)
    np.testing.assert_allclose(np.asarray(t_ntm), np.asarray(ntm.topic_proportions(theta)),
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(t_ntm).sum(axis=1), 1.0, atol=1e-6)
    mu, log_s = np.asarray(mean, np.float64), np.asarray(log_std, np.float64)
    closed = 0.5 * (mu ** 2 + np.exp(2 * log_s) - 1.0 - 2.0 * log_s).sum(-1)
    np.testing.assert_allclose(np.asarray(kl), closed, rtol=1e-5, atol=1e-7)
    beta_ntm = np.asarray(ntm.decoder.beta(), np.float64)
    direct_ntm = (bow * np.log(np.asarray(t_ntm, np.float64) @ beta_ntm)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(log_lik), direct_ntm, rtol=1e-5)


def test_one_topic_decodes_its_own_beta_and_sizes_below_1_are_refused():
    """K = 1 is allowed (the mixture is that topic's beta); 0 is not. The declared output
    shape is the shape `call` returns, for the decoder and the NTM alike."""
    decoder = TopicDecoder(num_topics=1, vocab_size=1)
    np.testing.assert_allclose(np.asarray(decoder(np.ones((2, 1), np.float32))), 0.0, atol=1e-6)
    decoder = TopicDecoder(num_topics=1, vocab_size=6,
                           initializer=keras.initializers.RandomNormal(stddev=2.0, seed=0))
    log_word = np.asarray(decoder(np.ones((3, 1), np.float32)))
    np.testing.assert_allclose(log_word, np.repeat(np.asarray(decoder.log_beta()), 3, axis=0),
                               atol=1e-5)
    assert decoder.compute_output_shape((3, 1)) == log_word.shape == (3, 6)
    assert decoder.compute_output_shape((None, 5, 1)) == (None, 5, 6)
    for kwargs, name in (({"num_topics": 0, "vocab_size": 3}, "num_topics"),
                         ({"num_topics": 2, "vocab_size": 0}, "vocab_size")):
        with pytest.raises(ValueError, match=name):
            TopicDecoder(**kwargs)
    ntm = NeuralTopicModel(num_topics=3, vocab_size=7, hidden_units=(4,))
    outputs = ntm(np.ones((2, 7), np.float32))
    assert ntm.compute_output_shape((2, 7)) == tuple(tuple(o.shape) for o in outputs)


def test_neural_topic_model_defaults_are_tcnlms_2_x_256_encoder_without_dropout():
    """Wang et al. §4: the NTM's inference network is 2 hidden layers of 256 units, the bag
    of words normalised by its total; no dropout."""
    config = NeuralTopicModel(num_topics=3, vocab_size=7).get_config()
    assert {key: config[key] for key in ("hidden_units", "normalization", "dropout", "seed")} \
        == {"hidden_units": [256, 256], "normalization": "total", "dropout": 0.0, "seed": None}


def _numpy_diversity(beta, include_diagonal):
    unit = beta / np.linalg.norm(beta, axis=1, keepdims=True)
    angles = np.arccos(np.clip(np.abs(unit @ unit.T), 0.0, 1.0))
    np.fill_diagonal(angles, 0.0)
    values = angles.ravel() if include_diagonal else angles[~np.eye(len(beta), dtype=bool)]
    return values.mean() - values.var()


def test_diversity_regulariser_equals_numpy_and_has_finite_gradients():
    logits = _rng(5).normal(size=(5, 12)).astype(np.float32) * 2
    beta = tf.nn.softmax(logits).numpy().astype(np.float64)
    for include in (True, False):
        got = float(topic_diversity(beta.astype(np.float32), include_diagonal=include))
        assert got == pytest.approx(_numpy_diversity(beta, include), abs=1e-5)
    assert float(topic_diversity(np.eye(3, dtype=np.float32))) == pytest.approx(
        _numpy_diversity(np.eye(3), True), abs=1e-6)
    # Two orthogonal topics: angles 0, pi/2, pi/2, 0 -> pi/4 - pi^2/16; one topic: 0.
    assert float(topic_diversity(np.eye(2, dtype=np.float32))) == pytest.approx(
        np.pi / 4 - np.pi ** 2 / 16, abs=1e-6)
    assert float(topic_diversity(np.ones((1, 4), np.float32))) == 0.0
    # Identical topics (cosine 1 off the diagonal) and the diagonal: finite gradients.
    same = logits.copy()
    same[1] = same[0]
    variable = tf.Variable(same)
    with tf.GradientTape() as tape:
        value = topic_diversity(tf.nn.softmax(variable))
    gradient = tape.gradient(value, variable).numpy()
    assert np.isfinite(gradient).all() and np.abs(gradient).sum() > 0
    # Without the masking the gradient would be NaN: arccos'(1) is infinite.
    with tf.GradientTape() as tape:
        unit = tf.math.l2_normalize(tf.nn.softmax(variable), axis=1)
        raw = tf.reduce_mean(tf.acos(tf.minimum(tf.matmul(unit, unit, transpose_b=True), 1.0)))
    assert not np.isfinite(tape.gradient(raw, variable).numpy()).all()


# ------------------------------------------------------------------------------------ model

@pytest.fixture(scope="module")
def lee():
    train, valid, _ = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=5)
    topic = TopicVocabulary.build(train, lm, min_doc_freq=3)
    train_ex = sentence_examples(train, lm, topic, protocol="all_other")
    valid_ex = sentence_examples(valid, lm, topic, protocol="preceding")
    return lm, topic, train_ex, valid_ex


def _tiny(lm_size, topic_size, **kwargs):
    keras.utils.set_random_seed(0)
    args = dict(num_topics=4, embedding_dim=16, hidden_dim=16, ntm_units=(16,), seed=1)
    return TCNLM(lm_size, topic_size, **{**args, **kwargs})


def _batch(rng, batch, length, lm_size, topic_size):
    tokens = rng.integers(4, lm_size, size=(batch, length)).astype(np.int32)
    mask = np.ones((batch, length), np.float32)
    mask[0, length // 2:] = 0.0
    return {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "mask": mask,
            "context_bow": rng.poisson(0.5, size=(batch, topic_size)).astype(np.float32)}


@pytest.fixture(scope="module")
def trained(lee):
    lm, topic, train_ex, valid_ex = lee
    model = _tiny(len(lm), len(topic), num_topics=6, embedding_dim=32, hidden_dim=32,
                  ntm_units=(32,))
    model.compile(optimizer=keras.optimizers.Adam(2e-2, clipnorm=5.0))
    history = model.fit(sentence_dataset(train_ex, batch_size=64, seed=0), epochs=3, verbose=0)
    return model, history.history


@pytest.mark.parametrize("mixture", ["factorized", "moe"])
def test_gradients_reach_every_part(mixture):
    model = _tiny(30, 12, mixture=mixture, num_layers=2)
    batch = _batch(_rng(6), 3, 5, 30, 12)
    model(batch)
    with tf.GradientTape() as tape:
        stats = model.objective(batch, training=True)
        loss = stats["loss"]
    gradients = tape.gradient(loss, model.trainable_weights)
    names = [w.path for w in model.trainable_weights]
    parts = ("embedding", "encoder", "gaussian_softmax", "decoder", "softmax",
             "_lstm_0", "_lstm_1")
    for part in parts:
        assert any(part in name for name in names), part
    for name, gradient in zip(names, gradients):
        assert gradient is not None, name
        gradient = np.asarray(tf.convert_to_tensor(gradient))
        assert np.isfinite(gradient).all() and np.abs(gradient).max() > 0, name
    assert set(stats) >= {"nll_sum", "num_tokens", "kl", "tm_nll_sum", "diversity"}
    # The scaling of the objective: (LM NLL + NTM NLL + KL, summed) / #tokens - lambda R.
    expected = (stats["nll_sum"] + stats["tm_nll_sum"] + np.sum(stats["kl"])) / \
        stats["num_tokens"] - 0.1 * stats["diversity"]
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_learns_on_real_text_and_beats_a_unigram_model_leak_free(lee, trained):
    lm, topic, _, valid_ex = lee
    model, history = trained
    assert set(history) >= {"loss", "nll", "ppl", "kl", "tm_nll", "diversity_reg"}
    assert history["loss"][-1] < history["loss"][0] - 1.0
    assert history["tm_nll"][-1] < history["tm_nll"][0]
    assert history["kl"][-1] > 0
    valid_ds = sentence_dataset(valid_ex, batch_size=128, shuffle=False)
    result = evaluate_perplexity(model, valid_ds, protocol="preceding")
    unigram = unigram_perplexity(lm, valid_ex)
    assert result.num_tokens == valid_ex.num_targets
    assert result.perplexity < 0.8 * unigram, (result.perplexity, unigram)
    evaluated = model.evaluate(valid_ds, return_dict=True, verbose=0)
    assert evaluated["ppl"] == pytest.approx(result.perplexity, rel=1e-3)
    # topics(): ids ranked by beta, or words.
    beta = model.beta()
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, atol=1e-5)
    ids = model.topics(5)
    assert ids.shape == (6, 5)
    assert (np.diff(np.take_along_axis(beta, ids, 1), axis=1) <= 0).all()
    words = model.topics(5, topic)
    assert words[2] == [topic.words[i] for i in ids[2]]


def test_topic_conditioned_generation(lee, trained):
    lm, topic, _, _ = lee
    model, _ = trained
    K = model.num_topics
    bos = np.full((K, 1), lm.bos_id, np.int32)
    log_probs = np.asarray(model.language_model(bos, np.eye(K, dtype=np.float32))[0])[:, 0]
    probs = np.exp(log_probs - log_probs.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    total_variation = 0.5 * np.abs(probs[:, None] - probs[None]).sum(-1)
    assert total_variation[~np.eye(K, dtype=bool)].min() > 1e-3  # every topic pair differs
    a, b = np.unravel_index(total_variation.argmax(), total_variation.shape)
    assert total_variation[a, b] > 0.05, total_variation
    # The same random draws give different sentences under two distinct topics.
    samples = [model.generate(8, max_len=12, topic=int(k), method="sample", seed=0, allow_unk=True)
               for k in (a, b)]
    assert not np.array_equal(samples[0], samples[1])
    greedy = model.generate(2, max_len=12, topic=1, sampler="greedy", allow_unk=True)
    np.testing.assert_array_equal(model.generate(2, max_len=12, topic=1, method="top_k",
                                                 top_k=1, seed=5, allow_unk=True), greedy)
    assert (greedy[0] == greedy[1]).all()
    for ids in samples + [greedy]:
        assert ids.shape[1] == 12 and ids.dtype == np.int32
        assert not np.isin(ids, [lm.bos_id]).any()
        for row in ids:    # <pad> only after <eos>
            ends = np.flatnonzero(row == lm.eos_id)
            tail = row[ends[0] + 1:] if len(ends) else row[len(row):]
            assert (tail == 0).all() and (row[:len(row) - len(tail)] != 0).all()

    # top-k never emits a token outside the k most likely ones (re-scored teacher-forced).
    mixture = np.array([0.5, 0.5] + [0.0] * (K - 2), np.float32)
    ids = model.generate(6, max_len=10, topic=mixture, method="top_k", top_k=3, seed=1,
                         temperature=2.0, allow_unk=True)
    inputs = np.concatenate([np.full((6, 1), lm.bos_id, np.int32), ids[:, :-1]], axis=1)
    scores = np.asarray(model.language_model(inputs, np.tile(mixture, (6, 1)))[0]).copy()
    scores[..., [lm.pad_id, lm.bos_id]] = -np.inf
    rank = (scores > np.take_along_axis(scores, ids[..., None], -1)).sum(-1)
    live = np.cumsum(ids == lm.eos_id, axis=1) - (ids == lm.eos_id) == 0
    assert (rank[live] < 3).all()
    no_unk = model.generate(6, max_len=10, topic=0, method="sample", seed=0, allow_unk=False)
    assert not (no_unk == lm.unk_id).any()
    # Conditioning on a context bag of words and on the prior also works.
    assert model.generate(2, max_len=5, context_bow=np.ones(len(topic)), seed=0, sampler="greedy", allow_unk=True).shape == (2, 5)
    assert model.generate(3, max_len=5, seed=0, method="sample", allow_unk=True).shape == (3, 5)


def test_naive_mixture_of_experts_variant(lee):
    lm, topic, train_ex, _ = lee
    model = _tiny(len(lm), len(topic), mixture="moe", num_topics=3, hidden_dim=16)
    batch = next(iter(sentence_dataset(train_ex, batch_size=4, shuffle=False)))
    log_probs = np.asarray(model(batch), np.float64)
    assert log_probs.shape == (4, 30, len(lm))
    np.testing.assert_allclose(np.log(np.exp(log_probs).sum(-1)), 0.0, atol=1e-4)
    # Eq. (7) by hand: sum_k t_k softmax(V h^(k)) with the experts' outputs.
    t = np.asarray(model.topic_proportions(batch["context_bow"]), np.float64)
    hidden = model.rnns[0](model.embedding(batch["tokens"]))[0]
    expert_probs = np.asarray(tf.nn.softmax(model.softmax(hidden)), np.float64)  # [B,T,K,V]
    by_hand = np.log(np.einsum("bk,btkv->btv", t, expert_probs))
    np.testing.assert_allclose(log_probs, by_hand, atol=1e-4)
    # The generation path (`language_model`, from the tokens and t) mixes the same way,
    # over a whole sentence and over one step.
    for length in (30, 1):
        mixed = model.language_model(batch["tokens"][:, :length], t.astype(np.float32))[0]
        np.testing.assert_allclose(np.asarray(mixed, np.float64), by_hand[:, :length],
                                   atol=1e-4)
    model.compile(optimizer=keras.optimizers.Adam(2e-2))
    subset = sentence_dataset(train_ex, batch_size=64, seed=0).take(10)
    history = model.fit(subset, epochs=2, verbose=0).history
    assert history["nll"][-1] < history["nll"][0] - 0.2, history["nll"]
    assert set(history) >= {"loss", "nll", "ppl", "kl", "tm_nll", "diversity_reg"}
    assert model.generate(2, max_len=6, topic=0, method="top_k", seed=0, allow_unk=True).shape == (2, 6)


@pytest.mark.parametrize("mixture", ["factorized", "moe"])
def test_keras_round_trip_identical_outputs(tmp_path, mixture):
    matrix = _rng(7).normal(size=(30, 16)).astype(np.float32)
    model = _tiny(30, 12, mixture=mixture, num_layers=2, dropout=0.2, embeddings=matrix)
    np.testing.assert_array_equal(np.asarray(model.embedding.embeddings), matrix)
    # Move every weight away from its initial value.
    rng = _rng(9)
    model.set_weights([w + rng.normal(scale=0.1, size=w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    batch = _batch(_rng(8), 2, 6, 30, 12)
    path = tmp_path / "tcnlm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, TCNLM) and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-6)
    np.testing.assert_allclose(loaded.beta(), model.beta(), atol=1e-7)
    np.testing.assert_array_equal(loaded.generate(2, max_len=5, topic=1, sampler="greedy", allow_unk=True),
                                  model.generate(2, max_len=5, topic=1, sampler="greedy", allow_unk=True))


def test_fit_with_backup_and_restore(tmp_path, lee):
    lm, topic, train_ex, _ = lee
    dataset = sentence_dataset(train_ex, batch_size=64, seed=0).take(2)
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                self.weights = [np.array(w) for w in self.model.get_weights()]
                raise RuntimeError("interrupted")

    model = _tiny(len(lm), len(topic))
    model.compile(optimizer="adam", run_eagerly=True)   # a few steps: no graph tracing
    interrupt = Interrupt()
    with pytest.raises(RuntimeError, match="interrupted"):
        model.fit(dataset, epochs=4, verbose=0, callbacks=[backup, interrupt])

    class Restored(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.weights = [np.array(w) for w in self.model.get_weights()]

    resumed = _tiny(len(lm), len(topic))
    resumed.compile(optimizer="adam", run_eagerly=True)
    restored = Restored()
    history = resumed.fit(dataset, epochs=4, verbose=0, callbacks=[backup, restored])
    assert len(history.history["loss"]) == 2                 # epochs 3 and 4 only
    for a, b in zip(restored.weights, interrupt.weights):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(history.history["loss"]).all()


def test_presets_and_bad_arguments():
    for name in ("paper", "paper_large", "paper_table6", "paper_table6_moe", "small", "demo"):
        assert {"model", "data", "training"} <= set(presets.preset("tcnlm", name).settings())
    assert presets.preset("tcnlm", "paper").model["hidden_dim"] == 600
    assert presets.preset("tcnlm", "paper_large").model["num_layers"] == 2
    assert presets.preset("tcnlm", "paper_table6_moe").model["mixture"] == "moe"
    # `small` (the README main job) starts its topic decoder from an LDA: built outside
    # tfktopic.runs it needs the LDA's topic-word matrix, and says so.
    with pytest.raises(ValueError, match="topic_word_init"):
        TCNLM.from_preset("small", 50, 20)
    num_topics = presets.preset("tcnlm", "small").model["num_topics"]
    lda = np.random.default_rng(0).dirichlet(np.ones(20), size=num_topics).astype("float32")
    model = TCNLM.from_preset("small", 50, 20, hidden_dim=8, embedding_dim=8,
                              topic_word_init=lda)
    assert model.num_topics == num_topics and model.hidden_dim == 8
    assert model.decoder_init == "lda"
    bad = [({"hidden_dim": 0}, "hidden_dim"), ({"num_topics": 0}, "num_topics"),
           ({"num_layers": 1.5}, "num_layers"), ({"factor_dim": -1}, "factor_dim"),
           ({"mixture": "logits"}, "mixture"), ({"dropout": 1.0}, "dropout"),
           ({"diversity_weight": -0.1}, "diversity_weight"), ({"ntm_units": (0,)}, "ntm_units"),
           ({"embeddings": np.zeros((3, 3))}, "embeddings"),
           ({"bow_normalization": "l2"}, "bow_normalization")]
    for kwargs, name in bad:
        with pytest.raises(ValueError, match=name):
            TCNLM(50, 20, **kwargs)
    assert TCNLM(50, 20, ntm_units=(1, 1)).get_config()["ntm_units"] == [1, 1]  # smallest
    with pytest.raises(ValueError, match="topic_vocab_size"):
        TCNLM(50, 0)
    with pytest.raises(ValueError, match="preset"):
        TCNLM.from_preset("huge", 50, 20)
    model = _tiny(30, 12)
    with pytest.raises(ValueError, match="context_bow"):
        model({"tokens": np.ones((1, 3), np.int32)})
    for kwargs, name in [({"method": "beam"}, "method"), ({"temperature": 0.0}, "temperature"),
                         ({"top_k": 0}, "top_k"), ({"topic": 4}, "topic"),
                         ({"topic": [1.0, 0.0]}, "topic"), ({"max_len": 0}, "max_len"),
                         ({"topic": 1, "context_bow": np.ones(12)}, "context_bow"),
                         ({"context_bow": np.ones(5)}, "context_bow"),
                         ({"num_sentences": 0}, "num_sentences")]:
        with pytest.raises(ValueError, match=name):
            model.generate(**kwargs, sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="top_n"):
        model.topics(13)
    with pytest.raises(ValueError, match="vocabulary"):
        model.topics(3, vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="num_topics"):
        FactorizedTopicLSTMCell(4, 0)


def test_the_smallest_factorized_cell_has_one_unit_one_topic_and_one_factor():
    """1 is allowed for every size (0 is not: test_presets_and_bad_arguments)."""
    cell = FactorizedTopicLSTMCell(1, 1, factor_dim=1)
    h, (h2, c) = cell(keras.ops.ones((2, 1 + 1)), [keras.ops.zeros((2, 1))] * 2)   # [x, t]
    assert tuple(h.shape) == (2, 1) and tuple(c.shape) == (2, 1)
    with pytest.raises(ValueError, match="num_topics=1"):                       # t, no x
        FactorizedTopicLSTMCell(1, 1)(keras.ops.ones((2, 1)), [keras.ops.zeros((2, 1))] * 2)
    for name, kwargs in (("units", {"units": 0}), ("num_topics", {"num_topics": 0}),
                         ("factor_dim", {"factor_dim": 0})):
        with pytest.raises(ValueError, match=name):
            FactorizedTopicLSTMCell(**{"units": 1, "num_topics": 1, **kwargs})


@pytest.mark.parametrize("mixture", ["factorized", pytest.param("moe", marks=pytest.mark.slow)])
def test_training_step_compiles_with_xla(mixture):
    """`compile(jit_compile=True)` (what "auto" picks on a GPU) trains TCNLM: the recurrence's
    while loop is bounded, so XLA can size its gradient accumulators."""
    rng = np.random.default_rng(0)
    batch = {"tokens": rng.integers(1, 30, (4, 6)).astype("int32"),
             "targets": rng.integers(1, 30, (4, 6)).astype("int32"),
             "mask": (rng.random((4, 6)) > 0.3).astype("float32"),
             "context_bow": rng.integers(0, 3, (4, 12)).astype("float32")}
    keras.utils.set_random_seed(0)
    model = TCNLM(30, 12, num_topics=3, embedding_dim=8, hidden_dim=8, factor_dim=8,
                  ntm_units=(8,), mixture=mixture)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    history = model.fit(tf.data.Dataset.from_tensors(batch).repeat(20), epochs=1, verbose=0)
    assert model.jit_compile
    after = model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)
    assert np.isfinite(history.history["loss"][-1])
    assert after["nll"] < np.log(30)     # learned the batch: below the uniform 3.40 nats


@pytest.mark.parametrize("unit_forget_bias", [True, False])
def test_unit_forget_bias_adds_1_to_the_forget_gate_only(unit_forget_bias):
    """Gate-major biases (i, f, c, o): with ``unit_forget_bias`` the forget gate's row is
    the initializer's value + 1 (Jozefowicz et al. 2015; Keras' LSTM default)."""
    cell = FactorizedTopicLSTMCell(3, 2, bias_initializer=keras.initializers.Constant(0.5),
                                   unit_forget_bias=unit_forget_bias)
    cell.build((None, 4 + 2))
    expected = np.full((4, 3), 0.5)
    expected[1] += float(unit_forget_bias)
    np.testing.assert_allclose(np.asarray(cell.bias), expected)


def test_experts_lstm_adds_1_to_every_experts_forget_gate_and_takes_size_1():
    """`TopicExpertsLSTM` (the MoE variant): bias [K, 4 n_h] with the forget block (second
    of four) at the initializer's value + 1 for every expert; one unit, one expert and one
    input feature are valid sizes (0 is the named error)."""
    layer = TopicExpertsLSTM(3, 2, bias_initializer=keras.initializers.Constant(0.5))
    layer.build((None, None, 4))
    expected = np.full((2, 12), 0.5)
    expected[:, 3:6] += 1.0
    np.testing.assert_allclose(np.asarray(layer.bias), expected)
    assert tuple(TopicExpertsLSTM(1, 1)(keras.ops.ones((2, 3, 1))).shape) == (2, 3, 1, 1)
    for name in ("units", "num_experts"):
        with pytest.raises(ValueError, match=name):
            TopicExpertsLSTM(**{"units": 1, "num_experts": 1, name: 0})


def test_topic_weights_are_normalised_per_sentence_for_generation():
    """`topic` as weights, one row for all sentences or one per sentence, is normalised to
    proportions t (rows summing to 1)."""
    model = _tiny(30, 12)
    rows = np.array([[2.0, 2.0, 0.0, 0.0], [0.0, 1.0, 0.0, 3.0], [5.0, 0.0, 0.0, 0.0]],
                    np.float32)
    t = np.asarray(model.generation_conditioning(3, topic=rows))
    np.testing.assert_allclose(t, rows / rows.sum(axis=1, keepdims=True), rtol=1e-6)
    one = np.asarray(model.generation_conditioning(2, topic=rows[1]))
    np.testing.assert_allclose(one, np.tile([0.0, 0.25, 0.0, 0.75], (2, 1)), rtol=1e-6)


@pytest.mark.parametrize("mixture", ["factorized", "moe"])
def test_one_real_token_loss_and_generation_step_log_probabilities(mixture):
    """The loss is (LM NLL + topic-model NLL + KL) / n - lambda R also for n = 1 real
    token; a generation step returns log-probabilities: the log-softmax of the language
    model's logits (factorized) or its mixture (moe), summing to 1."""
    model = _tiny(30, 12, mixture=mixture)
    batch = _batch(np.random.default_rng(2), 2, 5, 30, 12)
    batch["mask"] = np.zeros_like(batch["mask"])
    batch["mask"][1, 2] = 1.0                                # one real target
    terms = model.objective(batch)
    assert float(terms["num_tokens"]) == 1.0
    expected = (float(terms["nll_sum"]) + float(terms["tm_nll_sum"])
                + float(np.sum(terms["kl"])) - model.diversity_weight * float(terms["diversity"]))
    assert float(terms["loss"]) == pytest.approx(expected, rel=1e-5)
    t = np.asarray(model.topic_proportions(batch["context_bow"]))
    state = model.initial_generation_state(2)
    tokens = batch["tokens"][:, 0]
    step, _ = model.generation_step(tokens, state, t)
    predictions = np.asarray(model.language_model(tokens[:, None], t)[0][:, 0], np.float64)
    log_softmax = predictions - scipy.special.logsumexp(predictions, axis=-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(step, np.float64), log_softmax, atol=1e-5)
    np.testing.assert_allclose(np.exp(np.asarray(step, np.float64)).sum(-1), 1.0, atol=1e-5)


def test_defaults_are_the_papers_small_tcnlm():
    """Wang et al. §4 (reference): 50 topics, a 1-layer LSTM of 600 units on 300-dim
    embeddings with n_f = n_h factors (SCN), a 2 x 256 NTM encoder, diversity weight
    lambda = 0.1, the factorized mixture, no dropout and no warm-ups."""
    model = TCNLM(50, 20)
    config = model.get_config()
    expected = {"num_topics": 50, "embedding_dim": 300, "hidden_dim": 600, "num_layers": 1,
                "factor_dim": None, "ntm_units": [256, 256], "diversity_weight": 0.1,
                "mixture": "factorized", "dropout": 0.0, "bow_normalization": "total",
                "kl_warmup_steps": 0, "topic_warmup_steps": 0, "decoder_init": "random"}
    assert {key: config[key] for key in expected} == expected
    assert model.rnns[0].cell.factor_dim == 600 and model.rnns[0].cell.units == 600


def _gate_order_layer_and_store():
    """A built `FactorizedTopicLSTM` (distinct random weights, keras' gate order) and its
    cell's weights as a file saved before `gate_order` stored them: gates (i, f, o, c)."""
    from tfktopic.models.tcnlm.factorized_lstm import to_gate_order
    rng = np.random.default_rng(3)
    layer = FactorizedTopicLSTM(5, 3, factor_dim=4, fast_path=False)
    x = keras.ops.convert_to_tensor(rng.normal(size=(2, 6, 7)), "float32")
    t = keras.ops.convert_to_tensor(rng.dirichlet(np.ones(3), size=2), "float32")
    layer(x, t)
    for weight in layer.cell.weights:
        weight.assign(rng.normal(scale=0.5, size=weight.shape))
    store = {str(i): keras.ops.convert_to_numpy(to_gate_order(w, "ifoc"))
             for i, w in enumerate(layer.cell.weights)}
    return layer, store, x, t


def test_old_gate_order_weights_are_permuted_on_load_and_give_identical_outputs():
    """A config without ``gate_order`` (a file saved before it) means gates (i, f, o, c):
    loading such weights swaps the c and o blocks, so the layer computes what the new-order
    layer computes (atol 1e-6; reference and fast paths), and says "ifco" afterwards. A
    layer told the new order computes something else from the same store (the swap matters)."""
    layer, store, x, t = _gate_order_layer_and_store()
    config = layer.get_config()
    assert config["gate_order"] == "ifco"
    legacy_config = {k: v for k, v in config.items() if k != "gate_order"}
    old = FactorizedTopicLSTM.from_config(legacy_config)
    assert old.cell.gate_order == "ifoc"
    old(x, t)
    old.cell.load_own_variables(store)
    assert old.cell.gate_order == "ifco" and old.get_config()["gate_order"] == "ifco"
    expected = keras.ops.convert_to_numpy(layer(x, t))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(old(x, t)), expected, atol=1e-6)
    old.fast_path = True
    np.testing.assert_allclose(keras.ops.convert_to_numpy(old(x, t)), expected, atol=1e-6)
    unswapped = FactorizedTopicLSTM.from_config(config)
    unswapped(x, t)
    unswapped.cell.load_own_variables(store)
    assert np.max(np.abs(keras.ops.convert_to_numpy(unswapped(x, t)) - expected)) > 1e-3
    with pytest.raises(ValueError, match="gate_order"):
        FactorizedTopicLSTM(5, 3, gate_order="iofc")


def test_a_tcnlm_config_without_gate_order_loads_the_old_order():
    """`TCNLM.from_config` of a config saved before ``gate_order`` passes "ifoc" to its
    factorized LSTMs; a new model's config says "ifco" and round-trips it."""
    model = TCNLM(20, 10, num_topics=3, embedding_dim=4, hidden_dim=5, ntm_units=(6,))
    config = model.get_config()
    assert config["gate_order"] == "ifco"
    assert TCNLM.from_config(config).rnns[0].cell.gate_order == "ifco"
    legacy = TCNLM.from_config({k: v for k, v in config.items() if k != "gate_order"})
    assert legacy.rnns[0].cell.gate_order == "ifoc"
