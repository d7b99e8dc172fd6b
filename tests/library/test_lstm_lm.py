"""LSTM LM baselines: shapes, state carrying, learning on real text, saving."""

import math

import keras
import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, document_sequences, load_corpus, sentence_examples
from tfktopic.data.pipeline import document_dataset, sentence_dataset
from tfktopic.evaluation import evaluate_perplexity
from tfktopic.models import LSTMLanguageModel


@pytest.fixture(scope="module")
def lee():
    train, valid, _ = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    return train, valid, lm, topic


def _small(vocab_size, **kwargs):
    keras.utils.set_random_seed(0)
    return LSTMLanguageModel(vocab_size, embedding_dim=16, hidden_dim=24, **kwargs)


def test_sentence_level_shapes_and_window_independence():
    model = _small(50, num_layers=2)
    tokens = np.random.default_rng(0).integers(1, 50, size=(3, 7)).astype(np.int32)
    logits = np.asarray(model({"tokens": tokens}))
    assert logits.shape == (3, 7, 50)
    changed = tokens.copy()
    changed[1] = 5
    other = np.asarray(model({"tokens": changed}))
    np.testing.assert_allclose(other[[0, 2]], logits[[0, 2]], atol=1e-6)


def test_document_level_carries_state_across_sentences_and_skips_padding():
    model = _small(40, document_level=True)
    first, second = [1, 7, 8, 9], [1, 10, 11]
    padded = np.zeros((1, 2, 6), np.int32)
    padded[0, 0, :4], padded[0, 1, :3] = first, second
    logits = np.asarray(model({"tokens": padded}))
    assert logits.shape == (1, 2, 6, 40)
    # The same tokens without padding in between: identical predictions.
    joined = np.asarray(model({"tokens": np.array([[first + second]], np.int32)}))[0, 0]
    np.testing.assert_allclose(logits[0, 1, :3], joined[4:], atol=1e-5)
    # The second sentence depends on the first one (state carried).
    padded2 = padded.copy()
    padded2[0, 0, 1] = 20
    assert not np.allclose(np.asarray(model({"tokens": padded2}))[0, 1, :3], logits[0, 1, :3])


def test_learns_on_real_text_and_beats_the_unigram_baseline(lee):
    train, valid, lm, topic = lee
    train_ds = sentence_dataset(sentence_examples(train, lm, topic), batch_size=64, seed=0)
    valid_ex = sentence_examples(valid, lm, topic)
    valid_ds = sentence_dataset(valid_ex, batch_size=128, shuffle=False)
    model = LSTMLanguageModel(len(lm), embedding_dim=32, hidden_dim=64)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    # 3 epochs at 1e-2 end where 8 at 3e-3 did (valid ppl 0.61 x unigram, measured), at 40 %
    # of the test's time.
    history = model.fit(train_ds, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0] - 0.5
    assert math.exp(history.history["nll"][-1]) == pytest.approx(history.history["ppl"][-1], rel=1e-4)
    result = evaluate_perplexity(model, valid_ds, protocol="preceding")
    counts = np.array([lm.counts.get(t, 0) for t in lm.tokens], np.float64) + 0.5
    counts[:2] = 0
    with np.errstate(divide="ignore"):
        unigram = np.log(counts / counts.sum())  # -inf for <pad>/<bos>, never targets
    targets = valid_ex.targets[valid_ex.mask > 0]
    unigram_ppl = math.exp(-unigram[targets].mean())
    assert result.num_tokens == valid_ex.num_targets
    assert result.perplexity < 0.9 * unigram_ppl, (result.perplexity, unigram_ppl)
    evaluated = model.evaluate(valid_ds, return_dict=True, verbose=0)
    assert evaluated["ppl"] == pytest.approx(result.perplexity, rel=1e-3)


def test_document_level_trains_on_document_batches(lee):
    train, _, lm, topic = lee
    sequences = document_sequences(train.subset(range(40)), lm, topic, sentences_per_chunk=4)
    model = _small(len(lm), document_level=True)
    model.compile(optimizer="adam")
    history = model.fit(document_dataset(sequences, batch_size=8), epochs=2, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]


def test_keras_round_trip_and_pretrained_embeddings(tmp_path):
    matrix = np.random.default_rng(1).normal(size=(30, 16)).astype(np.float32)
    model = _small(30, num_layers=2, dropout=0.2, embeddings=matrix)
    np.testing.assert_array_equal(np.asarray(model.embedding.embeddings), matrix)
    model.compile(optimizer="adam")
    tokens = np.arange(1, 13, dtype=np.int32).reshape(2, 6)
    batch = {"tokens": tokens, "targets": tokens, "mask": np.ones((2, 6), np.float32)}
    model.fit(x=batch, epochs=1, verbose=0)
    path = tmp_path / "lm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, LSTMLanguageModel) and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hidden_dim must be >= 1"):
        LSTMLanguageModel(10, hidden_dim=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        LSTMLanguageModel(10, dropout=1.0)


def test_defaults_are_one_lstm_layer_of_600_units_on_300_dim_embeddings_without_dropout():
    """The signature's defaults: the papers' small baseline (TCNLM §4: 1 layer of 600
    units; 300-dimensional embeddings, as rGBN-RNN's 2.16M LM parameters imply), sentence-
    level, stateless, without dropout."""
    model = LSTMLanguageModel(50)
    config = model.get_config()
    expected = {"vocab_size": 50, "embedding_dim": 300, "hidden_dim": 600, "num_layers": 1,
                "dropout": 0.0, "document_level": False, "cell": "lstm", "stateful": False}
    assert {key: config[key] for key in expected} == expected
    model(np.ones((2, 3), "int32"))
    assert [tuple(w.shape) for w in model.lstms[0].weights][:2] == [(300, 2400), (600, 2400)]


def test_loss_is_the_mean_nll_of_the_real_tokens_even_for_one_token_and_zero_for_none():
    """``loss`` = sum of -log p(target) over the masked-in positions / their number: with one
    real target it is that token's NLL (recomputed from the logits in numpy); a batch of
    padding only gives 0, not NaN."""
    model = _small(12)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 12, size=(2, 5)).astype("int32")
    targets = rng.integers(1, 12, size=(2, 5)).astype("int32")
    mask = np.zeros((2, 5), "float32")
    mask[1, 3] = 1.0
    terms = model.objective({"tokens": tokens, "targets": targets, "mask": mask})
    logits = np.asarray(model(tokens), np.float64)[1, 3]
    expected = np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[targets[1, 3]]
    assert float(terms["num_tokens"]) == 1.0
    assert float(terms["loss"]) == pytest.approx(expected, rel=1e-5)
    assert float(terms["nll_sum"]) == pytest.approx(expected, rel=1e-5)
    full = model.objective({"tokens": tokens, "targets": targets, "mask": 1 + 0 * mask})
    all_logits = np.asarray(model(tokens), np.float64)
    top = all_logits.max(-1)
    nll = (np.log(np.exp(all_logits - top[..., None]).sum(-1)) + top
           - np.take_along_axis(all_logits, targets[..., None], -1)[..., 0])
    assert float(full["nll_sum"]) == pytest.approx(nll.sum(), rel=1e-5)
    assert float(full["loss"]) == pytest.approx(nll.mean(), rel=1e-5)
    empty = model.objective({"tokens": tokens, "targets": targets, "mask": 0 * mask})
    assert float(empty["loss"]) == 0.0 and float(empty["num_tokens"]) == 0.0


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_generation_steps_the_cells_as_the_forward_pass_runs_the_layers(cell):
    """Each generation step's distribution is the forward pass's at that position (teacher
    forcing from <bos> and a zero state), normalised; --topic / context are refused."""
    model = _small(30, num_layers=2, cell=cell)
    tokens = np.array([[1, 7, 8, 9, 4]], np.int32)
    forward = np.asarray(keras.ops.log_softmax(model({"tokens": tokens}), axis=-1))[0]
    conditioning = model.generation_conditioning(1)
    state = model.initial_generation_state(1)
    for t in range(tokens.shape[1]):
        log_probs, state = model.generation_step(tokens[:, t], state, conditioning)
        log_probs = np.asarray(log_probs)[0]
        np.testing.assert_allclose(log_probs, forward[t], atol=1e-5)
        assert np.exp(log_probs).sum() == pytest.approx(1.0, abs=1e-5)
    greedy = np.asarray(model.generate(2, max_len=6, sampler="greedy"))
    assert greedy.shape == (2, 6) and (greedy[0] == greedy[1]).all()
    with pytest.raises(ValueError, match="has no topics"):
        model.generate(1, max_len=4, topic=2)
