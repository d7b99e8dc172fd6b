"""NPMI topic coherence with the semantics of Lau et al.'s `topic_interpretability` toolkit.

Topic coherence as reported by TDLM (Lau et al., 2017) and TCNLM (Wang et al., 2018) is the
NPMI measure of Lau, Newman & Baldwin (2014), *Machine Reading Tea Leaves: Automatically
Evaluating Topic Coherence and Topic Model Quality* (EACL), averaged over the top-5/10/15/20
words as in Lau & Baldwin (2016), *The Sensitivity of Topic Coherence Evaluation to Topic
Cardinality* (NAACL). The reference implementation is `jhlau/topic_interpretability`
(ComputeWordCount.py, ComputeObservedCoherence.py), whose semantics are reproduced exactly:

* **Windows.** A document of L tokens has L + ws - 1 sliding windows (ws = 20): for
  t = 1 .. L + ws - 1 the window is `tokens[max(0, t - ws):t]`, so partial windows slide in at
  the start and out at the end. N is the total over *all* documents, including documents that
  contain no topic word (an empty document still has ws - 1 empty windows, as in the toolkit).
* **Counts.** c(w) is the number of windows that contain w (once per window, however often w
  occurs in it); c(wi, wj) the number of windows that contain both.
* **NPMI.** NPMI(wi, wj) = log(c_ij N / (c_i c_j)) / (-log(c_ij / N)), and 0 when c_i, c_j or
  c_ij is 0 (a pair that never co-occurs, or a word absent from the reference corpus).
* **Coherence.** For cardinality n, the mean NPMI over the unordered pairs i < j of the topic's
  top-n words; a topic's score is the mean over the cardinalities (5, 10, 15, 20); the model's
  score is the mean over topics (the median is reported too).

gensim's `CoherenceModel(coherence="c_npmi")` differs (full windows only, an epsilon instead of
the zero rule, an undercount when a word repeats inside a window, silently dropped unknown
words); see `tests/library/test_coherence.py` for the exact relation.

Counting is exact and linear in the number of topic-word occurrences: only the positions of the
counted words are stored. Occurrence p (0-based) lies in exactly the windows t = p+1 .. p+ws, so
c(w) is the size of the union of the intervals [p+1, p+ws] over w's occurrences, which for sorted
positions is ws + sum(min(gap, ws)). Documents are laid end to end with a stride of L + ws - 1,
so intervals of different documents never touch and the whole corpus is one position array per
word. A pair count is |A ∩ B| = |A| + |B| - |A ∪ B|, and A ∪ B is the union for the merged
position arrays of the two words.
"""

import dataclasses
import math

import numpy as np

__all__ = [
    "CoherenceResult",
    "ReferenceCounts",
    "npmi_coherence",
    "npmi_from_counts",
    "topic_diversity",
]

#: Window size of `topic_interpretability` (hard-coded there), used by TDLM and TCNLM.
DEFAULT_WINDOW_SIZE = 20
#: Cardinalities averaged by Lau & Baldwin (2016), TDLM and TCNLM.
DEFAULT_CARDINALITIES = (5, 10, 15, 20)


def _check_window_size(window_size):
    if isinstance(window_size, bool) or not isinstance(window_size, (int, np.integer)):
        raise ValueError(f"window_size must be an integer >= 1, got {window_size!r}")
    if window_size < 1:
        raise ValueError(f"window_size must be an integer >= 1, got {window_size}")
    return int(window_size)


def _as_tokens(item, what):
    """A token list, or a string split on whitespace (the toolkit's line format)."""
    if isinstance(item, str):
        return item.split()
    try:
        return list(item)
    except TypeError:
        raise TypeError(
            f"{what} must be a list of tokens or a whitespace-tokenised string, "
            f"got {type(item).__name__}"
        ) from None


def npmi_from_counts(count_i, count_j, count_ij, num_windows):
    """Normalised PMI of a word pair from window counts (Lau et al., 2014; Bouma, 2009).

    Args:
        count_i: number of windows containing word i.
        count_j: number of windows containing word j.
        count_ij: number of windows containing both.
        num_windows: total number of windows N.

    Returns:
        log(c_ij N / (c_i c_j)) / (-log(c_ij / N)), in [-1, 1]; 0.0 when any count is 0 (the
        toolkit's rule for pairs that never co-occur and for unknown words). If c_ij == N (every
        window holds both words; impossible for two distinct words with the toolkit's partial
        edge windows) the ratio is 0/0 and the limit value 1.0 is returned.

    Example:

    >>> round(npmi_from_counts(2, 2, 1, 5), 6)  # log(5/4) / log(5)
    0.138647
    """
    if count_i == 0 or count_j == 0 or count_ij == 0:
        return 0.0
    if count_ij >= num_windows:
        return 1.0
    # integer products are exact in Python; a single rounding in the divisions
    return math.log(count_ij * num_windows / (count_i * count_j)) / -math.log(
        count_ij / num_windows
    )


def _union_size(positions, window_size):
    """Size of the union of [p+1, p+ws] over sorted (global) positions p."""
    if positions.size == 0:
        return 0
    return window_size + int(np.minimum(np.diff(positions), window_size).sum())


class ReferenceCounts:
    """Exact sliding-window counts of chosen words in a reference corpus.

    Built once (e.g. from Wikipedia or the dataset) for the union of the words of all topic
    sets to evaluate, then shared by `npmi_coherence` calls. Stores the global positions of the
    counted words only (8 bytes per occurrence); pair counts are computed on demand and cached.

    Args:
        documents: iterable of reference documents, each a list of tokens or a
            whitespace-tokenised string (e.g. a line of a TDLM file: tabs separate sentences,
            and windows run across sentence boundaries within a document, as in the toolkit).
            Iterated once, so a generator over a large file is fine.
        words: the words to count (topic words).
        window_size: the sliding-window size ws (20 in the toolkit).

    Attributes:
        window_size: ws.
        num_windows: N = sum over documents of (L + ws - 1).
        num_documents: number of documents read.
        num_tokens: number of tokens read.

    Raises:
        ValueError: for window_size < 1 or a reference corpus without documents.

    Example:

    >>> counts = ReferenceCounts(["a b a c d"], words=["a", "c"], window_size=3)
    >>> counts.num_windows, counts.count("a"), counts.count("c"), counts.pair_count("a", "c")
    (7, 5, 3, 2)
    """

    def __init__(self, documents, words, window_size=DEFAULT_WINDOW_SIZE):
        self.window_size = _check_window_size(window_size)
        if isinstance(words, str):
            words = words.split()
        positions = {w: [] for w in words}
        stride_extra = self.window_size - 1
        offset = 0
        num_documents = 0
        num_tokens = 0
        for doc in documents:
            tokens = _as_tokens(doc, "each reference document")
            get = positions.get
            for i, token in enumerate(tokens):
                found = get(token)
                if found is not None:
                    found.append(offset + i)
            offset += len(tokens) + stride_extra
            num_documents += 1
            num_tokens += len(tokens)
        if num_documents == 0:
            raise ValueError("the reference corpus is empty: no documents to count windows in")
        self.num_windows = offset
        self.num_documents = num_documents
        self.num_tokens = num_tokens
        self._positions = {w: np.asarray(p, dtype=np.int64) for w, p in positions.items()}
        self._counts = {w: _union_size(p, self.window_size) for w, p in self._positions.items()}
        self._pair_counts = {}

    @property
    def words(self):
        """The set of counted words (a frozenset)."""
        return frozenset(self._counts)

    def _check_counted(self, word):
        if word not in self._counts:
            raise KeyError(
                f"word {word!r} was not counted: include it in `words` when building "
                "ReferenceCounts"
            )

    def count(self, word):
        """c(w): the number of windows containing `word` (0 if absent from the corpus).

        Raises:
            KeyError: if `word` was not among the counted words.
        """
        self._check_counted(word)
        return self._counts[word]

    def pair_count(self, word_a, word_b):
        """c(w, w'): the number of windows containing both words.

        Raises:
            KeyError: if a word was not among the counted words.
        """
        self._check_counted(word_a)
        self._check_counted(word_b)
        if word_a == word_b:
            return self._counts[word_a]
        key = (word_a, word_b) if word_a < word_b else (word_b, word_a)
        cached = self._pair_counts.get(key)
        if cached is None:
            pos_a, pos_b = self._positions[word_a], self._positions[word_b]
            if pos_a.size == 0 or pos_b.size == 0:
                cached = 0
            else:
                merged = np.sort(np.concatenate([pos_a, pos_b]), kind="stable")
                cached = (
                    self._counts[word_a]
                    + self._counts[word_b]
                    - _union_size(merged, self.window_size)
                )
            self._pair_counts[key] = cached
        return cached

    def npmi(self, word_a, word_b):
        """NPMI of two counted words (see `npmi_from_counts`)."""
        return npmi_from_counts(
            self.count(word_a),
            self.count(word_b),
            self.pair_count(word_a, word_b),
            self.num_windows,
        )


@dataclasses.dataclass(frozen=True)
class CoherenceResult:
    """NPMI coherence of a set of topics.

    Attributes:
        mean: the model score, the mean over topics of the per-topic scores.
        median: the median of the per-topic scores (the toolkit prints it too).
        per_topic: per-topic scores (mean over the cardinalities), one float per topic.
        per_cardinality: `{n: mean over topics of the top-n coherence}`.
        per_topic_per_cardinality: array [num_topics, len(cardinalities)] of top-n coherences.
        cardinalities: the cardinalities actually averaged.
        num_windows: N, the number of windows in the reference corpus.
        window_size: the sliding-window size.
        missing_words: sorted topic words (within the evaluated top-n) that never occur in the
            reference corpus; their pairs count NPMI 0 (the toolkit's rule), they are not
            dropped.
    """

    mean: float
    median: float
    per_topic: list
    per_cardinality: dict
    per_topic_per_cardinality: np.ndarray
    cardinalities: tuple
    num_windows: int
    window_size: int
    missing_words: list

    def to_dict(self):
        """A JSON-friendly dict (lists and plain floats; cardinality keys as strings)."""
        return {
            "mean": self.mean,
            "median": self.median,
            "per_topic": list(self.per_topic),
            "per_cardinality": {str(k): v for k, v in self.per_cardinality.items()},
            "cardinalities": list(self.cardinalities),
            "num_windows": self.num_windows,
            "window_size": self.window_size,
            "missing_words": list(self.missing_words),
        }


def _prepare_topics(topics, cardinalities):
    if isinstance(topics, str):
        raise ValueError("topics must be a list of topics (each a list of words), got a string")
    topics = [_as_tokens(t, "each topic") for t in topics]
    if not topics:
        raise ValueError("npmi_coherence needs at least one topic, got an empty topic list")
    for k, topic in enumerate(topics):
        if len(topic) < 2:
            raise ValueError(
                f"topic {k} has {len(topic)} word(s); coherence needs at least 2 words per topic"
            )
        for word in topic:
            if not isinstance(word, str):
                raise TypeError(f"topic {k} contains a non-string word {word!r}")

    cards = tuple(cardinalities)
    if not cards:
        raise ValueError("cardinalities must name at least one top-n size, got an empty sequence")
    for c in cards:
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 2:
            raise ValueError(f"each cardinality must be an integer >= 2, got {c!r}")
    cards = tuple(sorted({int(c) for c in cards}))

    shortest = min(len(t) for t in topics)
    usable = tuple(c for c in cards if c <= shortest)
    if not usable:
        k = min(range(len(topics)), key=lambda i: len(topics[i]))
        raise ValueError(
            f"topic {k} has only {shortest} words, fewer than the smallest cardinality "
            f"{cards[0]}; give more words per topic or pass e.g. cardinalities=({shortest},)"
        )
    top = usable[-1]
    topics = [t[:top] for t in topics]
    for k, topic in enumerate(topics):
        if len(set(topic)) != len(topic):
            dup = sorted({w for w in topic if topic.count(w) > 1})
            raise ValueError(f"topic {k} repeats word(s) {dup} within its top {top} words")
    return topics, usable


def npmi_coherence(
    topics,
    reference_documents=None,
    counts=None,
    window_size=None,
    cardinalities=DEFAULT_CARDINALITIES,
):
    """NPMI topic coherence (Lau, Newman & Baldwin, 2014; Lau & Baldwin, 2016).

    Reproduces `jhlau/topic_interpretability` (`ComputeWordCount.py` with window 20, then
    `ComputeObservedCoherence.py npmi -t 5 10 15 20` averaged per topic), as used for TDLM's
    and TCNLM's coherence tables.

    Args:
        topics: list of topics, each a list of words ordered by weight (or a whitespace-separated
            string, as in the toolkit's topic file). Only the top `max(cardinalities)` words
            are used.
        reference_documents: the reference corpus, an iterable of documents (token lists or
            whitespace-tokenised strings). Give this or `counts`.
        counts: a prebuilt `ReferenceCounts` that counted every evaluated topic word (build it
            once to score several models against the same corpus).
        window_size: sliding-window size; defaults to 20, or to `counts.window_size`.
        cardinalities: top-n sizes to average. Cardinalities larger than the shortest topic are
            skipped (all topics use the same ones); if none is left a ValueError is raised.

    Returns:
        A `CoherenceResult`.

    Raises:
        ValueError: for an empty topic list, a topic with fewer than 2 words or a repeated word,
            window_size < 1, bad cardinalities, neither or both of `reference_documents` and
            `counts`, a window size that disagrees with `counts`, or counts lacking topic words.

    Example:

    >>> docs = ["a b c", "a b", "c d"]
    >>> result = npmi_coherence([["a", "b", "c"]], docs, window_size=2, cardinalities=(2, 3))
    >>> round(result.per_cardinality[2], 4), round(result.mean, 4)
    (0.1386, 0.0584)
    """
    topics, usable = _prepare_topics(topics, cardinalities)
    if (reference_documents is None) == (counts is None):
        raise ValueError("give exactly one of `reference_documents` and `counts`")
    words = sorted({w for topic in topics for w in topic})
    if counts is None:
        ws = DEFAULT_WINDOW_SIZE if window_size is None else _check_window_size(window_size)
        counts = ReferenceCounts(reference_documents, words, window_size=ws)
    else:
        if window_size is not None and _check_window_size(window_size) != counts.window_size:
            raise ValueError(
                f"window_size={window_size} disagrees with the counts' window size "
                f"{counts.window_size}"
            )
        uncounted = [w for w in words if w not in counts.words]
        if uncounted:
            raise ValueError(
                f"the ReferenceCounts did not count {len(uncounted)} topic word(s), e.g. "
                f"{uncounted[:10]}; build it with all topic words"
            )

    scores = np.zeros((len(topics), len(usable)), dtype=np.float64)
    for k, topic in enumerate(topics):
        size = len(topic)
        matrix = np.zeros((size, size), dtype=np.float64)
        for i in range(size):
            for j in range(i + 1, size):
                matrix[i, j] = counts.npmi(topic[i], topic[j])
        for col, card in enumerate(usable):
            rows, cols = np.triu_indices(card, k=1)
            scores[k, col] = math.fsum(matrix[rows, cols]) / len(rows)

    per_topic = [math.fsum(row) / len(usable) for row in scores]
    return CoherenceResult(
        mean=math.fsum(per_topic) / len(per_topic),
        median=float(np.median(per_topic)),
        per_topic=per_topic,
        per_cardinality={
            card: math.fsum(scores[:, col]) / len(topics) for col, card in enumerate(usable)
        },
        per_topic_per_cardinality=scores,
        cardinalities=usable,
        num_windows=counts.num_windows,
        window_size=counts.window_size,
        missing_words=[w for w in words if counts.count(w) == 0],
    )


def topic_diversity(topics, top_n=25):
    """Topic diversity of Dieng, Ruiz & Blei (2020), *Topic Modeling in Embedding Spaces*.

    TD = |unique words among the top-n words of all topics| / (n * K): 1 for
    topics that share no top word, 1/K for K copies of one topic. It is
    reported beside NPMI because coherence alone rewards K near-duplicate
    coherent topics.

    Args:
        topics: K topics, each a sequence of words (or ids) ranked by weight,
            at least `top_n` long.
        top_n: words per topic (25 in Dieng et al.).

    Returns:
        float in [1/K, 1].

    Raises:
        ValueError: no topics, `top_n` < 1, or a topic shorter than `top_n`.

    Example:
    >>> topic_diversity([["a", "b"], ["a", "c"]], top_n=2)
    0.75
    """
    top_n = int(top_n)
    if top_n < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    topics = [list(topic) for topic in topics]
    if not topics:
        raise ValueError("topic_diversity: no topics")
    short = [k for k, topic in enumerate(topics) if len(topic) < top_n]
    if short:
        raise ValueError(f"topic_diversity: topic {short[0]} has {len(topics[short[0]])} words, "
                         f"fewer than top_n={top_n}")
    unique = {word for topic in topics for word in topic[:top_n]}
    return len(unique) / (top_n * len(topics))
