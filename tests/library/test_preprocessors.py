"""The model decides its data: registry data kinds -> `tfktopic.data.preprocessors`."""

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
from tfktopic.data import preprocessors
from tfktopic.models import registry

pytestmark = pytest.mark.backends

#: The protocol labels recorded in run.json / results.json before the preprocessors
#: (runs/data.py's switch): a run's recorded protocol must not change with the refactor.
RECORDED_LABELS = {
    "lstm": "sentence-level, no topic context",
    "doc_lstm": "document-level, streamed: state carried through each document, truncated "
                "BPTT of 30 targets",
    "doc_lstm_chunked": "document-level, chunked: trained on 8-sentence chunks from a zero "
                        "state, scored with the state carried across each whole document",
    "lda_lstm": "preceding", "topicrnn": "preceding", "tcnlm": "preceding",
    "doc_topicrnn": "document-level, streamed: state carried through each document, "
                    "truncated BPTT of 30 targets; topic context preceding",
    "rgbn_rnn": "preceding", "gbn_rnn": "preceding",
}

DATA = {"max_len": 12, "context_len": 50, "sentences_per_chunk": 3, "bptt": 10,
        "train_context": "all_other"}


@pytest.fixture(scope="module")
def corpus():
    docs = load_corpus("lee").subset(range(12))
    lm = Vocabulary.build(docs, min_count=2)
    topic = TopicVocabulary.build(docs, lm, max_freq_fraction=0.05, min_doc_freq=1)
    return docs, lm, topic


def test_every_model_states_a_data_kind_agreeing_with_its_class():
    kinds = {name: registry.get(name).data_kind for name in registry.names()}
    assert kinds == {"lstm": "windows", "doc_lstm": "streams", "doc_lstm_chunked": "chunks",
                     "lda_lstm": "windows", "topicrnn": "windows", "doc_topicrnn": "streams",
                     "tcnlm": "windows", "rgbn_rnn": "chunks", "gbn_rnn": "chunks"}
    for name in registry.names():
        entry = registry.get(name)
        pre = entry.preprocessor()
        assert pre.kind == entry.data_kind and pre.topical == entry.has_topics, name
        # The class's own streamed flag agrees (chunked is per instance for the LSTM).
        assert bool(entry.model_class.streamed) == (entry.data_kind == "streams"), name


@pytest.mark.parametrize("name", registry.names())
def test_protocol_labels_are_the_ones_runs_recorded(name):
    label = registry.get(name).preprocessor().protocol_label("preceding", {"bptt": 30})
    assert label == RECORDED_LABELS[name]


def test_an_unknown_data_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown data kind 'pages'"):
        preprocessors.for_kind("pages")
    with pytest.raises(ValueError, match="unknown data kind 'pages'"):
        registry.ModelEntry("x", object, None, data_kind="pages")


def test_train_contexts_follow_the_kind():
    data = {**DATA, "train_context": "whole_document"}
    assert registry.get("doc_topicrnn").preprocessor().train_protocol(data) == "whole_document"
    assert registry.get("lstm").preprocessor().train_protocol(data) == "all_other"
    with pytest.raises(ValueError, match="train_context: tcnlm trains with one of"):
        registry.get("tcnlm").preprocessor().train_protocol(data)
    with pytest.raises(ValueError, match="train_context: rgbn_rnn trains with one of"):
        registry.get("rgbn_rnn").preprocessor().train_protocol(data)


def test_each_kind_builds_its_examples_and_batches(corpus):
    docs, lm, topic = corpus
    windows = registry.get("topicrnn").preprocessor()
    ex = windows.examples(docs, lm, topic, DATA)
    batch = next(iter(windows.dataset(ex, 4)))
    assert np.asarray(batch["tokens"]).shape == (4, 12)
    assert "doc_targets" in batch                          # TopicRNN's document targets
    assert "doc_targets" not in next(iter(registry.get("tcnlm").preprocessor().dataset(ex, 4)))
    chunks = registry.get("rgbn_rnn").preprocessor()
    cx = chunks.examples(docs, lm, topic, DATA)
    assert np.asarray(next(iter(chunks.dataset(cx, 2)))["tokens"]).shape == (2, 3, 12)
    assert chunks.steps(cx, 2) == -(-len(cx) // 2)
    streams = registry.get("doc_lstm").preprocessor()
    sx = streams.examples(docs, lm, topic, DATA)
    assert len(sx) == len(docs) and sx.context is None and sx.bptt == 10
    assert np.asarray(next(iter(streams.dataset(sx, 3)))["tokens"]).shape == (3, 10)


def test_the_chunked_document_lstm_counts_its_batch_in_windows_and_scores_whole_documents(
        corpus):
    docs, lm, topic = corpus
    pre = registry.get("doc_lstm_chunked").preprocessor()
    cx = pre.examples(docs, lm, topic, DATA)
    # 12 windows a batch = 4 chunks of J = 3 windows.
    assert pre.steps(cx, 12) == -(-len(cx) // 4)
    assert np.asarray(next(iter(pre.dataset(cx, 12)))["tokens"]).shape[:2] == (4, 3)
    whole = pre._scoring_examples(docs, lm, topic, DATA, "preceding", None)
    assert len(whole) == len(docs)       # one chunk per document
    rgbn = registry.get("rgbn_rnn").preprocessor()
    assert len(rgbn._scoring_examples(docs, lm, topic, DATA, "preceding", None)) == len(cx)


def test_models_of_one_kind_share_examples_streams_never():
    get = lambda name: registry.get(name).preprocessor()  # noqa: E731
    assert get("lstm").shares_examples(get("tcnlm"))
    assert get("rgbn_rnn").shares_examples(get("doc_lstm_chunked"))
    assert not get("lstm").shares_examples(get("rgbn_rnn"))
    assert not get("doc_lstm").shares_examples(get("doc_lstm"))


# ---------------------------------------------------------------------- generation's text
#: One sentence of the Lee subset's words, written as `generate_postprocess` writes text.
READABLE = "the police said it's over, the government said (the fire) people."


@pytest.fixture(scope="module")
def tokenizer(corpus):
    from tfktopic.tokenizer import Tokenizer

    _, lm, topic = corpus
    return Tokenizer(lm, topic)


@pytest.mark.parametrize("kind", sorted(preprocessors.KINDS))
def test_generate_preprocess_and_postprocess_round_trip_text(kind, tokenizer):
    pre = preprocessors.for_kind(kind, topical=True, tokenizer=tokenizer)
    inputs = pre.generate_preprocess(READABLE, context_bow="The fire, the police.")
    prompt = inputs["prompt"]
    assert prompt.ndim == 1 and np.issubdtype(prompt.dtype, np.integer)
    assert tokenizer.lm_vocab.unk_id not in prompt               # every word is known
    assert prompt[-1] != tokenizer.lm_vocab.eos_id               # the sentence goes on
    np.testing.assert_array_equal(prompt, tokenizer.encode(READABLE)[:-1])
    np.testing.assert_array_equal(inputs["context_bow"], tokenizer.bow("the fire, the police"))
    assert inputs["context_bow"].sum() > 0
    # generated rows end at <eos>, then <pad>: decoded there and made readable again.
    row = np.concatenate([prompt, [tokenizer.lm_vocab.eos_id, 0, 0]])
    assert pre.generate_postprocess(np.stack([row, row])) == [READABLE, READABLE]
    assert pre.generate_postprocess(row) == [READABLE]


def test_generate_preprocess_passes_ids_and_bags_of_words_through(tokenizer):
    pre = preprocessors.for_kind("windows", tokenizer=tokenizer)
    ids, bow = np.array([[5, 6], [7, 8]]), np.ones(tokenizer.topic_vocab_size, np.float32)
    inputs = pre.generate_preprocess(ids, bow)
    assert inputs["prompt"] is ids and inputs["context_bow"] is bow
    assert preprocessors.for_kind("chunks").generate_preprocess() == {"prompt": None,
                                                                      "context_bow": None}


def test_text_without_a_tokenizer_is_a_one_line_error_naming_the_argument():
    from tfktopic.models import LSTMLanguageModel

    pre = preprocessors.for_kind("streams")
    for call, argument in ((lambda: pre.generate_preprocess("the storm"), "prompt"),
                           (lambda: pre.generate_preprocess(None, "the storm"), "context_bow"),
                           (lambda: pre.generate_postprocess([[5, 2]]), "generate_postprocess"),
                           (lambda: LSTMLanguageModel(10).generate(context_bow="storm"),
                            "context_bow")):
        with pytest.raises(ValueError, match=f"^{argument}") as error:
            call()
        assert "\n" not in str(error.value)


def test_a_model_reaches_its_kind_preprocessor_holding_the_attached_tokenizer(tokenizer):
    from tfktopic.models import LSTMLanguageModel
    from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel

    models = {"lstm": LSTMLanguageModel(tokenizer.vocab_size),
              "doc_lstm_chunked": LSTMLanguageModel(tokenizer.vocab_size, document_level=True),
              "doc_lstm": DocumentLSTMLanguageModel(tokenizer.vocab_size)}
    for name, model in models.items():
        assert model.data_kind == registry.get(name).data_kind, name
        pre = model.preprocessor
        assert pre.kind == model.data_kind and pre.topical == model.has_topics
        assert pre.tokenizer is None
        model.tokenizer = tokenizer
        assert model.preprocessor.tokenizer is tokenizer         # the one attached now


def test_generate_gives_the_text_of_its_preprocessor(tokenizer):
    import keras

    from tfktopic.models import LSTMLanguageModel

    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(tokenizer.vocab_size, embedding_dim=8, hidden_dim=8)
    model.tokenizer = tokenizer
    texts = model.generate("The police said", max_length=9, num_sentences=3, seed=5,
                           sampler="random")
    pre = model.preprocessor
    prompt = pre.generate_preprocess("The police said")["prompt"]
    ids = model.generate(prompt, max_length=9, num_sentences=3, seed=5, sampler="random",
                         tokenizer=False)
    np.testing.assert_array_equal(ids[:, :3], np.broadcast_to(prompt, (3, 3)))
    assert texts == pre.generate_postprocess(ids)
    assert all(text.startswith("the police said") for text in texts)
    model.tokenizer = None
    assert model.generate("The police said", max_length=9, num_sentences=3, seed=5,
                          sampler="random", tokenizer=tokenizer) == texts
