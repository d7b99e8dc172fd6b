"""NPMI coherence must equal a literal window-by-window count (topic_interpretability semantics)."""

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest

from tfktopic.evaluation import coherence as coherence_lib

TOL = 1e-12


# --------------------------------------------------------------------------- brute force


def brute_force_counts(documents, topics, window_size):
    """Enumerate every window exactly as ComputeWordCount.py does.

    For a document of L tokens, windows t = 1 .. L + ws - 1 are tokens[max(0, t - ws):t].
    Returns (word_counts, pair_counts, num_windows); pair keys are sorted tuples.
    """
    words = {w for topic in topics for w in topic}
    wanted_pairs = {
        tuple(sorted(pair)) for topic in topics for pair in itertools.combinations(topic, 2)
    }
    word_counts, pair_counts, num_windows = Counter(), Counter(), 0
    for doc in documents:
        for tail in range(1, len(doc) + window_size):
            window = doc[max(0, tail - window_size) : tail]
            num_windows += 1
            present = sorted(set(window) & words)
            word_counts.update(present)
            for pair in itertools.combinations(present, 2):
                if pair in wanted_pairs:
                    pair_counts[pair] += 1
    return word_counts, pair_counts, num_windows


def brute_force_coherence(documents, topics, window_size, cardinalities):
    """Per topic: the mean over cardinalities of the mean NPMI over pairs i < j."""
    word_counts, pair_counts, n = brute_force_counts(documents, topics, window_size)

    def npmi(a, b):
        ca, cb, cab = word_counts[a], word_counts[b], pair_counts[tuple(sorted((a, b)))]
        if ca == 0 or cb == 0 or cab == 0:
            return 0.0
        return math.log(cab * n / (ca * cb)) / -math.log(cab / n)

    table = []
    for topic in topics:
        row = []
        for card in cardinalities:
            values = [npmi(a, b) for a, b in itertools.combinations(topic[:card], 2)]
            row.append(sum(values) / len(values))
        table.append(row)
    return np.array(table), word_counts, pair_counts, n


def assert_matches_brute_force(documents, topics, window_size, cardinalities):
    expected, word_counts, pair_counts, n = brute_force_coherence(
        documents, topics, window_size, cardinalities
    )
    words = sorted({w for t in topics for w in t})
    counts = coherence_lib.ReferenceCounts(documents, words, window_size=window_size)
    assert counts.num_windows == n
    for w in words:
        assert counts.count(w) == word_counts[w], w
    for topic in topics:
        for a, b in itertools.combinations(topic, 2):
            assert counts.pair_count(a, b) == pair_counts[tuple(sorted((a, b)))], (a, b)
            assert counts.pair_count(b, a) == counts.pair_count(a, b)

    result = coherence_lib.npmi_coherence(
        topics, documents, window_size=window_size, cardinalities=cardinalities
    )
    assert result.num_windows == n
    assert result.window_size == window_size
    assert result.cardinalities == tuple(cardinalities)
    np.testing.assert_allclose(result.per_topic_per_cardinality, expected, rtol=0, atol=TOL)
    per_topic = expected.mean(axis=1)
    np.testing.assert_allclose(result.per_topic, per_topic, rtol=0, atol=TOL)
    assert result.mean == pytest.approx(per_topic.mean(), abs=TOL)
    assert result.median == pytest.approx(float(np.median(per_topic)), abs=TOL)
    for col, card in enumerate(cardinalities):
        assert result.per_cardinality[card] == pytest.approx(expected[:, col].mean(), abs=TOL)
    # the shared counts give the same result
    again = coherence_lib.npmi_coherence(topics, counts=counts, cardinalities=cardinalities)
    np.testing.assert_array_equal(again.per_topic_per_cardinality, result.per_topic_per_cardinality)
    return result, word_counts, pair_counts, n


# --------------------------------------------------------------------------- small cases


def test_repeated_word_inside_a_window_is_counted_once_per_window():
    # "a b a c d", ws = 3: windows [a] [a b] [a b a] [b a c] [a c d] [c d] [d]
    docs = [["a", "b", "a", "c", "d"]]
    counts = coherence_lib.ReferenceCounts(docs, ["a", "c", "d"], window_size=3)
    assert counts.num_windows == 7
    assert counts.count("a") == 5
    assert counts.count("c") == 3
    assert counts.pair_count("a", "c") == 2
    assert counts.pair_count("c", "d") == 2
    assert counts.pair_count("a", "d") == 1
    # (gensim 4.4 counts `a` in 1 of its 3 full windows and (a, c) in 0; the true full-window
    # counts are 3 and 2; with the toolkit's partial edge windows they are 5 and 2.)
    _, word_counts, pair_counts, n = assert_matches_brute_force(
        docs, [["a", "c", "d"]], 3, (2, 3)
    )
    assert (word_counts["a"], pair_counts[("a", "c")], n) == (5, 2, 7)


@pytest.mark.parametrize("window_size", [1, 2, 3, 4, 10])
def test_hand_made_documents_match_brute_force(window_size):
    docs = [
        "a b a c d".split(),
        "c c c a".split(),
        [],  # an empty document still has ws - 1 (empty) windows
        ["b"],
        "x y z a x y z b a a d".split(),  # no topic word in some windows
        "d d d d d d d d c".split(),
    ]
    topics = [["a", "b", "c", "d"], ["d", "a", "x", "c"], ["b", "q", "a"]]  # q is absent
    result, *_ = assert_matches_brute_force(docs, topics, window_size, (2, 3))
    assert result.missing_words == ["q"]


def test_hand_computed_npmi():
    # ws = 2: "a b" -> [a] [a b] [b]; "c" -> [c] [c]; N = 5, c(a) = c(b) = 2, c(a, b) = 1,
    # and c never co-occurs with a or b.
    docs = ["a b", "c"]
    result = coherence_lib.npmi_coherence(
        [["a", "b", "c"]], docs, window_size=2, cardinalities=(2, 3)
    )
    npmi_ab = math.log(1 * 5 / (2 * 2)) / -math.log(1 / 5)  # = log(1.25) / log(5)
    assert npmi_ab == pytest.approx(0.13864688385321391, abs=1e-15)
    assert result.num_windows == 5
    assert result.per_cardinality[2] == pytest.approx(npmi_ab, abs=TOL)
    assert result.per_cardinality[3] == pytest.approx(npmi_ab / 3, abs=TOL)
    assert result.mean == pytest.approx((npmi_ab + npmi_ab / 3) / 2, abs=TOL)
    assert result.missing_words == []
    assert coherence_lib.npmi_from_counts(2, 2, 1, 5) == pytest.approx(npmi_ab, abs=TOL)
    assert coherence_lib.npmi_from_counts(2, 2, 0, 5) == 0.0
    assert coherence_lib.npmi_from_counts(0, 2, 0, 5) == 0.0
    # perfect association: both words in exactly the same windows -> 1
    assert coherence_lib.npmi_from_counts(3, 3, 3, 10) == pytest.approx(1.0, abs=TOL)
    # less than independent -> negative
    assert coherence_lib.npmi_from_counts(6, 6, 1, 10) < 0
    # words seen in one window only are ordinary counts, not "missing" (exactly 1 here)
    assert coherence_lib.npmi_from_counts(1, 1, 1, 5) == pytest.approx(1.0, abs=TOL)
    assert coherence_lib.npmi_from_counts(1, 2, 1, 8) == pytest.approx(
        math.log(4) / math.log(8), abs=TOL)
    # both words in every window: the 0/0 limit, exactly 1
    assert coherence_lib.npmi_from_counts(4, 4, 4, 4) == 1.0


# --------------------------------------------------------------------------- real text


@pytest.fixture(scope="module")
def apnews_documents(apnews_path):
    documents = []
    with open(apnews_path, encoding="utf-8") as handle:
        for line in handle:
            documents.append(line.split())  # tabs separate sentences; windows cross them
            if len(documents) == 100:
                break
    return documents


def test_real_text_matches_brute_force(apnews_documents):
    stop = {"that", "with", "said", "from", "have", "were", "they", "their", "this", "been",
            "will", "would", "about", "which", "there", "when", "also", "more", "than"}
    freq = Counter(
        t for doc in apnews_documents for t in doc if t.isalpha() and len(t) > 3 and t not in stop
    )
    ranked = [w for w, _ in freq.most_common()]
    assert len(ranked) > 300
    topics = [
        ranked[0:20],
        ranked[20:40],
        ranked[0:60:3],
        # rarer words (many pairs never co-occur) and a word absent from the corpus
        ranked[200:202] + ["zzzqxabsentword"] + ranked[202:219],
    ]
    result, word_counts, pair_counts, _ = assert_matches_brute_force(
        apnews_documents, topics, 20, (5, 10, 15, 20)
    )
    assert result.missing_words == ["zzzqxabsentword"]
    # the data really exercises the interesting cases: topic words repeating inside a
    # window, pairs that never co-occur (NPMI 0), and negative as well as positive NPMI
    assert any(
        0 < j - i < 20
        for doc in apnews_documents
        for i, j in itertools.pairwise([k for k, t in enumerate(doc) if t == ranked[0]])
    )
    rare_pairs = [tuple(sorted(p)) for p in itertools.combinations(ranked[200:219], 2)]
    assert any(pair_counts[p] == 0 for p in rare_pairs)
    assert all(word_counts[w] > 0 for w in ranked[200:219])
    counts = coherence_lib.ReferenceCounts(apnews_documents, ranked[:60], window_size=20)
    values = [counts.npmi(a, b) for a, b in itertools.combinations(ranked[:20], 2)]
    assert min(values) < 0 < max(values)
    assert -1.0 < result.mean < 1.0


def test_whitespace_strings_equal_token_lists(apnews_documents):
    docs = apnews_documents[:20]
    topic = [w for w, _ in Counter(t for d in docs for t in d if t.isalpha()).most_common(12)]
    from_lists = coherence_lib.npmi_coherence([topic], docs, cardinalities=(5, 10))
    from_strings = coherence_lib.npmi_coherence(
        [" ".join(topic)], ["\t".join([" ".join(d[:7]), " ".join(d[7:])]) for d in docs],
        cardinalities=(5, 10),
    )
    assert from_lists.mean == from_strings.mean


# --------------------------------------------------------------------------- gensim


def test_agrees_with_padded_gensim_c_npmi_without_repeats_or_zero_pairs():
    """gensim c_npmi == the toolkit when every document is padded with ws - 1 dummies on both
    sides (gensim then sees the toolkit's partial windows), no topic word repeats within a
    window (gensim 4.4 undercounts those) and every topic pair co-occurs (gensim's epsilon
    instead of the zero rule). What is left is gensim's epsilon (1e-12) inside the logs."""
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    ws = 20
    topic_words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
    fillers = [f"f{i}" for i in range(40)]
    rng = random.Random(0)
    docs = [list(topic_words)]  # every pair co-occurs here
    for _ in range(80):
        words = rng.sample(topic_words, rng.randint(0, 4))  # each at most once per document
        words += [rng.choice(fillers) for _ in range(rng.randint(3, 45))]
        rng.shuffle(words)
        docs.append(words)
    topics = [
        ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"],
        ["eta", "gamma", "zeta", "alpha", "beta", "delta"],
    ]
    cardinalities = (3, 6)
    ours = coherence_lib.npmi_coherence(topics, docs, window_size=ws, cardinalities=cardinalities)
    assert all(
        coherence_lib.ReferenceCounts(docs, topic_words, ws).pair_count(a, b) > 0
        for t in topics
        for a, b in itertools.combinations(t, 2)
    )

    dictionary = Dictionary(docs)
    pad = ["<gensim-pad>"] * (ws - 1)
    padded = [pad + doc + pad for doc in docs]
    def gensim_npmi(texts, topn):
        return CoherenceModel(topics=topics, texts=texts, dictionary=dictionary,
                              coherence="c_npmi", window_size=ws, topn=topn,
                              processes=1).get_coherence_per_topic()

    for col, topn in enumerate(cardinalities):
        gensim_per_topic = gensim_npmi(padded, topn)
        np.testing.assert_allclose(
            ours.per_topic_per_cardinality[:, col], gensim_per_topic, rtol=0, atol=1e-6
        )
        # but not bit-identical: gensim's epsilon is still there
        assert not np.array_equal(ours.per_topic_per_cardinality[:, col], gensim_per_topic)
        # without the padding gensim sees only full windows and disagrees clearly
        unpadded = gensim_npmi(docs, topn)
        assert np.abs(ours.per_topic_per_cardinality[:, col] - unpadded).max() > 1e-2


# --------------------------------------------------------------------------- bad input


def test_bad_input_raises_clear_errors():
    docs = ["a b c d", "b c d e"]
    with pytest.raises(ValueError, match="at least one topic"):
        coherence_lib.npmi_coherence([], docs)
    with pytest.raises(ValueError, match="at least 2 words"):
        coherence_lib.npmi_coherence([["a", "b"], ["c"]], docs, cardinalities=(2,))
    with pytest.raises(ValueError, match="window_size"):
        coherence_lib.npmi_coherence([["a", "b"]], docs, window_size=0, cardinalities=(2,))
    with pytest.raises(ValueError, match="window_size"):
        coherence_lib.ReferenceCounts(docs, ["a"], window_size=0)
    with pytest.raises(ValueError, match="smallest cardinality"):
        coherence_lib.npmi_coherence([["a", "b", "c"]], docs)  # default (5, 10, 15, 20)
    with pytest.raises(ValueError, match="cardinality must be an integer >= 2"):
        coherence_lib.npmi_coherence([["a", "b", "c"]], docs, cardinalities=(1,))
    with pytest.raises(ValueError, match="repeats"):
        coherence_lib.npmi_coherence([["a", "b", "a"]], docs, cardinalities=(3,))
    # The message names the word that repeats (a word twice is a repeat).
    with pytest.raises(ValueError, match=r"topic 1 repeats word\(s\) \['b'\] within its top 3"):
        coherence_lib.npmi_coherence([["a", "b", "c"], ["b", "c", "b"]], docs,
                                     cardinalities=(3,))
    with pytest.raises(ValueError, match="exactly one"):
        coherence_lib.npmi_coherence([["a", "b"]], cardinalities=(2,))
    counts = coherence_lib.ReferenceCounts(docs, ["a", "b"], window_size=5)
    with pytest.raises(ValueError, match="exactly one"):
        coherence_lib.npmi_coherence([["a", "b"]], docs, counts=counts, cardinalities=(2,))
    with pytest.raises(ValueError, match="did not count"):
        coherence_lib.npmi_coherence([["a", "c"]], counts=counts, cardinalities=(2,))
    with pytest.raises(ValueError, match="disagrees"):
        coherence_lib.npmi_coherence(
            [["a", "b"]], counts=counts, window_size=20, cardinalities=(2,)
        )
    with pytest.raises(KeyError, match="not counted"):
        counts.count("c")
    with pytest.raises(ValueError, match="reference corpus is empty"):
        coherence_lib.ReferenceCounts([], ["a"])


def test_cardinalities_longer_than_the_topics_are_skipped():
    docs = ["a b c d e f g", "b c a e"]
    topics = [list("abcdefg"), list("gfedcba")]
    result = coherence_lib.npmi_coherence(topics, docs, window_size=3, cardinalities=(5, 10, 15))
    assert result.cardinalities == (5,)
    only_five = coherence_lib.npmi_coherence(topics, docs, window_size=3, cardinalities=(5,))
    assert result.mean == only_five.mean
    assert set(result.to_dict()) >= {"mean", "median", "per_topic", "per_cardinality"}


def test_topic_diversity_counts_unique_top_words_by_brute_force():
    from tfktopic.evaluation import topic_diversity

    rng = np.random.default_rng(0)
    topics = [list(rng.choice(60, size=30, replace=False)) for _ in range(7)]
    expected = len(set().union(*[set(t[:25]) for t in topics])) / (25 * 7)
    assert topic_diversity(topics) == pytest.approx(expected)
    # Only the top n count: words ranked below n do not add diversity.
    assert topic_diversity([["a", "b", "x"], ["a", "b", "y"]], top_n=2) == 0.5
    assert topic_diversity([["a", "b"]] * 4, top_n=2) == pytest.approx(1 / 4)
    with pytest.raises(ValueError, match="topic 1 has 1 words"):
        topic_diversity([["a", "b"], ["c"]], top_n=2)
    # top_n = 1 is the smallest allowed: the first words only.
    assert topic_diversity([["a", "b"], ["a", "c"]], top_n=1) == 0.5
    with pytest.raises(ValueError, match="top_n must be >= 1, got 0"):
        topic_diversity([["a", "b"]], top_n=0)


def test_reference_counts_report_the_corpus_size():
    """Documents, tokens and sliding windows (each document contributes its length plus
    window_size - 1 partial windows) of the reference corpus."""
    counts = coherence_lib.ReferenceCounts([["a", "b", "c"], ["d"], ["e", "f"]], ["a", "e"],
                                           window_size=3)
    assert counts.num_documents == 3
    assert counts.num_tokens == 6
    assert counts.num_windows == (3 + 2) + (1 + 2) + (2 + 2)
