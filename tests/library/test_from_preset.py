"""`from_preset` with one meaning (issue 51): pretrained names load through the family
class and the base class with their tokenizer attached, hyperparameter presets take a
tokenizer (and TCNLM ``small`` the documents of its LDA start), `topics` gives words
with weights, rGBN-RNN's Python layers are 1-based as the CLI's, and a ``.keras`` file
keeps the attached tokenizer."""

import doctest

import keras
import numpy as np
import pytest

from tfktopic import cli, pretrained
from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
from tfktopic.models import TCNLM, LSTMLanguageModel, TopicRNN
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel
from tfktopic.models.topicrnn.document import DocumentTopicRNN
from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel, fit_lda
from tfktopic.models.registry import MODELS
from tfktopic.models.rgbn.model import RGBNRNN
from tfktopic.runs import generate_text, load_run
from tfktopic.tokenizer import Tokenizer, detokenize

TINY_TCNLM = {"num_topics": 4, "hidden_dim": 8, "embedding_dim": 8, "factor_dim": 8,
              "ntm_units": (8,)}


@pytest.fixture(scope="module")
def lee():
    """The embedded Lee corpus and a tokenizer of its vocabularies."""
    docs = load_corpus("lee")
    lm_vocab = Vocabulary.build(docs, min_count=3)
    topic_vocab = TopicVocabulary.build(docs, lm_vocab, max_freq_fraction=0.005)
    return docs, Tokenizer(lm_vocab, topic_vocab)


def _shipped_class(name):
    return MODELS[pretrained.info(name)["model"]].model_class


# ------------------------------------------------------------------ pretrained names
@pytest.mark.parametrize("name", sorted(pretrained.available()))
def test_pretrained_names_load_through_family_and_base_class_with_their_tokenizer(name):
    family = _shipped_class(name)
    for model in (family.from_preset(f"pretrained:{name}"),
                  TopicLanguageModel.from_preset(name)):
        assert type(model) is family
        assert isinstance(model.tokenizer, Tokenizer)
        assert model.tokenizer.vocab_size == model.vocab_size
        assert model.tokenizer.lm_vocab.tokens == \
            Vocabulary.load(pretrained.resolve(name) / "lm_vocab.json").tokens
    texts = model.generate("the senate", max_length=12, seed=0)
    assert isinstance(texts, list) and len(texts) == 1 and texts[0].startswith("the senate")
    assert texts[0] == detokenize(texts[0])
    if model.has_topics:
        assert model.tokenizer.topic_vocab_size == model.topic_vocab_size
        topical = model.generate(topic=3, max_length=12, seed=0)
        assert isinstance(topical[0], str) and topical[0]
        words = model.topics(4)
        assert len(words[0]) == 4 and all(w in model.tokenizer.topic_vocab.words
                                          for w in words[0])


def test_a_family_refuses_a_sibling_pretrained_model_in_one_line_naming_the_class():
    with pytest.raises(ValueError) as error:
        TopicRNN.from_preset("pretrained:doc-topicrnn-apnews")
    message = str(error.value)
    assert "\n" not in message and "DocumentTopicRNN.from_preset('doc-topicrnn-apnews')" in message
    assert isinstance(DocumentTopicRNN.from_preset("doc-topicrnn-apnews"), DocumentTopicRNN)
    with pytest.raises(ValueError, match="is a TCNLM, not a LSTMLanguageModel: load it with "
                                         "TCNLM.from_preset"):
        LSTMLanguageModel.from_preset("pretrained:tcnlm-apnews")


def test_a_pretrained_name_takes_no_arguments_and_an_unknown_one_is_named():
    with pytest.raises(ValueError, match="takes no constructor arguments, tokenizer"):
        TCNLM.from_preset("tcnlm-apnews", tokenizer=object())
    with pytest.raises(ValueError, match="unknown preset 'pretrained:nope' for TCNLM"):
        TCNLM.from_preset("pretrained:nope")
    with pytest.raises(ValueError, match="replaced by pretrained:gbn-rnn-apnews"):
        RGBNRNN.from_preset("pretrained:rgbn-apnews")


def test_rgbn_paragraphs_of_a_pretrained_model_are_text():
    model = TopicLanguageModel.from_preset("gbn-rnn-apnews")
    paragraph = model.generate_paragraph(3, max_length=10, seed=0)
    assert len(paragraph) == 3 and all(isinstance(line, str) and line for line in paragraph)
    assert all(line == detokenize(line) for line in paragraph)


def test_load_run_and_the_generate_command_give_detokenised_text(capsys):
    run = load_run("pretrained:tcnlm-apnews")
    assert run.model.tokenizer.vocab_size == len(run.lm_vocab)
    texts = generate_text(run, num=3, max_len=20, topic=3, seed=0, method="sample")
    ids = run.model.generate(3, max_len=20, topic=3, seed=0, method="sample", allow_unk=False,
                             tokenizer=False)
    assert ids.shape == (3, 20) and ids.dtype == np.int32
    raw = run.tokenizer.decode_batch(ids)
    assert texts == [detokenize(text) for text in raw] and texts != raw  # seed 0 has tokens to join
    code = cli.main(["generate", "pretrained:tcnlm-apnews", "--topic", "3", "--num", "3",
                     "--max-len", "20", "--seed", "0", "--method", "temperature"])
    assert code == 0 and capsys.readouterr().out.splitlines() == texts
    assert all(text == detokenize(text) and " ," not in text and " 's" not in text
               for text in texts)


# ------------------------------------------------------------ hyperparameter presets
def test_a_hyperparameter_preset_takes_its_sizes_from_a_tokenizer_and_attaches_it(lee):
    docs, tokenizer = lee
    # TopicRNN's and rGBN-RNN's `small` start their topics from an LDA of `documents`.
    model = TopicRNN.from_preset("small", tokenizer=tokenizer, documents=docs, hidden_dim=8,
                                 embedding_dim=8, num_topics=3)
    assert model.decoder_init == "lda" and model.lda_scale == 0.1
    assert model.vocab_size == tokenizer.vocab_size and model.tokenizer is tokenizer
    np.testing.assert_array_equal(model.lm_to_topic, tokenizer.topic_vocab.lm_to_topic)
    texts = model.generate("the fire", max_length=6, seed=0)
    assert isinstance(texts[0], str) and texts[0].startswith("the fire")
    lstm = LSTMLanguageModel.from_preset("small", tokenizer=Tokenizer(tokenizer.lm_vocab),
                                         hidden_dim=8, embedding_dim=8)
    assert lstm.vocab_size == tokenizer.vocab_size
    rgbn = RGBNRNN.from_preset("small", tokenizer=tokenizer, documents=docs, num_documents=10,
                               num_layers=1)
    assert rgbn.decoder_init == "lda"
    assert (rgbn.vocab_size, rgbn.topic_vocab_size) == (tokenizer.vocab_size,
                                                         tokenizer.topic_vocab_size)


@pytest.mark.parametrize("family", [LDALSTMLanguageModel, DocumentLSTMLanguageModel,
                                    DocumentTopicRNN])
def test_every_family_built_with_a_tokenizer_generates_text(lee, family):
    docs, tokenizer = lee
    sizes = {"hidden_dim": 8, "embedding_dim": 8}
    if family is not DocumentLSTMLanguageModel:
        sizes["num_topics"] = 3
    if family is DocumentTopicRNN:
        sizes["documents"] = docs                   # its `small` starts B from an LDA
    model = family.from_preset("small", tokenizer=tokenizer, **sizes)
    texts = model.generate("the fire", max_length=6, seed=0, num_sentences=2)
    assert len(texts) == 2 and all(text.startswith("the fire") for text in texts)


def test_preset_errors_are_one_line(lee):
    _, tokenizer = lee
    cases = [
        (lambda: TopicRNN.from_preset("small", 10, tokenizer=tokenizer), "by keyword"),
        (lambda: TopicRNN.from_preset("small", tokenizer=Tokenizer(tokenizer.lm_vocab)),
         "no topic vocabulary, which TopicRNN needs"),
        (lambda: TopicRNN.from_preset("small", tokenizer="words"), "must be a tfktopic"),
        (lambda: TopicRNN.from_preset("small", tokenizer=tokenizer, decoder_init="random",
                                      documents=[[["a"]]]),
         "documents= is only used to fit the LDA"),
        (lambda: TopicRNN.from_preset("small", tokenizer=tokenizer),
         "topic_word_init=.*documents="),
        (lambda: TCNLM.from_preset("small", 50, 20), "topic_word_init=.*documents="),
        (lambda: TCNLM.from_preset("small", 50, 20, documents=[[["a"]]]),
         "documents= needs tokenizer="),
    ]
    for build, pattern in cases:
        with pytest.raises(ValueError, match=pattern) as error:
            build()
        assert "\n" not in str(error.value)


def test_tcnlm_small_with_documents_starts_its_decoder_from_the_lda_of_those_documents(lee):
    docs, tokenizer = lee
    model = TCNLM.from_preset("small", tokenizer=tokenizer, documents=docs, **TINY_TCNLM)
    lda = fit_lda(docs, tokenizer.topic_vocab, num_topics=4, passes=10, seed=0)
    np.testing.assert_allclose(model.beta(), lda.get_topics(), atol=1e-5)
    assert model.tokenizer is tokenizer and model.decoder_init == "lda"


def test_lda_lstm_with_documents_fits_its_lda_with_the_presets_passes(lee):
    docs, tokenizer = lee
    model = LDALSTMLanguageModel.from_preset("small", tokenizer=tokenizer, documents=docs,
                                             num_topics=3, hidden_dim=8, embedding_dim=8)
    lda = fit_lda(docs, tokenizer.topic_vocab, num_topics=3, passes=5, seed=0)
    np.testing.assert_allclose(model.topic_word_matrix(), lda.get_topics(), atol=1e-5)
    assert isinstance(model.topics(2, weights=True)[0][0][0], str)


def test_the_from_preset_docstring_example_runs():
    finder = doctest.DocTestFinder()
    tests = finder.find(TopicLanguageModel.from_preset, "from_preset",
                        globs={"TopicLanguageModel": TopicLanguageModel})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 8 and result.failed == 0


# ---------------------------------------------------------------------- topic weights
def test_topic_weights_are_the_normalised_distribution_in_decreasing_order(lee):
    docs, tokenizer = lee
    model = TCNLM.from_preset("small", tokenizer=tokenizer, documents=docs, **TINY_TCNLM)
    width = tokenizer.topic_vocab_size
    full = model.topics(width, weights=True)
    assert len(full) == 4 and all(len(row) == width for row in full)
    for row, beta_row in zip(full, model.beta()):
        probabilities = np.array([p for _, p in row])
        assert np.all(np.diff(probabilities) <= 0)
        np.testing.assert_allclose(probabilities.sum(), 1.0, atol=1e-5)
        np.testing.assert_allclose(
            probabilities, [beta_row[tokenizer.topic_vocab.word_to_id(w)] for w, _ in row],
            rtol=1e-5)
    assert [[w for w, _ in row[:5]] for row in full] == model.topics(5)
    assert model.topics(5, weights=True)[0] == full[0][:5]
    ids = model.topics(3, vocabulary=None, weights=True)          # tokenizer attached
    assert isinstance(ids[0][0][0], str)
    model.tokenizer = None
    assert isinstance(model.topics(3, weights=True)[0][0][0], int)


def test_topicrnn_topic_weights_are_the_softmax_of_its_topic_word_rows(lee):
    _, tokenizer = lee
    model = TopicRNN.from_preset("small", tokenizer=tokenizer, hidden_dim=8, embedding_dim=8,
                                 num_topics=3, decoder_init="random")
    rows = model.topic_word_matrix()
    assert (rows < 0).any()                          # unconstrained B
    expected = np.exp(rows) / np.exp(rows).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.topic_word_distribution(), expected, rtol=1e-6)
    top = model.topics(2, weights=True)
    np.testing.assert_allclose([p for _, p in top[1]], np.sort(expected[1])[::-1][:2],
                               rtol=1e-6)


# ---------------------------------------------------------------- rGBN-RNN layers
def _tiny_rgbn():
    keras.utils.set_random_seed(0)
    model = RGBNRNN(20, 10, num_documents=100, num_layers=2, hidden_sizes=(8, 6),
                    topic_sizes=(5, 3), embedding_dim=6, seed=3)
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 20, size=(1, 2, 5)).astype(np.int32)
    model({"tokens": tokens, "targets": tokens, "mask": np.ones((1, 2, 5), np.float32),
           "context_bow": np.ones((1, 2, 10), np.float32)})
    return model


def test_rgbn_layers_are_one_based_and_topic_layer_is_deprecated():
    model = _tiny_rgbn()
    first, second = model.topic_word_matrix(0), model.topic_word_matrix(1)
    np.testing.assert_array_equal(model.topics(4, layer=1), np.argsort(-first, 1, "stable")[:, :4])
    np.testing.assert_array_equal(model.topics(4), model.topics(4, layer=1))
    np.testing.assert_array_equal(model.topics(4, layer=2),
                                  np.argsort(-second, 1, "stable")[:, :4])
    assert len(model.topics(2, layer=2, weights=True)) == 3
    for bad in (0, 3):
        with pytest.raises(ValueError, match=f"layer={bad}: layers are 1-based, 1 .* to 2"):
            model.topics(4, layer=bad)
    new = model.generate(2, max_length=6, topic=1, layer=2, method="greedy")
    with pytest.warns(DeprecationWarning, match=r"use layer= .* here layer=2"):
        old = model.generate(2, max_length=6, topic=1, topic_layer=1, method="greedy")
    np.testing.assert_array_equal(new, old)
    word_level = model.generate(2, max_length=6, topic=1, method="greedy")
    np.testing.assert_array_equal(word_level, model.generate(2, max_length=6, topic=1, layer=1,
                                                             method="greedy"))
    with pytest.raises(ValueError, match="not both"):
        model.generate(topic=1, layer=2, topic_layer=1)
    with pytest.raises(ValueError, match="layer=3: layers are 1-based"):
        model.generate(topic=1, layer=3)


# ------------------------------------------------------------------------- saving
def test_a_saved_model_keeps_its_tokenizer(lee, tmp_path):
    docs, tokenizer = lee
    model = TCNLM.from_preset("small", tokenizer=tokenizer, documents=docs, **TINY_TCNLM)
    model.generate(max_length=3, seed=0)
    model.save(tmp_path / "with.keras")
    loaded = keras.saving.load_model(tmp_path / "with.keras")
    assert loaded.tokenizer.lm_vocab.tokens == tokenizer.lm_vocab.tokens
    assert loaded.tokenizer.topic_vocab.words == tokenizer.topic_vocab.words
    assert loaded.topics(3) == model.topics(3)
    assert loaded.generate(topic=1, max_length=8, seed=0, method="greedy") == \
        model.generate(topic=1, max_length=8, seed=0, method="greedy")
    model.tokenizer = None
    model.save(tmp_path / "without.keras")
    assert keras.saving.load_model(tmp_path / "without.keras").tokenizer is None
