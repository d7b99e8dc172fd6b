"""LM and topic vocabularies: sizes on real corpora, filters, JSON round trips."""

import collections
import json

import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, load_stopwords, read_ptb, read_tdlm
from tfktopic.errors import VocabularyError


def test_ptb_vocabulary_is_exactly_ten_thousand_types(ptb_dir):
    train = read_ptb(ptb_dir / "ptb.train.txt")
    vocab = Vocabulary.build(train, min_count=1)
    # 9,999 word types (with <unk>) + <eos> = the standard 10k PTB vocabulary;
    # <pad> and <bos> are never predicted.
    assert vocab.num_predictable == 10_000
    assert len(vocab) == 10_002
    assert vocab.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert vocab.counts["<eos>"] == 42_068
    valid = read_ptb(ptb_dir / "ptb.valid.txt")
    assert all(t in vocab for s in valid.sentences() for t in s)
    assert vocab.tokens[4] == "the"  # the most frequent word comes first


def test_min_count_max_size_and_stable_order(apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    counts = {}
    for s in corpus.sentences():
        for t in s:
            counts[t] = counts.get(t, 0) + 1
    vocab = Vocabulary.build(corpus, min_count=5)
    assert len(vocab) - 4 == sum(1 for t, c in counts.items() if c >= 5 and t != "<unk>")
    freqs = [counts[t] for t in vocab.tokens[4:]]
    assert freqs == sorted(freqs, reverse=True)
    assert Vocabulary.build(corpus, min_count=5) == vocab
    small = Vocabulary.build(corpus, min_count=1, max_size=50)
    assert len(small) == 50 and small.tokens == Vocabulary.build(corpus, min_count=1).tokens[:50]
    rare = [t for t, c in counts.items() if c < 5][0]
    assert vocab.encode([rare, vocab.tokens[10]]) == [vocab.unk_id, 10]
    assert vocab.decode([1, 10, 2, 11], strip_special=True) == [vocab.tokens[10]]


def test_topic_vocabulary_filters_on_apnews(apnews_path, mallet_stopwords_path):
    corpus = read_tdlm(apnews_path)
    lm = Vocabulary.build(corpus, min_count=10)
    stop = load_stopwords(mallet_stopwords_path)
    assert len(stop) == 523  # 524 lines, "would" twice
    topic = TopicVocabulary.build(corpus, lm, stopwords=mallet_stopwords_path)
    words = set(topic.words)
    assert not words & stop
    assert all(any("a" <= ch.lower() <= "z" for ch in w) and not w.startswith("'") for w in words)
    assert "n't" not in words and "<unk>" not in words
    # The 0.1% most frequent raw types, counted by brute force: those in the LM
    # vocabulary that are not stopwords/specials are dropped as "frequent".
    raw = collections.Counter(t for s in corpus.sentences() for t in s)
    top = sorted(raw, key=lambda t: (-raw[t], t))[:int(len(raw) * 0.001)]
    expected = [t for t in top if t in lm and t.lower() not in stop
                and t not in ("<pad>", "<bos>", "<eos>", "<unk>", "n't")]
    assert expected and not words & set(top)
    assert topic.ignored["frequent"] == len(expected), (topic.ignored, expected)
    assert sum(topic.ignored.values()) + len(topic) == len(lm)
    # topic ids follow LM order, and lm_to_topic inverts them
    lm_ids = [lm.token_to_id(w) for w in topic.words]
    assert lm_ids == sorted(lm_ids)
    assert np.array_equal(topic.lm_to_topic[lm_ids], np.arange(len(topic)))
    strict = TopicVocabulary.build(corpus, lm, stopwords=mallet_stopwords_path, min_doc_freq=100)
    assert strict.ignored["document_frequency"] > 0 and len(strict) < len(topic)
    assert "police" in topic


def test_default_stopwords_are_gensims():
    from gensim.parsing.preprocessing import STOPWORDS

    assert load_stopwords() == frozenset(STOPWORDS)
    assert load_stopwords("none") == frozenset()
    corpus = load_corpus("lee")
    lm = Vocabulary.build(corpus, min_count=3)
    topic = TopicVocabulary.build(corpus, lm)
    assert "the" not in topic and "firefighters" in topic
    assert "fire" not in topic  # gensim's list (after Glasgow's) does hold "fire"


def test_json_round_trip(tmp_path, apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    lm = Vocabulary.build(corpus, min_count=2)
    topic = TopicVocabulary.build(corpus, lm, stopwords=["the", "of"])
    lm.save(tmp_path / "lm.json")
    topic.save(tmp_path / "topic.json")
    lm2 = Vocabulary.load(tmp_path / "lm.json")
    assert lm2 == lm and lm2.counts == lm.counts
    topic2 = TopicVocabulary.load(tmp_path / "topic.json", lm2)
    assert topic2.words == topic.words and topic2.ignored == topic.ignored
    assert np.array_equal(topic2.lm_to_topic, topic.lm_to_topic)


def test_vocabulary_json_of_the_wrong_version(tmp_path):
    lm = Vocabulary.build([[["a", "b"]]], min_count=1)
    path = tmp_path / "vocab.json"
    lm.save(path)
    payload = json.loads(path.read_text())
    payload["format_version"] = 99
    path.write_text(json.dumps(payload))
    with pytest.raises(VocabularyError, match=r"vocab\.json: vocabulary format version 99 is not supported"):
        Vocabulary.load(path)


def test_bad_vocabulary_files(tmp_path):
    with pytest.raises(VocabularyError, match=r"missing\.json: no such vocabulary file"):
        Vocabulary.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(VocabularyError, match=r"bad\.json: not a JSON vocabulary file"):
        Vocabulary.load(bad)
    lm = Vocabulary.build([[["cat", "dog"]]], min_count=1)
    topic = TopicVocabulary.build([[["cat", "dog"]]], lm, stopwords="none", max_freq_fraction=0.0)
    topic.save(tmp_path / "topic.json")
    with pytest.raises(VocabularyError, match="expected a tfktopic lm_vocabulary file, found 'topic_vocabulary'"):
        Vocabulary.load(tmp_path / "topic.json")
    other = Vocabulary.build([[["cat", "emu"]]], min_count=1)
    with pytest.raises(VocabularyError, match=r"topic\.json: does not match the LM vocabulary.*dog"):
        TopicVocabulary.load(tmp_path / "topic.json", other)
    with pytest.raises(VocabularyError, match="no tokens"):
        Vocabulary.build([])
