"""Tokenizer: text <-> ids with a run's vocabularies, topic bag of words, save/load."""

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
from tfktopic.errors import VocabularyError
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
