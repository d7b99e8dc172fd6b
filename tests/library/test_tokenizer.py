"""Tokenizer: text <-> ids with a run's vocabularies, topic bag of words, save/load."""

import types

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, read_text, topic_words
from tfktopic.errors import TfktopicError, VocabularyError
from tfktopic.runs.reports import document_bow
from tfktopic.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    train, _, _ = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    return Tokenizer(lm, TopicVocabulary.build(train, lm))


def test_text_round_trips_through_ids(tokenizer):
    text = "The fire spread to the city. Police said"
    ids = tokenizer.encode(text)
    lm = tokenizer.lm_vocab
    assert ids == lm.encode(["the", "fire", "spread", "to", "the", "city", "."]) + [2] + \
        lm.encode(["police", "said"]) + [2]
    assert tokenizer.sentences(text) == [ids[:8], ids[8:]]
    # decode stops at the first <eos> and drops <pad> / <bos>.
    assert tokenizer.decode([1] + ids) == "the fire spread to the city ."
    assert tokenizer.decode_batch(np.array([[1, ids[0], 2, 0], [ids[1], 0, 0, 0]])) == [
        "the", "fire"]
    assert "<unk>" in tokenizer.decode(tokenizer.encode("qwertyzzz words"))


def test_bow_counts_the_topic_words_of_the_text(tokenizer):
    topic = tokenizer.topic_vocab
    words = [w for w in ("fire", "police", "city") if w in topic]
    assert len(words) >= 2
    bow = tokenizer.bow(" ".join(words + words[:1]) + " the the of")
    assert bow.shape == (len(topic),) and bow.dtype == np.float32
    assert bow.sum() == len(words) + 1                    # stop words are not topic words
    assert bow[topic.word_to_id(words[0])] == 2


def test_bow_keeps_the_first_max_words_topic_words(tokenizer):
    topic = tokenizer.topic_vocab
    text = "Police said the fire spread to the city. Fire crews and police"
    ids = topic.topic_ids(tokenizer.encode(text))
    assert len(ids) >= 5
    for n in (1, 3, len(ids), 100):
        expected = np.bincount(ids[:n], minlength=len(topic))
        np.testing.assert_array_equal(tokenizer.bow(text, max_words=n), expected)


def test_document_bow_counts_the_file_as_read_text_reads_it(tokenizer, tmp_path):
    # The run's --document bag of words: the first context_len topic words of the
    # file read as one document, the same as counting read_text's sentences by hand.
    path = tmp_path / "doc.txt"
    path.write_text("Fires burned near Sydney.\nPolice said the fire\n\nspread to the "
                    "city! Fire crews and police worked.\n", encoding="utf-8")
    sentences = read_text(path, documents="file").sentences()
    ids = [i for sentence in sentences for i in tokenizer.lm_vocab.encode(sentence)]
    for context_len in (2, 300):
        run = types.SimpleNamespace(tokenizer=tokenizer,
                                    config={"data": {"context_len": context_len}})
        expected = np.bincount(tokenizer.topic_vocab.topic_ids(ids)[:context_len],
                               minlength=len(tokenizer.topic_vocab))
        np.testing.assert_array_equal(document_bow(run, path), expected)
    (tmp_path / "stop.txt").write_text("the of and\n", encoding="utf-8")
    with pytest.raises(TfktopicError, match="stop.txt: none of its words"):
        document_bow(run, tmp_path / "stop.txt")


def test_vocabulary_level_lookups(tokenizer):
    lm, topic = tokenizer.lm_vocab, tokenizer.topic_vocab
    assert lm.map_unknown(["the", "qwertyzzz", "fire"]) == ["the", "<unk>", "fire"]
    words = topic.words
    ids = np.array([[2, 0], [1, 1]])
    assert topic.decode(ids) == [[words[2], words[0]], [words[1], words[1]]]
    assert topic.decode([3]) == [words[3]] and topic.decode([]) == []
    assert topic_words(words, ids) == topic.decode(ids)        # a plain word list works too
    assert all(type(w) is str for w in topic.decode(ids[0]))


def test_save_and_load_use_the_run_vocabulary_files(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"lm_vocab.json", "topic_vocab.json"}
    loaded = Tokenizer.load(tmp_path)
    text = "Police said the fire spread."
    assert loaded.encode(text) == tokenizer.encode(text)
    np.testing.assert_array_equal(loaded.bow(text), tokenizer.bow(text))
    (tmp_path / "topic_vocab.json").unlink()
    lm_only = Tokenizer.load(tmp_path)
    assert lm_only.topic_vocab_size == 0
    with pytest.raises(VocabularyError, match="no topic vocabulary"):
        lm_only.bow(text)
    with pytest.raises(VocabularyError, match="lm_vocab.json"):
        Tokenizer.load(tmp_path / "missing")
    with pytest.raises(VocabularyError, match="must be a Vocabulary"):
        Tokenizer(["a"])
