"""The streamed document LSTM and TopicRNN: carried state, resets, learning, saving."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, sentence_examples
from tfktopic.data.streams import (
    document_stream_dataset,
    document_streams,
    stream_batches,
    stream_examples,
    steps_per_epoch,
)
from tfktopic.evaluation import evaluate_perplexity
from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel, score_stream_perplexity
from tfktopic.models.topicrnn.document import DocumentTopicRNN


@pytest.fixture(scope="module")
def lee():
    train, valid, test = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    return train, valid, test, lm, topic


def _model(vocab_size, **kwargs):
    keras.utils.set_random_seed(0)
    return DocumentLSTMLanguageModel(vocab_size, **{"embedding_dim": 16, "hidden_dim": 24,
                                                    **kwargs})


_CALLS = {}


def _call(model, batch):
    """model(batch, training=False) as one traced function per model (fast)."""
    if id(model) not in _CALLS:
        _CALLS[id(model)] = (model, tf.function(lambda b: model(b, training=False),
                                                reduce_retracing=True))
    keys = ("tokens", "reset") + (("context_bow",) if "context_bow" in batch else ())
    return _CALLS[id(model)][1]({k: tf.constant(batch[k]) for k in keys})


def _log_probs(model, batch):
    """log p(target) [B, T] of one batch (eval state), from logits or log-probs."""
    out = np.asarray(_call(model, batch), np.float64)  # logits, or log-probs (unchanged)
    out = out - np.log(np.exp(out - out.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - out.max(-1, keepdims=True)
    return np.take_along_axis(out, batch["targets"][..., None].astype(np.int64), -1)[..., 0]


def score_documents(model, streams, batch_size=1, bptt=30, order=None, context=None,
                    zero_every_window=False):
    """Per document, the log-probabilities of its targets in stream order."""
    scores = {}
    for batch in stream_batches(streams, batch_size, bptt, order, context=context):
        if zero_every_window:
            batch = {**batch, "reset": np.ones_like(batch["reset"])}
        lp = _log_probs(model, batch)
        for b, d in enumerate(batch["document"]):
            if d >= 0:
                scores.setdefault(int(d), []).extend(lp[b][batch["mask"][b] > 0].tolist())
    return {d: np.array(v) for d, v in scores.items()}


def _longest(streams):
    return int(np.argmax(streams.document_targets()))


def test_windows_of_30_equal_one_pass_over_the_whole_document(lee):
    _, _, test, lm, _ = lee
    streams = document_streams(test, lm)
    d = _longest(streams)
    stream = streams.streams[d]
    assert len(stream) - 1 > 90  # at least 4 windows
    model = _model(len(lm), num_layers=2)
    windowed = score_documents(model, streams, order=[d])[d]
    whole = {"tokens": stream[None, :-1], "targets": stream[None, 1:],
             "reset": np.ones(1, np.float32)}
    np.testing.assert_allclose(windowed, _log_probs(model, whole)[0], atol=2e-5)
    # Scoring every window from a zero state is different (the state is carried).
    cold = score_documents(model, streams, order=[d], zero_every_window=True)[d]
    np.testing.assert_allclose(cold[:30], windowed[:30], atol=2e-5)
    assert np.abs(cold[30:] - windowed[30:]).max() > 1e-3


def test_state_is_reset_at_a_document_boundary(lee):
    _, _, test, lm, _ = lee
    streams = document_streams(test, lm)
    model = _model(len(lm))
    x, a, b = 0, 1, 2
    after_a = score_documents(model, streams, order=[a, x])[x]
    after_b = score_documents(model, streams, order=[b, x])[x]
    alone = score_documents(model, streams, order=[x])[x]
    np.testing.assert_allclose(after_a, alone, atol=2e-5)
    np.testing.assert_allclose(after_b, alone, atol=2e-5)
    # Without the reset flag the previous document would leak in.
    leaked = {}
    for batch in stream_batches(streams, 1, 30, [a, x]):
        leak = {**batch, "reset": np.zeros(1, np.float32)}
        lp = _log_probs(model, leak)
        if batch["document"][0] == x:
            leaked.setdefault(x, []).extend(lp[0][batch["mask"][0] > 0].tolist())
    assert np.abs(np.array(leaked[x])[:30] - alone[:30]).max() > 1e-3


def test_parallel_slots_are_independent_and_batch_size_does_not_change_scores(lee):
    _, _, test, lm, _ = lee
    streams = document_streams(test, lm)
    model = _model(len(lm), max_streams=8)
    order = list(range(10))
    one = score_documents(model, streams, batch_size=1, order=order)
    eight = score_documents(model, streams, batch_size=8, order=order)
    three = score_documents(model, streams, batch_size=3, order=order)
    for d in one:
        np.testing.assert_allclose(eight[d], one[d], atol=2e-5)
        np.testing.assert_allclose(three[d], one[d], atol=2e-5)
    total = -sum(v.sum() for v in score_documents(model, streams, batch_size=8).values())
    result = evaluate_perplexity(model, document_stream_dataset(streams, 8))
    assert result.num_tokens == streams.num_targets
    np.testing.assert_allclose(result.nll_sum, total, rtol=1e-5)


def test_training_and_evaluation_states_are_separate(lee):
    _, _, test, lm, _ = lee
    streams = document_streams(test, lm)
    model = _model(len(lm), max_streams=2)
    batches = list(stream_batches(streams, 2, 30, order=[0, 1]))
    model(batches[0], training=True)
    train_state = [np.asarray(v) for v in model.rnn.states["train"][0]]
    model(batches[0], training=False)
    model(batches[1], training=False)
    for before, v in zip(train_state, model.rnn.states["train"][0]):
        np.testing.assert_array_equal(before, np.asarray(v))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        model({"tokens": np.zeros((1, 2, 3), np.int32)})


def test_learns_on_real_text_well_below_unigram(lee):
    train, valid, _, lm, topic = lee
    streams, valid_streams = document_streams(train, lm), document_streams(valid, lm)
    model = DocumentLSTMLanguageModel(len(lm), embedding_dim=32, hidden_dim=64, max_streams=16)
    keras.utils.set_random_seed(0)
    # 2 epochs at 1e-2: 0.54 x unigram (3 epochs at 3e-3: 0.63 x, 1.7x the CPU).
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    valid_ds = document_stream_dataset(valid_streams, 8)
    before = evaluate_perplexity(model, valid_ds).perplexity
    history = model.fit(document_stream_dataset(streams, 16, shuffle=True, seed=0), epochs=2,
                        steps_per_epoch=steps_per_epoch(streams, 16), validation_data=valid_ds,
                        verbose=0)
    after = evaluate_perplexity(model, valid_ds)
    unigram = unigram_perplexity(lm, sentence_examples(valid, lm, topic))
    assert after.num_tokens == valid_streams.num_targets
    assert after.perplexity < 0.75 * unigram < before
    np.testing.assert_allclose(history.history["val_ppl"][-1], after.perplexity, rtol=1e-3)
    assert history.history["val_ppl"][-1] < history.history["val_ppl"][0]


def test_keras_round_trip_gives_identical_scores(lee, tmp_path):
    _, _, test, lm, _ = lee
    streams = document_streams(test, lm)
    model = _model(len(lm), num_layers=2, dropout=0.2, max_streams=4)
    model.compile(optimizer="adam")
    path = tmp_path / "doc_lstm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    original = score_documents(model, streams, batch_size=4)
    again = score_documents(loaded, streams, batch_size=4)
    for d in original:
        np.testing.assert_allclose(again[d], original[d], atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hidden_dim"):
        DocumentLSTMLanguageModel(10, hidden_dim=0)
    with pytest.raises(ValueError, match="max_streams"):
        DocumentLSTMLanguageModel(10, max_streams=0)
    with pytest.raises(ValueError, match="dropout"):
        DocumentLSTMLanguageModel(10, dropout=1.0)
    with pytest.raises(ValueError, match="initialization must be one of keras, torch, got 'tf'"):
        DocumentLSTMLanguageModel(10, initialization="tf")
    with pytest.raises(ValueError, match="initialization: unknown part 'gate'; the parts are"):
        DocumentLSTMLanguageModel(10, initialization={"gate": "torch"})


def _ranges(model):
    """Per weight: (largest |value|, the forget gate's bias values) of a document LSTM."""
    lstm = model.rnn.lstms[0].cell
    units = model.hidden_dim
    return {"embedding": np.abs(np.asarray(model.embedding.embeddings)).max(),
            "kernel": np.abs(np.asarray(lstm.kernel)).max(),
            "recurrent": np.abs(np.asarray(lstm.recurrent_kernel)).max(),
            "forget_bias": np.asarray(lstm.bias)[units:2 * units],
            "softmax": np.abs(np.asarray(model.softmax.kernel)).max(),
            "softmax_bias": np.abs(np.asarray(model.softmax.bias)).max()}


def test_torch_initialization_draws_zheng_et_al_ranges_and_keras_keeps_its_defaults(lee, tmp_path):
    """"torch": embedding and softmax U(±0.1), the LSTM and softmax bias U(±1/sqrt(H)) with no
    forget-gate offset (PyTorch's defaults, Zheng et al.'s init_weights); "keras": Keras'
    defaults (embedding U(±0.05), forget bias 1, zero softmax bias); the choice round-trips."""
    vocab = 2000
    torch_init = _ranges(_model(vocab, hidden_dim=64, initialization="torch"))
    keras_init = _ranges(_model(vocab, hidden_dim=64))
    limit = 1 / 8                                          # 1 / sqrt(64)
    assert 0.095 < torch_init["embedding"] <= 0.1 and 0.095 < torch_init["softmax"] <= 0.1
    for name in ("kernel", "recurrent", "softmax_bias"):
        assert 0.9 * limit < torch_init[name] <= limit, name
    assert np.abs(torch_init["forget_bias"]).max() <= limit
    assert 0.045 < keras_init["embedding"] <= 0.05 and keras_init["softmax_bias"] == 0.0
    np.testing.assert_array_equal(keras_init["forget_bias"], 1.0)
    lstm_only = _ranges(_model(vocab, hidden_dim=64, initialization={"lstm": "torch"}))
    assert lstm_only["kernel"] == torch_init["kernel"] and np.abs(lstm_only["forget_bias"]).max() < 1
    assert lstm_only["embedding"] == keras_init["embedding"]
    assert lstm_only["softmax_bias"] == 0.0
    model = _model(vocab, hidden_dim=8, initialization="torch", max_streams=2)
    path = tmp_path / "torch_init.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["initialization"] == "torch"
    assert loaded.rnn.get_config()["initialization"] == "torch"
    np.testing.assert_array_equal(np.asarray(loaded.softmax.bias), np.asarray(model.softmax.bias))


# ------------------------------------------------------------ streamed TopicRNN
def _topicrnn(lm, topic, **kwargs):
    keras.utils.set_random_seed(0)
    return DocumentTopicRNN(len(lm), topic.lm_to_topic, **{
        "num_topics": 4, "hidden_dim": 24, "embedding_dim": 16, "encoder_units": (16,), **kwargs})


def test_topicrnn_scores_the_sentence_level_targets(lee):
    _, _, test, lm, topic = lee
    model = _topicrnn(lm, topic, max_streams=8)
    result, streams = score_stream_perplexity(model, test, lm, topic, batch_size=8)
    sentence = sentence_examples(test, lm, topic)
    assert result.num_tokens == sentence.num_targets == streams.num_targets
    per_doc = score_documents(model, streams, batch_size=8, context="preceding")
    np.testing.assert_allclose(-sum(v.sum() for v in per_doc.values()), result.nll_sum, rtol=1e-5)
    assert "preceding" in result.protocol


def test_topicrnn_carries_state_and_uses_only_the_preceding_text(lee):
    _, _, test, lm, topic = lee
    streams = document_streams(test, lm, topic)
    d = _longest(streams)
    stream = streams.streams[d]
    model = _topicrnn(lm, topic, num_layers=2)
    windowed = score_documents(model, streams, order=[d], context="preceding")[d]
    # One pass of the LSTM over the whole document, then each window's output
    # layer with theta of the topic words before it: the same scores.
    whole = {"tokens": stream[None, :-1], "reset": np.ones(1, np.float32)}
    hidden = model.hidden_states(whole)
    expected = []
    for start in range(0, len(stream) - 1, 30):
        n = min(30, len(stream) - 1 - start)
        bow = np.bincount(topic.topic_ids(stream[1:start + 1]), minlength=len(topic))
        _, mean, _ = model.infer_topics(bow[None].astype(np.float32))
        log_probs = np.asarray(model.gate(hidden[:, start:start + n], mean)["log_probs"])[0]
        expected.extend(log_probs[np.arange(n), stream[start + 1:start + n + 1]].tolist())
    np.testing.assert_allclose(windowed, expected, atol=3e-5)
    # From a zero state at every window the scores differ.
    cold = score_documents(model, streams, order=[d], context="preceding",
                           zero_every_window=True)[d]
    assert np.abs(cold[30:] - windowed[30:]).max() > 1e-3
    # The context matters (theta is not ignored)...
    whole_doc = score_documents(model, streams, order=[d], context="whole_document")[d]
    assert np.abs(whole_doc - windowed).max() > 1e-4
    # ...and never sees the future: replacing the document's last sentence
    # leaves the score of every earlier target unchanged ("preceding"), while
    # the "all_other" context would let it change earlier windows.
    changed_doc = list(test[d][:-1]) + [test[(d + 1) % len(test)][0]]
    changed = document_streams([test[d], changed_doc], lm, topic)
    a, b = changed.streams
    k = int(np.argmax(a[:min(len(a), len(b))] != b[:min(len(a), len(b))]))
    assert 30 < k
    scores = {context: [score_documents(model, changed, order=[i], context=context)[i][:k - 1]
                        for i in (0, 1)] for context in ("preceding", "all_other")}
    np.testing.assert_allclose(*scores["preceding"], atol=1e-6)
    assert np.abs(scores["all_other"][0] - scores["all_other"][1]).max() > 1e-5


def test_topicrnn_resets_at_document_boundaries(lee):
    _, _, test, lm, topic = lee
    streams = document_streams(test, lm, topic)
    model = _topicrnn(lm, topic)
    alone = score_documents(model, streams, order=[0], context="preceding")[0]
    after = score_documents(model, streams, order=[1, 0], context="preceding")[0]
    np.testing.assert_allclose(after, alone, atol=2e-5)


def test_topicrnn_learns_and_round_trips(lee, tmp_path):
    train, valid, _, lm, topic = lee
    model = _topicrnn(lm, topic, max_streams=16)
    # One pass over the training streams, in two halves (two loss readings) at 1e-2:
    # 0.74 x unigram (two full passes at 3e-3: 0.82 x, for 1.9x the CPU).
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    train_ds, steps, _ = stream_examples(train, lm, topic, batch_size=16, shuffle=True,
                                         context="all_other")
    history = model.fit(train_ds, epochs=2, steps_per_epoch=steps // 2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]
    result, _ = score_stream_perplexity(model, valid, lm, topic)
    assert result.perplexity < unigram_perplexity(lm, sentence_examples(valid, lm, topic))
    path = tmp_path / "doc_topicrnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    again, _ = score_stream_perplexity(loaded, valid, lm, topic)
    assert again.nll_sum == pytest.approx(result.nll_sum, rel=1e-6)
    assert loaded.topics(3).tolist() == model.topics(3).tolist()


def test_topicrnn_torch_initialization_covers_its_language_model_and_round_trips(lee, tmp_path):
    """The streamed TopicRNN's "torch" initialization draws its embedding and vocabulary softmax
    from U(±0.1) and its LSTM without a forget-gate offset, as Zheng et al.'s TRNN; its topic
    matrix keeps Glorot; the choice survives a .keras round trip."""
    _, _, _, lm, topic = lee
    model = _topicrnn(lm, topic, hidden_dim=64, initialization="torch")
    kernel = np.asarray(model.gate.projection.kernel)
    assert 0.095 < np.abs(np.asarray(model.embedding.embeddings)).max() <= 0.1
    assert 0.095 < np.abs(kernel).max() <= 0.1
    assert 0 < np.abs(np.asarray(model.gate.projection.bias)).max() <= 1 / 8
    assert np.abs(np.asarray(model.rnn.lstms[0].cell.bias)).max() <= 1 / 8
    keras_model = _topicrnn(lm, topic, hidden_dim=64)
    np.testing.assert_array_equal(np.asarray(keras_model.gate.projection.bias), 0.0)
    np.testing.assert_array_equal(np.asarray(keras_model.rnn.lstms[0].cell.bias)[64:128], 1.0)
    path = tmp_path / "torch_init_topicrnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["initialization"] == "torch"
    np.testing.assert_array_equal(np.asarray(loaded.gate.projection.kernel), kernel)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_topicrnn_greedy_generation_is_the_arg_max_of_its_forward_pass(lee, num_layers):
    """Generation runs the LSTM cells step by step; the model's call runs them as layers over
    a window. A document's first sentence from <bos>, from a zero state, with theta from a
    bag of words: every greedy token is the arg-max of the teacher-forced forward pass."""
    train, _, _, lm, topic = lee
    model = _topicrnn(lm, topic, num_layers=num_layers)
    model.gate.topic_word.assign(5.0 * np.asarray(model.gate.topic_word))
    bow = np.zeros(model.num_content, np.float32)
    bow[[3, 7, 11]] = [2.0, 1.0, 1.0]
    generated = model.generate(num_sentences=1, max_len=12, context_bow=bow, sampler="greedy", allow_unk=True)[0]
    length = int(np.argmax(generated == 2)) + 1 if 2 in generated else len(generated)
    assert np.all(generated[length:] == 0) and np.all(generated[:length] >= 2)
    tokens = np.concatenate([[1], generated[:length - 1]])[None].astype(np.int32)
    log_probs = np.array(model({"tokens": tokens, "reset": np.ones(1, np.float32),
                                "context_bow": bow[None]}, carry=False))[0]
    log_probs[:, :2] = -np.inf
    np.testing.assert_array_equal(log_probs.argmax(-1), generated[:length])
    # a topic moves theta, and with it the sentences
    assert not np.array_equal(model.generate(4, 10, topic=0, sampler="greedy", allow_unk=True), model.generate(4, 10, topic=1, sampler="greedy", allow_unk=True))
    with pytest.raises(ValueError, match="topic must be an int in"):
        model.generate(1, 5, topic=4, sampler="greedy", allow_unk=True)
