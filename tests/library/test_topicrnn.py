"""TopicRNN: the stop-word gate, the ELBO (KL once per document), leak-free
marginal perplexity, learning on real text, features, generation, saving."""


import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import assert_objective_unchanged_by_xla_loops
from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, read_imdb, read_tdlm,
                           sentence_examples)
from tfktopic.data.contexts import document_examples
from tfktopic.data.pipeline import document_dataset, sentence_dataset
from tfktopic.evaluation import evaluate_perplexity, unigram_perplexity
from tfktopic.models.topicrnn.stopword_gate import StopwordGate
from tfktopic.layers.topic_encoders import GaussianTopicEncoder
from tfktopic import presets
from tfktopic.models.topicrnn import TopicRNN, build_sentiment_classifier

LM_TO_TOPIC = np.array([-1, -1, -1, -1, 0, -1, 1, 2, -1, 3], np.int32)  # C = 10, V_c = 4


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _gate_and_inputs(variant, seed=0):
    rng = np.random.default_rng(seed)
    gate = StopwordGate(10, LM_TO_TOPIC, num_topics=3, variant=variant)
    hidden = rng.normal(size=(2, 5, 6)).astype(np.float32)
    theta = rng.normal(size=(2, 3)).astype(np.float32)
    gate(hidden, theta)
    gate.topic_word.assign(rng.normal(size=(3, 4)).astype(np.float32))
    return gate, hidden, theta


def _by_hand(gate, hidden, theta):
    """V h, s = Gamma^T h and B^T theta scattered into the vocabulary, in numpy."""
    kernel, bias = (np.asarray(w, np.float64) for w in gate.projection.weights)
    stop_kernel, stop_bias = (np.asarray(w, np.float64) for w in gate.stop_projection.weights)
    vh = hidden @ kernel + bias
    s = (hidden @ stop_kernel + stop_bias)[..., 0]
    content = theta @ np.asarray(gate.topic_word, np.float64)
    topic_bias = np.zeros((theta.shape[0], 10))
    for lm_id, topic_id in enumerate(LM_TO_TOPIC):
        if topic_id >= 0:
            topic_bias[:, lm_id] = content[:, topic_id]
    return vh, s, topic_bias[:, None, :]


# ------------------------------------------------------------------ the gate
def test_gate_shapes_and_topic_bias_only_on_content_words():
    gate, hidden, theta = _gate_and_inputs("paper")
    out = gate(hidden, theta)
    assert set(out) == {"log_probs", "stop_logits"}
    assert out["log_probs"].shape == (2, 5, 10) and out["stop_logits"].shape == (2, 5)
    both = gate(hidden, theta, stop_indicator=np.zeros((2, 5), np.float32), marginal=True)
    assert set(both) == {"logits", "log_probs", "stop_logits"}
    chunked = gate(np.zeros((2, 3, 5, 6), np.float32), np.zeros((2, 3, 3), np.float32))
    assert chunked["log_probs"].shape == (2, 3, 5, 10)
    topic_bias = np.asarray(gate.topic_bias(theta))
    _, _, expected = _by_hand(gate, hidden, theta)
    np.testing.assert_allclose(topic_bias, expected[:, 0], atol=1e-5)
    assert np.all(topic_bias[:, LM_TO_TOPIC < 0] == 0) and np.all(topic_bias[:, LM_TO_TOPIC >= 0] != 0)
    np.testing.assert_array_equal(np.asarray(gate.stop_indicator([[0, 4, 5, 9]])), [[1, 0, 1, 0]])


@pytest.mark.parametrize("variant", ["paper", "disjoint"])
def test_observed_indicator_logits_equal_the_formula(variant):
    gate, hidden, theta = _gate_and_inputs(variant)
    stop = (np.random.default_rng(1).random((2, 5)) < 0.5).astype(np.float32)
    logits = np.asarray(gate(hidden, theta, stop_indicator=stop)["logits"], np.float64)
    vh, _, topic_bias = _by_hand(gate, hidden, theta)
    expected = vh + (1.0 - stop)[..., None] * topic_bias  # V h_t + (1 - l_t) B^T theta
    if variant == "paper":
        np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)
    else:  # the support of l_t only: stop words when l_t = 1, content words when l_t = 0
        support = (LM_TO_TOPIC < 0)[None, None, :] == (stop[..., None] > 0)
        np.testing.assert_allclose(logits[support], expected[support], rtol=1e-5, atol=1e-5)
        assert np.all(logits[~support] < -1e8)


@pytest.mark.parametrize("variant", ["paper", "disjoint"])
def test_marginal_normalises_and_equals_the_explicit_mixture(variant):
    gate, hidden, theta = _gate_and_inputs(variant)
    log_probs = np.asarray(gate(hidden, theta)["log_probs"], np.float64)
    np.testing.assert_allclose(np.log(np.exp(log_probs).sum(-1)), 0.0, atol=1e-5)
    vh, s, topic_bias = _by_hand(gate, hidden, theta)
    p_stop = 1.0 / (1.0 + np.exp(-s))[..., None]
    if variant == "paper":
        mixture = p_stop * _softmax(vh) + (1 - p_stop) * _softmax(vh + topic_bias)
    else:
        is_stop = LM_TO_TOPIC < 0
        stop_softmax = _softmax(np.where(is_stop, vh, -np.inf))
        content_softmax = _softmax(np.where(is_stop, -np.inf, vh + topic_bias))
        mixture = p_stop * stop_softmax + (1 - p_stop) * content_softmax
    np.testing.assert_allclose(log_probs, np.log(mixture), rtol=1e-5, atol=1e-5)
    # The marginal is at least the joint of the observed indicator:
    # log p(y) >= log p(y, l(y)), with equality for the disjoint supports.
    targets = np.array([[4, 5, 9, 0, 6], [7, 2, 3, 9, 1]])
    stop = (LM_TO_TOPIC[targets] < 0).astype(np.float32)
    conditional = np.asarray(gate(hidden, theta, stop_indicator=stop)["logits"], np.float64)
    conditional = conditional - np.log(np.exp(conditional - conditional.max(-1, keepdims=True))
                                       .sum(-1, keepdims=True)) - conditional.max(-1, keepdims=True)
    joint = (np.take_along_axis(conditional, targets[..., None], -1)[..., 0]
             + np.where(stop > 0, _log_sigmoid(s), _log_sigmoid(-s)))
    marginal = np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    if variant == "paper":
        assert np.all(marginal >= joint - 1e-5) and np.any(marginal > joint + 1e-3)
    else:
        np.testing.assert_allclose(marginal, joint, atol=1e-5)


# --------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def apnews(apnews_path):
    corpus = read_tdlm(apnews_path).subset(range(80))
    train, valid = corpus.subset(range(60)), corpus.subset(range(60, 80))
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    return train, valid, lm, topic


def _model(lm, topic, **kwargs):
    keras.utils.set_random_seed(0)
    options = dict(num_topics=6, hidden_dim=24, encoder_units=(32,), seed=1)
    options.update(kwargs)
    return TopicRNN(len(lm), topic.lm_to_topic, **options)


def _first_batch(examples, size=16, **kwargs):
    batch = next(iter(sentence_dataset(examples, batch_size=size, shuffle=False, **kwargs)))
    return {k: v.numpy() for k, v in batch.items()}


# --------------------------------------------------------------- the ELBO
def test_kl_is_charged_once_per_document(apnews):
    train, _, lm, topic = apnews
    model = _model(lm, topic)
    examples = sentence_examples(train.subset([0]), lm, topic, protocol="all_other")
    num_windows = len(examples)
    assert num_windows >= 4
    np.testing.assert_array_equal(examples.document_targets, examples.num_targets)
    batch = _first_batch(examples, size=num_windows, document_targets=True)
    assert batch["doc_targets"].shape == (num_windows,)
    # Every window sees the whole document's bag of words: one q, one KL.
    whole = np.bincount(topic.topic_ids(np.concatenate([
        examples.targets[i, :examples.lengths[i]] for i in range(num_windows)])),
        minlength=len(topic)).astype(np.float32)
    batch["context_bow"] = np.tile(whole, (num_windows, 1))
    _, mean, log_std = model.topic_posterior(whole[None])
    kl_document = float(model.encoder.kl(mean, log_std)[0])
    assert kl_document > 1e-3
    charged = float(model.objective(batch)["kl"])
    assert charged == pytest.approx(kl_document, rel=1e-4)  # not num_windows * KL, not per token
    # Split across two batches, the charges still add up to one KL.
    half = num_windows // 2
    parts = [{k: v[:half] for k, v in batch.items()}, {k: v[half:] for k, v in batch.items()}]
    assert sum(float(model.objective(p)["kl"]) for p in parts) == pytest.approx(kl_document, rel=1e-4)
    # The per-token loss divides the one KL by the document's tokens.
    terms = model.objective(batch)
    loss = float(terms["loss"])
    expected = (float(terms["token_nll"]) + float(terms["stop_nll"]) + kl_document) / examples.num_targets
    assert loss == pytest.approx(expected, rel=1e-5)
    # The indicator term is the Bernoulli NLL of the observed l_t = [target is a stop word].
    stop = (topic.lm_to_topic[batch["targets"]] < 0).astype(np.float64)
    s = np.asarray(model.gate(model.hidden_states(batch["tokens"]),
                              np.tile(np.asarray(mean), (num_windows, 1)))["stop_logits"], np.float64)
    bce = -(batch["mask"] * (stop * _log_sigmoid(s) + (1 - stop) * _log_sigmoid(-s))).sum()
    assert float(terms["stop_nll"]) == pytest.approx(bce, rel=1e-4)
    # Without document lengths every window is its own document (and a warning says so).
    del batch["doc_targets"]
    with pytest.warns(UserWarning, match="doc_targets"):
        per_window = float(model.objective(batch)["kl"])
    assert per_window == pytest.approx(num_windows * kl_document, rel=1e-4)
    fixed = TopicRNN.from_config({**model.get_config(),
                                  "tokens_per_document": float(examples.num_targets)})
    fixed.set_weights(model.get_weights())
    assert float(fixed.objective(batch)["kl"]) == pytest.approx(kl_document, rel=1e-4)


def test_gradients_reach_encoder_topics_gate_and_rnn(apnews):
    train, _, lm, topic = apnews
    model = _model(lm, topic, cell="gru")
    batch = _first_batch(sentence_examples(train.subset(range(3)), lm, topic, protocol="all_other"),
                         document_targets=True)
    with tf.GradientTape() as tape:
        loss = model.objective(batch, training=True)["loss"]
    gradients = tape.gradient(loss, model.trainable_weights)
    names = [w.path for w in model.trainable_weights]
    for name in ("embedding", "gru_0", "encoder/hidden_0", "encoder/mean", "encoder/log_std",
                 "stopword_gate/topic_word", "stopword_gate/vocab_projection",
                 "stopword_gate/stop_projection"):
        assert any(name in n for n in names), (name, names)
    for name, gradient in zip(names, gradients):
        assert gradient is not None, name
        assert float(tf.reduce_sum(tf.abs(tf.convert_to_tensor(gradient)))) > 0, name
    # B has columns for the content (topic-vocabulary) words only.
    assert model.gate.topic_word.shape == (6, len(topic))


# --------------------------------------------------------- learning, protocol
def test_learns_and_beats_the_unigram_under_the_preceding_protocol(apnews):
    train, valid, lm, topic = apnews
    train_ds = sentence_dataset(sentence_examples(train, lm, topic, protocol="all_other"),
                                batch_size=32, seed=0, document_targets=True)
    valid_ex = sentence_examples(valid, lm, topic, protocol="preceding")
    valid_ds = sentence_dataset(valid_ex, batch_size=128, shuffle=False, document_targets=True)
    model = _model(lm, topic, hidden_dim=32, num_topics=8)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(train_ds, epochs=5, verbose=0).history
    assert history["loss"][-1] < history["loss"][0] - 0.5
    for i in range(5):  # loss = token NLL + indicator NLL + KL (per token)
        total = history["token_nll"][i] + history["stop_nll"][i] + history["kl"][i]
        assert history["loss"][i] == pytest.approx(total, rel=1e-4)
        assert history["nll"][i] == pytest.approx(history["token_nll"][i] + history["stop_nll"][i],
                                                  rel=1e-4)
    result = evaluate_perplexity(model, valid_ds, protocol="preceding")
    unigram = unigram_perplexity(lm, valid_ex)
    assert result.num_tokens == valid_ex.num_targets
    assert result.perplexity < 0.85 * unigram, (result.perplexity, unigram)
    evaluated = model.evaluate(valid_ds, return_dict=True, verbose=0)
    assert evaluated["ppl"] == pytest.approx(result.perplexity, rel=1e-3)


# ------------------------------------------------------ cells, generation
@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_cells_train_and_greedy_generation_matches_the_forward_pass(apnews, cell):
    train, _, lm, topic = apnews
    model = _model(lm, topic, cell=cell, num_layers=2)
    assert isinstance(model.rnns[0], {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM,
                                      "gru": keras.layers.GRU}[cell])
    batch = _first_batch(sentence_examples(train.subset(range(2)), lm, topic), size=8,
                         document_targets=True)
    model.compile(optimizer="adam", run_eagerly=True)  # one step: skip the tracing
    logs = model.train_on_batch(batch, return_dict=True)
    assert {"loss", "nll", "ppl", "kl", "token_nll", "stop_nll"} <= set(logs)
    bow = batch["context_bow"][3]
    generated = model.generate(num_sentences=1, max_len=12, context_bow=bow, sampler="greedy", allow_unk=True)[0]
    length = int(np.argmax(generated == 2)) + 1 if 2 in generated else len(generated)
    assert np.all(generated[length:] == 0) and np.all(generated[:length] >= 2)
    tokens = np.concatenate([[1], generated[:length - 1]])[None].astype(np.int32)
    log_probs = np.array(model({"tokens": tokens, "context_bow": bow[None]}))[0]
    log_probs[:, :2] = -np.inf
    np.testing.assert_array_equal(log_probs.argmax(-1), generated[:length])


def test_generation_options_and_topics(apnews):
    _, _, lm, topic = apnews
    model = _model(lm, topic)
    model.gate.topic_word.assign(10.0 * np.asarray(model.gate.topic_word))
    a = model.generate(num_sentences=4, max_len=10, topic=0, method="top_k", top_k=3, seed=0, allow_unk=True)
    assert a.shape == (4, 10) and a.dtype == np.int32
    np.testing.assert_array_equal(a, model.generate(4, 10, topic=0, method="top_k", top_k=3, seed=0, allow_unk=True))
    assert not np.array_equal(model.generate(4, 10, topic=0, sampler="greedy", allow_unk=True), model.generate(4, 10, topic=1, sampler="greedy", allow_unk=True))
    one_hot = np.eye(6, dtype=np.float32)[2]
    np.testing.assert_array_equal(model.generate(2, 8, topic=2, sampler="greedy", allow_unk=True), model.generate(2, 8, topic=one_hot, sampler="greedy", allow_unk=True))
    # top_k = 1 is greedy; sampling differs across seeds.
    np.testing.assert_array_equal(model.generate(3, 8, topic=1, method="top_k", top_k=1, seed=5, allow_unk=True),
                                  model.generate(3, 8, topic=1, sampler="greedy", allow_unk=True))
    s1 = model.generate(8, 10, method="sample", temperature=2.0, seed=1, allow_unk=True)
    assert not np.array_equal(s1, model.generate(8, 10, method="sample", temperature=2.0, seed=2, allow_unk=True))
    ids = model.topics(top_n=5)
    assert ids.shape == (6, 5) and ids.max() < len(topic)
    weights = np.asarray(model.gate.topic_word)
    np.testing.assert_array_equal(ids[:, 0], weights.argmax(1))
    words = model.topics(top_n=5, vocabulary=topic)
    assert words[1] == [topic.words[i] for i in ids[1]]
    assert model.topics(3, vocabulary=topic.words) == [row[:3] for row in words]


# ------------------------------------------------- document chunks (TBPTT)
def test_document_chunks_carry_the_state_and_train(apnews):
    train, _, lm, topic = apnews
    sequences = document_sequences(train.subset(range(3)), lm, topic, sentences_per_chunk=2,
                                   max_len=12)
    dataset = document_dataset(sequences, batch_size=4, shuffle=False, document_targets=True)
    batch = {k: v.numpy() for k, v in next(iter(dataset)).items()}
    assert batch["doc_targets"].shape == batch["mask"].shape[:2] == (4, 2)
    np.testing.assert_array_equal(sequences.document_targets[:, 0],
                                  [sequences.lengths[sequences.document_index == d].sum()
                                   for d in sequences.document_index])
    model = _model(lm, topic)
    log_probs = np.asarray(model(batch))
    assert log_probs.shape == batch["mask"].shape + (len(lm),)
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5)
    # Window 1 of chunk 0 continues the state of window 0 (padding skipped):
    n0, n1 = sequences.lengths[0, :2]
    joined = np.concatenate([batch["tokens"][0, 0, :n0], batch["tokens"][0, 1, :n1]])[None]
    single = np.asarray(model({"tokens": joined.astype(np.int32),
                               "context_bow": batch["context_bow"][0, 1][None]}))[0]
    np.testing.assert_allclose(log_probs[0, 1, :n1], single[n0:], atol=1e-4)
    alone = np.asarray(model({"tokens": batch["tokens"][0, 1, :n1][None],
                              "context_bow": batch["context_bow"][0, 1][None]}))[0]
    assert not np.allclose(alone, single[n0:], atol=1e-4)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), run_eagerly=True)
    first = float(model.test_on_batch(batch, return_dict=True)["loss"])
    for _ in range(3):
        model.train_on_batch(batch)
    assert float(model.test_on_batch(batch, return_dict=True)["loss"]) < first


# ------------------------------------------------------------ saving, fit
class _StopAfterFirstEpoch(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise RuntimeError("simulated interruption")


class _WeightsAtStart(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.weights = self.model.get_weights()


def test_keras_round_trip_and_fit_with_checkpoint_callbacks(apnews, tmp_path):
    train, _, lm, topic = apnews
    examples = sentence_examples(train.subset(range(2)), lm, topic, protocol="all_other")
    dataset = sentence_dataset(examples, batch_size=16, document_targets=True).take(2)
    model = _model(lm, topic, variant="disjoint", cell="gru", dropout=0.1)
    model.compile(optimizer="adam", run_eagerly=True)
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="simulated"):
        model.fit(dataset, epochs=2, verbose=0, callbacks=[
            keras.callbacks.BackupAndRestore(backup), _StopAfterFirstEpoch()])
    interrupted = model.get_weights()
    # A fresh process would rebuild the model: BackupAndRestore resumes at epoch 2
    # from the weights saved after epoch 1.
    model = _model(lm, topic, variant="disjoint", cell="gru", dropout=0.1)
    model.compile(optimizer="adam", run_eagerly=True)
    start = _WeightsAtStart()
    callbacks = [keras.callbacks.BackupAndRestore(backup), start,
                 keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"), monitor="loss")]
    history = model.fit(dataset, epochs=2, callbacks=callbacks, verbose=0)
    assert history.epoch == [1]
    for restored, saved in zip(start.weights, interrupted):
        np.testing.assert_array_equal(restored, saved)
    batch = _first_batch(examples, document_targets=True)
    for path in (tmp_path / "best.keras", tmp_path / "model.keras"):
        if path.name == "model.keras":
            model.save(path)
        loaded = keras.saving.load_model(path)
        assert isinstance(loaded, TopicRNN) and loaded.get_config() == model.get_config()
        np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-6)
        ours, theirs = model.objective(batch), loaded.objective(batch)
        assert set(theirs) == set(ours)
        for mine, other in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs)):
            assert float(other) == pytest.approx(float(mine), rel=1e-5)
        np.testing.assert_array_equal(loaded.topics(4), model.topics(4))


# ----------------------------------------------------- features (IMDB §4.2)
def test_encode_features_and_sentiment_classifier_on_imdb(imdb_path, mallet_stopwords_path):
    pos = read_imdb(imdb_path, split="train", labels=("pos",), limit=100)
    neg = read_imdb(imdb_path, split="train", labels=("neg",), limit=100)
    documents = [d for pair in zip(pos.documents, neg.documents) for d in pair]
    labels = np.array([1.0, 0.0] * 100, np.float32)
    lm = Vocabulary.build(documents, min_count=3, max_size=2000)
    topic = TopicVocabulary.build(documents, lm, stopwords=mallet_stopwords_path)
    examples = document_examples(documents, lm, topic, max_len=80)
    assert len(examples) == 200 and examples.protocol == "whole_document"
    np.testing.assert_array_equal(examples.document_targets, examples.lengths)
    assert np.array_equal(examples.context_bow(0), np.bincount(
        topic.topic_ids([w for s in documents[0] for w in lm.encode(s)]), minlength=len(topic)))
    model = _model(lm, topic, num_topics=10, hidden_dim=16, encoder_units=(32,))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), run_eagerly=True)
    model.train_on_batch(_first_batch(examples, size=64, document_targets=True))
    features = model.encode(sentence_dataset(examples, batch_size=100, shuffle=False))
    assert features.shape == (200, 10 + 16) and np.all(np.isfinite(features))
    # Features = [mean of q(theta | whole review), top-layer state after the last real token].
    _, mean, _ = model.topic_posterior(examples.context_bow(5)[None])
    np.testing.assert_allclose(features[5, :10], np.asarray(mean)[0], atol=1e-5)
    n = examples.lengths[5]
    assert 0 < n < 80 or examples.tokens[5, -1] != 0
    hidden = np.asarray(model.hidden_states(examples.tokens[5:6, :n]))[0, -1]
    np.testing.assert_allclose(features[5, 10:], hidden, atol=1e-5)
    keras.utils.set_random_seed(0)
    classifier = build_sentiment_classifier(features.shape[1], train_features=features[:150],
                                            learning_rate=3e-3)
    assert [layer.units for layer in classifier.layers if hasattr(layer, "units")] == [50, 1]
    history = classifier.fit(features[:150], labels[:150], epochs=20, batch_size=32, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    probabilities = classifier.predict(features[150:], verbose=0)
    assert probabilities.shape == (50, 1) and np.all((probabilities > 0) & (probabilities < 1))


# ------------------------------------------------------- presets, arguments
def test_presets_follow_the_paper():
    model_of = lambda name: presets.preset("topicrnn", name).model  # noqa: E731
    sizes = {name: (model_of(name)["hidden_dim"], model_of(name)["num_topics"])
             for name in ("ptb_10", "ptb_100", "ptb_300")}
    assert sizes == {"ptb_10": (10, 18), "ptb_100": (100, 50), "ptb_300": (300, 50)}
    assert model_of("imdb")["num_topics"] == 200
    assert tuple(model_of("imdb")["encoder_units"]) == (500, 500)
    assert {"paper", "small"} <= set(presets.names("topicrnn"))
    model = TopicRNN.from_preset("ptb_10", vocab_size=10, lm_to_topic=LM_TO_TOPIC, cell="gru")
    assert (model.hidden_dim, model.num_topics, model.cell, model.encoder_units) == (10, 18, "gru",
                                                                                     (200, 200))


def test_bad_arguments_raise_value_errors_naming_them():
    with pytest.raises(ValueError, match="cell"):
        TopicRNN(10, LM_TO_TOPIC, cell="transformer")
    with pytest.raises(ValueError, match="variant"):
        TopicRNN(10, LM_TO_TOPIC, variant="mixture")
    with pytest.raises(ValueError, match="lm_to_topic"):
        TopicRNN(11, LM_TO_TOPIC)
    with pytest.raises(ValueError, match="lm_to_topic"):
        TopicRNN(10, np.full(10, -1))
    with pytest.raises(ValueError, match="lm_to_topic"):
        TopicRNN(10, np.where(LM_TO_TOPIC == 3, 5, LM_TO_TOPIC))
    with pytest.raises(ValueError, match="hidden_dim"):
        TopicRNN(10, LM_TO_TOPIC, hidden_dim=0)
    with pytest.raises(ValueError, match="num_topics"):
        TopicRNN(10, LM_TO_TOPIC, num_topics=-2)
    with pytest.raises(ValueError, match="dropout"):
        TopicRNN(10, LM_TO_TOPIC, dropout=1.0)
    with pytest.raises(ValueError, match="encoder_units"):
        TopicRNN(10, LM_TO_TOPIC, encoder_units=(8, 0))
    with pytest.raises(ValueError, match="tokens_per_document"):
        TopicRNN(10, LM_TO_TOPIC, tokens_per_document=0)
    with pytest.raises(ValueError, match="embeddings"):
        TopicRNN(10, LM_TO_TOPIC, embeddings=np.zeros((9, 4)))
    with pytest.raises(ValueError, match="variant='disjoint'"):
        StopwordGate(4, [0, 1, 2, 3], num_topics=2, variant="disjoint")
    model = TopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=4, encoder_units=(4,))
    with pytest.raises(ValueError, match="context_bow"):
        model({"tokens": np.ones((1, 3), np.int32), "context_bow": np.zeros((1, 5), np.float32)})
    with pytest.raises(ValueError, match="method"):
        model.generate(method="beam")
    with pytest.raises(ValueError, match="topic"):
        model.generate(topic=3, sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="topic"):
        model.generate(topic=np.ones(4), sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="topic"):                 # [N, K] at most
        model.generate(topic=np.ones((1, 1, 3)), sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(method="sample", temperature=0, allow_unk=True)
    with pytest.raises(ValueError, match="top_n"):
        model.topics(top_n=5)
    with pytest.raises(ValueError, match="name"):
        TopicRNN.from_preset("huge", 10, LM_TO_TOPIC)


def test_pretrained_embeddings_initialise_the_embedding():
    matrix = np.random.default_rng(0).normal(size=(10, 5)).astype(np.float32)
    model = TopicRNN(10, LM_TO_TOPIC, num_topics=2, hidden_dim=3, encoder_units=(4,),
                     embeddings=matrix)
    assert model.embedding_dim == 5 and "embeddings" not in model.get_config()
    np.testing.assert_array_equal(np.asarray(model.embedding.embeddings), matrix)
    # With embedding_dim as well, the two must agree.
    assert TopicRNN(10, LM_TO_TOPIC, embeddings=matrix, embedding_dim=5).embedding_dim == 5
    with pytest.raises(ValueError, match="embeddings have 5 columns but embedding_dim=6"):
        TopicRNN(10, LM_TO_TOPIC, embeddings=matrix, embedding_dim=6)


def test_defaults_are_the_documented_topicrnn():
    """K = 50 topics (Dieng et al.'s PTB choice for 100 and 300 units), one LSTM layer of
    200 units on embeddings of the hidden size, the paper's 2 x 200 ReLU PTB inference
    network and variant, no dropout and no KL warm-up (reference Part B)."""
    lm_to_topic = np.full(50, -1)
    lm_to_topic[30:] = np.arange(20)
    model = TopicRNN(50, lm_to_topic)
    config = model.get_config()
    expected = {"num_topics": 50, "hidden_dim": 200, "embedding_dim": 200, "cell": "lstm",
                "num_layers": 1, "encoder_units": [200, 200], "variant": "paper",
                "dropout": 0.0, "bow_normalization": "total", "kl_warmup_steps": 0,
                "decoder_init": "random", "lda_scale": 1.0}
    assert {key: config[key] for key in expected} == expected
    # A chosen topic is generated from theta = 3 e_k (three prior standard deviations).
    np.testing.assert_array_equal(np.asarray(model.generation_conditioning(1, topic=2)),
                                  3.0 * np.eye(50, dtype=np.float32)[2:3])
    # The IMDB classifier (§4.2): 50 sigmoid units, Adam at 3e-4.
    classifier = build_sentiment_classifier(5)
    assert classifier.get_layer("hidden").units == 50
    assert isinstance(classifier.optimizer, keras.optimizers.Adam)
    assert float(classifier.optimizer.learning_rate) == pytest.approx(3e-4)


def test_gaussian_encoder_defaults_and_its_log_sigma_clip_of_10():
    """The inference network q(theta | X_c) defaults to 2 x 256 ReLU layers (TCNLM's),
    total-count normalisation, no dropout; log sigma is clipped to [-10, 10] (a huge
    head bias gives exactly 10, and -10 for its negative); one topic is allowed."""
    encoder = GaussianTopicEncoder(num_topics=1, seed=0)
    config = encoder.get_config()
    assert {key: config[key] for key in ("hidden_units", "normalization", "dropout",
                                         "log_std_clip")} == \
        {"hidden_units": [256, 256], "normalization": "total", "dropout": 0.0,
         "log_std_clip": 10.0}
    bow = np.ones((2, 5), np.float32)
    theta, mean, log_std = encoder(bow)
    assert tuple(theta.shape) == (2, 1)
    for bias in (1e4, -1e4):
        encoder.log_std_head.bias.assign(np.full(1, bias, np.float32))
        _, _, log_std = encoder(bow)
        np.testing.assert_array_equal(np.asarray(log_std), np.full((2, 1), np.sign(bias) * 10.0))
    with pytest.raises(ValueError, match="num_topics"):
        GaussianTopicEncoder(num_topics=0)


def test_elbo_terms_are_the_same_with_the_xla_row_buckets(monkeypatch):
    """With XLA loops on, the real positions are padded to a multiple of the row bucket
    (rows of mask 0): every ELBO term (token, stop-word indicator, KL, marginal) and the
    gradients equal the unpadded graph's (theta at q's mean: a training call would draw
    another theta each time)."""
    keras.utils.set_random_seed(0)
    lm_to_topic = np.full(30, -1)
    lm_to_topic[12:] = np.arange(18)
    model = TopicRNN(30, lm_to_topic, num_topics=4, hidden_dim=16, encoder_units=(16,),
                     seed=1)
    rng = np.random.default_rng(3)
    tokens = rng.integers(4, 30, size=(3, 7)).astype(np.int32)
    mask = np.ones((3, 7), np.float32)
    mask[0, 3:] = 0.0
    batch = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "mask": mask,
             "context_bow": rng.poisson(0.5, size=(3, 18)).astype(np.float32),
             "doc_targets": np.array([10.0, 7.0, 20.0], np.float32)}
    model(batch)
    assert_objective_unchanged_by_xla_loops(
        model, batch, monkeypatch,
        ("token_nll", "stop_nll", "kl", "num_tokens", "loss", "marginal_nll"))


@pytest.mark.parametrize("lm_to_topic, vocab_size, message", [
    ([-1, 0, 1], 3, None),
    ([1, -1, 0, -1], None, None),
    ([-2, 0, 1], None, "to -1 or to each topic id"),
    ([-1, 0, 0], None, "exactly once"),
    ([-1, 0, 2], None, "exactly once"),
    ([-1, -1], None, "no content word"),
    ([[0, 1]], None, "1-D sequence of ints"),
    ([0.0, 1.0], None, "1-D sequence of ints"),
    ([-1, 0, 1], 4, "vocab_size=4 entries, got 3"),
])
def test_lm_to_topic_maps_each_lm_id_to_minus_1_or_one_topic_id(lm_to_topic, vocab_size,
                                                                  message):
    from tfktopic.models.topicrnn.stopword_gate import check_lm_to_topic

    if message is None:
        checked = check_lm_to_topic(lm_to_topic, vocab_size)
        assert checked.dtype == np.int32 and checked.tolist() == list(lm_to_topic)
        return
    with pytest.raises(ValueError, match=f"lm_to_topic.*{message}|{message}"):
        check_lm_to_topic(lm_to_topic, vocab_size)


def test_the_smallest_stopword_gate_has_two_words_and_one_topic():
    """One stop word and one content word, one topic: the smallest valid gate (its log-
    probabilities are normalised); a single word or no topic is the named error."""
    gate = StopwordGate(vocab_size=2, lm_to_topic=[-1, 0], num_topics=1)
    out = gate(keras.ops.ones((1, 3, 4)), keras.ops.ones((1, 1)))
    log_probs = np.asarray(out["log_probs"], np.float64)
    assert log_probs.shape == (1, 3, 2)
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="vocab_size must be >= 2"):
        StopwordGate(vocab_size=1, lm_to_topic=[0], num_topics=1)
    with pytest.raises(ValueError, match="num_topics must be >= 1"):
        StopwordGate(vocab_size=2, lm_to_topic=[-1, 0], num_topics=0)


def test_tokens_per_document_takes_any_positive_number():
    """The KL share of a window is n_w / tokens_per_document: any positive number (1
    included), not 0 or below."""
    assert TopicRNN(10, LM_TO_TOPIC, tokens_per_document=1).tokens_per_document == 1.0
    for bad in (0, -2.0):
        with pytest.raises(ValueError, match="tokens_per_document must be > 0"):
            TopicRNN(10, LM_TO_TOPIC, tokens_per_document=bad)


def test_a_one_token_window_is_charged_its_documents_whole_kl_and_an_empty_one_none():
    """KL weights n_w / max(N_w, 1): a one-target document's window carries its whole KL
    (with doc_targets and, as its own document, without); an empty window carries none."""
    keras.utils.set_random_seed(0)
    model = TopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=8, encoder_units=(8,), seed=1)
    rng = np.random.default_rng(2)
    width = int((np.asarray(LM_TO_TOPIC) >= 0).sum())
    tokens = rng.integers(1, 10, size=(3, 4)).astype(np.int32)
    mask = np.zeros((3, 4), np.float32)
    mask[0, :1] = 1.0                                    # one target
    mask[1, :3] = 1.0                                    # three; window 2: none
    batch = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "mask": mask,
             "context_bow": rng.poisson(1.0, size=(3, width)).astype(np.float32) + 1,
             "doc_targets": np.array([1.0, 6.0, 5.0], np.float32)}
    _, mean, log_std = model.topic_posterior(batch["context_bow"])
    kl = np.asarray(model.encoder.kl(mean, log_std), np.float64)
    assert (kl > 1e-4).all()
    charged = float(model.objective(batch)["kl"])
    assert charged == pytest.approx(kl[0] + kl[1] * 3 / 6, rel=1e-5)
    del batch["doc_targets"]
    with pytest.warns(UserWarning, match="doc_targets"):
        assert float(model.objective(batch)["kl"]) == pytest.approx(kl[0] + kl[1], rel=1e-5)


def test_encode_takes_the_state_after_each_rows_last_real_token():
    """Rows of different lengths, padded with 0: the features' hidden part is the state at
    position length - 1 of each row (length from the mask when given, else from the
    nonzero tokens), the same as running the row alone, unpadded."""
    keras.utils.set_random_seed(0)
    model = TopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=8, encoder_units=(8,), seed=1)
    lengths = [5, 2, 1]
    tokens = np.zeros((3, 6), np.int32)                      # B != L, so axes cannot swap
    rng = np.random.default_rng(5)
    for row, n in enumerate(lengths):
        tokens[row, :n] = rng.integers(1, 10, size=n)
    bow = rng.poisson(1.0, size=(3, 4)).astype(np.float32)
    alone = np.stack([np.asarray(model.hidden_states(tokens[row:row + 1, :n]))[0, -1]
                      for row, n in enumerate(lengths)])
    features = model.encode({"tokens": tokens, "context_bow": bow})
    np.testing.assert_allclose(features[:, 3:], alone, atol=1e-5)
    mask = (np.arange(6)[None] < np.array(lengths)[:, None]).astype(np.float32)
    masked = model.encode({"tokens": tokens, "context_bow": bow, "mask": mask})
    np.testing.assert_allclose(masked, features, atol=1e-6)


def test_per_token_loss_annealed_kl_proportions_and_empty_encoding():
    """The loss is (token + stop + w KL) / n, also for n = 1, with w = min(1, step /
    kl_warmup_steps) while training; `topic_proportions` is the mean of q (the theta of
    evaluation); encoding no batches gives a [0, K + H] array."""
    keras.utils.set_random_seed(0)
    model = TopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=8, encoder_units=(8,), seed=1,
                     kl_warmup_steps=4)
    rng = np.random.default_rng(3)
    width = int((np.asarray(LM_TO_TOPIC) >= 0).sum())
    tokens = rng.integers(1, 10, size=(1, 4)).astype(np.int32)
    mask = np.zeros((1, 4), np.float32)
    mask[0, 0] = 1.0                                          # one real target
    batch = {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1), "mask": mask,
             "context_bow": rng.poisson(1.0, size=(1, width)).astype(np.float32) + 1,
             "doc_targets": np.array([1.0], np.float32)}
    terms = model.objective(batch)
    assert float(terms["loss"]) == pytest.approx(
        float(terms["token_nll"]) + float(terms["stop_nll"]) + float(terms["kl"]), rel=1e-5)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(2)                    # w = 2 / 4
    terms = model.objective(batch, training=True)
    assert float(terms["loss"]) == pytest.approx(
        float(terms["token_nll"]) + float(terms["stop_nll"]) + 0.5 * float(terms["kl"]),
        rel=1e-5)
    bow = batch["context_bow"]
    np.testing.assert_allclose(np.asarray(model.topic_proportions(bow)),
                               np.asarray(model.topic_posterior(bow, training=False)[0]))
    assert model.encode([]).shape == (0, 3 + 8)


def test_a_chosen_topic_is_three_prior_standard_deviations_out_by_default():
    """`generation_theta`'s default topic_strength: theta = 3 e_k (theta ~ N(0, I) a priori)."""
    from tfktopic.models.topicrnn.model import generation_theta

    never = lambda bow: pytest.fail("a topic needs no posterior")
    theta = generation_theta(never, num_topics=4, num_content=10, num_sentences=2, topic=1)
    np.testing.assert_array_equal(theta, [[0, 3, 0, 0], [0, 3, 0, 0]])
    empty = generation_theta(lambda bow: np.full((len(bow), 4), 0.5), 4, 10, 3)
    np.testing.assert_array_equal(empty, np.full((3, 4), 0.5))
