"""Test-BLEU and self-BLEU of generated sentences (Texygen semantics, nltk-exact).

The quality / diversity numbers that topic-guided language-model papers report for generated
text (e.g. rGBN-RNN, after TGVAE) come from the Texygen benchmark (Zhu et al., 2018,
*Texygen: A Benchmarking Platform for Text Generation Models*):

* **test-BLEU-n**: every generated sentence is scored with sentence-level BLEU-n against *all*
  real sentences as its references, and the scores are averaged over the generated sentences
  (an arithmetic mean of sentence scores, not corpus BLEU);
* **self-BLEU-n**: every generated sentence is scored against all *other* generated sentences
  (leave-one-out, never against itself) and the scores are averaged. Higher means less diverse.

Sentence BLEU-n is exactly `nltk.translate.bleu_score.sentence_bleu(references, hypothesis,
weights=(1/n,) * n, smoothing_function=SmoothingFunction().method1)` (Papineni et al., 2002;
smoothing method 1 of Chen & Cherry, 2014, epsilon = 0.1):

* modified n-gram precision p_k = (sum of hypothesis k-gram counts clipped at their maximum count
  in any single reference) / max(1, number of hypothesis k-grams), for k = 1..n;
* if no unigram matches at all (this includes the empty hypothesis) the score is 0;
* method 1: a zero numerator is replaced by 0.1, i.e. p_k = 0.1 / max(1, #k-grams) (so an order
  longer than the hypothesis contributes 0.1 / 1);
* brevity penalty with r = the reference length closest to len(h), ties going to the shorter
  reference: BP = 1 if len(h) > r, else exp(1 - r / len(h));
* BLEU-n = BP * exp(sum_k (1/n) log p_k).

nltk is not used here: all hypotheses share the same references, so the maximum count of every
reference n-gram and the sorted reference lengths are computed once and each hypothesis costs
O(len(h) * n). For leave-one-out self-BLEU each n-gram keeps its two largest per-sentence counts
and the owner of the largest. The numbers equal nltk's to the last bit (the tests check this).

Sentences are lists of tokens (already tokenised; the TDLM corpora are whitespace-tokenised, and
`<unk>` is kept as one token). A string is accepted too and is split on whitespace.
"""

import bisect
import math
import random
from collections import Counter

__all__ = [
    "BleuScorer",
    "SelfBleuScorer",
    "sentence_bleu_from_stats",
    "bleu_against_references",
    "self_bleu",
    "bleu_report",
]

#: Chen & Cherry (2014) smoothing method 1 epsilon, as in nltk's `SmoothingFunction()`.
EPSILON = 0.1


# --------------------------------------------------------------------------- helpers


def _as_tokens(sentence, what):
    """Return `sentence` as a tuple of tokens (a string is split on whitespace)."""
    if isinstance(sentence, str):
        return tuple(sentence.split())
    try:
        return tuple(sentence)
    except TypeError:
        raise TypeError(
            f"{what} must be a list of tokens (or a whitespace-tokenised string), "
            f"got {type(sentence).__name__}"
        ) from None


def _as_sentences(sentences, what):
    if isinstance(sentences, str):
        raise TypeError(
            f"{what} must be a list of sentences (each a list of tokens), got a single string"
        )
    try:
        items = list(sentences)
    except TypeError:
        raise TypeError(
            f"{what} must be a list of sentences (each a list of tokens), "
            f"got {type(sentences).__name__}"
        ) from None
    return [_as_tokens(s, f"each of the {what}") for s in items]


def _check_order(n, max_order=None):
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"the BLEU order n must be an integer >= 1, got {n!r}")
    if n < 1:
        raise ValueError(f"the BLEU order n must be >= 1, got {n}")
    if max_order is not None and n > max_order:
        raise ValueError(
            f"BLEU order n={n} is larger than the scorer's max_order={max_order}; "
            f"build the scorer with max_order >= {n}"
        )


def _check_orders(orders):
    orders = tuple(orders)
    if not orders:
        raise ValueError("orders must name at least one BLEU order, got an empty sequence")
    for n in orders:
        _check_order(n)
    return orders


def _ngram_counts(tokens, k):
    """Counter of the k-grams (tuples) of `tokens`; empty if len(tokens) < k."""
    if len(tokens) < k:
        return Counter()
    return Counter(zip(*(tokens[i:] for i in range(k))))


def _sample_indices(total, sample_size, seed, what):
    """Indices of a fixed random sample: `random.Random(seed).sample(range(total), k)`, sorted."""
    if sample_size is None or sample_size >= total:
        return list(range(total))
    if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1:
        raise ValueError(f"{what} must be None or an integer >= 1, got {sample_size!r}")
    return sorted(random.Random(seed).sample(range(total), sample_size))


def _closest_length(sorted_lengths, hyp_len):
    """nltk's `closest_ref_length`: the closest length, ties going to the shorter one."""
    pos = bisect.bisect_left(sorted_lengths, hyp_len)
    best = None
    if pos < len(sorted_lengths):
        best = sorted_lengths[pos]  # the smallest length >= hyp_len
    if pos > 0:
        below = sorted_lengths[pos - 1]  # the largest length < hyp_len
        if best is None or hyp_len - below <= best - hyp_len:
            best = below
    return best


def sentence_bleu_from_stats(matches, totals, hyp_len, ref_len, n):
    """Sentence BLEU-n (uniform weights, smoothing method 1) from n-gram statistics.

    This is the single place where the BLEU formula lives; it reproduces the floating-point
    operations of nltk's `sentence_bleu` exactly.

    Args:
        matches: clipped match counts for orders 1, 2, ... (at least `n` entries).
        totals: numbers of hypothesis n-grams for orders 1, 2, ... (at least `n` entries).
        hyp_len: length of the hypothesis in tokens.
        ref_len: the closest reference length (see module docstring).
        n: the maximum n-gram order; the weights are `(1/n,) * n`.

    Returns:
        The BLEU score, a float in [0, 1].
    """
    if matches[0] == 0:  # no unigram matches (also the empty hypothesis): nltk returns 0
        return 0.0
    weight = 1 / n
    log_terms = []
    for k in range(n):
        denominator = max(1, totals[k])
        numerator = matches[k] if matches[k] != 0 else EPSILON
        log_terms.append(weight * math.log(numerator / denominator))
    if hyp_len > ref_len:
        brevity = 1
    else:  # hyp_len > 0 here, since an empty hypothesis has no unigram match
        brevity = math.exp(1 - ref_len / hyp_len)
    return float(brevity * math.exp(math.fsum(log_terms)))


# --------------------------------------------------------------------------- test-BLEU


class BleuScorer:
    """Sentence BLEU of hypotheses against one fixed set of references (Texygen test-BLEU).

    Precomputes, for every n-gram order up to `max_order`, the maximum count of each n-gram in
    any single reference, and the sorted reference lengths, so that scoring a hypothesis costs
    O(len(hypothesis) * n). Scores equal `nltk.translate.bleu_score.sentence_bleu(references,
    hypothesis, (1/n,) * n, smoothing_function=SmoothingFunction().method1)` exactly.

    Args:
        references: the real sentences, a list of token lists (strings are split on whitespace).
            Every hypothesis is scored against all of them.
        max_order: the largest n that will be asked for.

    Raises:
        ValueError: if `references` is empty or `max_order` < 1.

    Example:

    >>> refs = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "sat", "down"]]
    >>> scorer = BleuScorer(refs, max_order=4)
    >>> round(scorer.sentence_bleu(["the", "dog", "sat", "down"], n=2), 4)
    0.8165
    >>> scorer.corpus_mean([["the", "cat", "sat", "on", "the", "mat"], []], n=4)
    0.5
    """

    def __init__(self, references, max_order=5):
        _check_order(max_order)
        references = _as_sentences(references, "references")
        if not references:
            raise ValueError(
                "BLEU needs at least one reference sentence, got an empty reference set"
            )
        self.max_order = max_order
        self.num_references = len(references)
        self._sorted_lengths = sorted(len(r) for r in references)
        self._max_counts = []
        for k in range(1, max_order + 1):
            max_counts = {}
            for ref in references:
                for gram, count in _ngram_counts(ref, k).items():
                    if count > max_counts.get(gram, 0):
                        max_counts[gram] = count
            self._max_counts.append(max_counts)

    def _stats(self, hypothesis, n):
        matches, totals = [], []
        for k in range(1, n + 1):
            counts = _ngram_counts(hypothesis, k)
            max_counts = self._max_counts[k - 1]
            matches.append(
                sum(min(c, max_counts.get(gram, 0)) for gram, c in counts.items())
            )
            totals.append(sum(counts.values()))
        return matches, totals

    def sentence_bleu(self, hypothesis, n=4):
        """BLEU-n of one hypothesis against all references.

        Args:
            hypothesis: a list of tokens (a string is split on whitespace).
            n: the n-gram order, 1 <= n <= `max_order`; weights are uniform, `(1/n,) * n`.

        Returns:
            The sentence BLEU score, a float in [0, 1] (0 for an empty hypothesis).
        """
        _check_order(n, self.max_order)
        return self._score(_as_tokens(hypothesis, "hypothesis"), (n,))[0]

    def _score(self, hypothesis, orders):
        matches, totals = self._stats(hypothesis, max(orders))
        ref_len = _closest_length(self._sorted_lengths, len(hypothesis))
        return [
            sentence_bleu_from_stats(matches, totals, len(hypothesis), ref_len, n)
            for n in orders
        ]

    def sentence_scores(self, hypotheses, n=4):
        """BLEU-n of every hypothesis, in order.

        Args:
            hypotheses: a list of token lists.
            n: the n-gram order, 1 <= n <= `max_order`.

        Returns:
            A list of floats, one per hypothesis.
        """
        _check_order(n, self.max_order)
        hypotheses = _as_sentences(hypotheses, "hypotheses")
        return [self._score(h, (n,))[0] for h in hypotheses]

    def corpus_mean(self, hypotheses, n=4):
        """Texygen test-BLEU-n: the arithmetic mean of the hypotheses' sentence BLEU-n.

        Args:
            hypotheses: a non-empty list of token lists.
            n: the n-gram order, 1 <= n <= `max_order`.

        Returns:
            The mean sentence BLEU, a float.

        Raises:
            ValueError: if `hypotheses` is empty.
        """
        return self.mean_scores(hypotheses, (n,))[n]

    def mean_scores(self, hypotheses, orders=(2, 3, 4, 5)):
        """Mean sentence BLEU for several orders at once (n-gram counts are shared).

        Args:
            hypotheses: a non-empty list of token lists.
            orders: the n-gram orders, each 1 <= n <= `max_order`.

        Returns:
            A dict `{n: mean BLEU-n}`.
        """
        orders = _check_orders(orders)
        for n in orders:
            _check_order(n, self.max_order)
        hypotheses = _as_sentences(hypotheses, "hypotheses")
        if not hypotheses:
            raise ValueError("BLEU needs at least one hypothesis, got an empty list")
        sums = [[] for _ in orders]
        for h in hypotheses:
            for acc, score in zip(sums, self._score(h, orders)):
                acc.append(score)
        return {n: math.fsum(acc) / len(hypotheses) for n, acc in zip(orders, sums)}


# --------------------------------------------------------------------------- self-BLEU


class SelfBleuScorer:
    """Leave-one-out sentence BLEU within one set of sentences (Texygen self-BLEU).

    Sentence i is scored against all the other sentences as references, never against itself
    (Texygen's parallel path; its `SelfBleu.get_bleu` wrongly includes the hypothesis and gives
    1.0). A sentence that occurs twice therefore scores 1.0 against its twin. For each n-gram
    the two largest per-sentence counts and the owner of the largest are kept, so each sentence
    costs O(len * n) instead of O(num_sentences * len * n).

    Args:
        sentences: the generated sentences, a list of at least two token lists.
        max_order: the largest n that will be asked for.

    Raises:
        ValueError: with fewer than two sentences, or `max_order` < 1.

    Example:

    >>> sents = [["a", "b", "c"], ["a", "b", "c"], ["x", "y", "z"]]
    >>> SelfBleuScorer(sents).sentence_scores(n=2)
    [1.0, 1.0, 0.0]
    """

    def __init__(self, sentences, max_order=5):
        _check_order(max_order)
        sentences = _as_sentences(sentences, "sentences")
        if len(sentences) < 2:
            raise ValueError(
                "self-BLEU needs at least two sentences (each is scored against the others), "
                f"got {len(sentences)}"
            )
        self.max_order = max_order
        self.num_sentences = len(sentences)
        self._sentences = sentences
        lengths = [len(s) for s in sentences]
        self._length_count = Counter(lengths)
        self._sorted_unique_lengths = sorted(self._length_count)
        # per order: n-gram -> [largest count, owner of the largest, second largest count]
        self._top_two = []
        for k in range(1, max_order + 1):
            table = {}
            for owner, sent in enumerate(sentences):
                for gram, count in _ngram_counts(sent, k).items():
                    entry = table.get(gram)
                    if entry is None:
                        table[gram] = [count, owner, 0]
                    elif count > entry[0]:
                        entry[2] = entry[0]
                        entry[0] = count
                        entry[1] = owner
                    elif count > entry[2]:
                        entry[2] = count
            self._top_two.append(table)

    def _closest_other_length(self, i):
        """Closest length among the other sentences to sentence i's own length."""
        own = len(self._sentences[i])
        if self._length_count[own] > 1:
            return own
        lengths = self._sorted_unique_lengths
        pos = bisect.bisect_left(lengths, own)  # lengths[pos] == own, the only one
        below = lengths[pos - 1] if pos > 0 else None
        above = lengths[pos + 1] if pos + 1 < len(lengths) else None
        if above is None or (below is not None and own - below <= above - own):
            return below
        return above

    def _score(self, i, orders):
        hyp = self._sentences[i]
        matches, totals = [], []
        for k in range(1, max(orders) + 1):
            counts = _ngram_counts(hyp, k)
            table = self._top_two[k - 1]
            matched = 0
            for gram, c in counts.items():
                top, owner, second = table[gram]
                matched += min(c, second if owner == i else top)
            matches.append(matched)
            totals.append(sum(counts.values()))
        ref_len = self._closest_other_length(i)
        return [sentence_bleu_from_stats(matches, totals, len(hyp), ref_len, n) for n in orders]

    def sentence_bleu(self, i, n=4):
        """BLEU-n of sentence `i` against all the other sentences.

        Args:
            i: index of the sentence.
            n: the n-gram order, 1 <= n <= `max_order`.

        Returns:
            The sentence BLEU score, a float.
        """
        _check_order(n, self.max_order)
        if not -self.num_sentences <= i < self.num_sentences:
            raise IndexError(f"sentence index {i} out of range ({self.num_sentences} sentences)")
        return self._score(i % self.num_sentences, (n,))[0]

    def sentence_scores(self, n=4):
        """Leave-one-out BLEU-n of every sentence, in order (a list of floats)."""
        _check_order(n, self.max_order)
        return [self._score(i, (n,))[0] for i in range(self.num_sentences)]

    def mean_scores(self, orders=(2, 3, 4, 5)):
        """Self-BLEU for several orders at once: a dict `{n: mean leave-one-out BLEU-n}`."""
        orders = _check_orders(orders)
        for n in orders:
            _check_order(n, self.max_order)
        sums = [[] for _ in orders]
        for i in range(self.num_sentences):
            for acc, score in zip(sums, self._score(i, orders)):
                acc.append(score)
        return {n: math.fsum(acc) / self.num_sentences for n, acc in zip(orders, sums)}

    def corpus_mean(self, n=4):
        """Self-BLEU-n: the mean of the sentences' leave-one-out BLEU-n."""
        return self.mean_scores((n,))[n]


# --------------------------------------------------------------------------- functions


def bleu_against_references(hypotheses, references, n=4, sample_size=None, seed=0):
    """Texygen test-BLEU-n: mean sentence BLEU-n of the hypotheses against the references.

    Args:
        hypotheses: generated sentences, a non-empty list of token lists.
        references: real sentences (e.g. the test or validation set), a list of token lists.
        n: the n-gram order (weights `(1/n,) * n`); papers report n = 2..5.
        sample_size: if given and smaller than the number of references, only a fixed random
            sample of this many references is used, namely the references at indices
            `sorted(random.Random(seed).sample(range(len(references)), sample_size))`. More
            references give higher BLEU, so report the size used (Texygen's fast mode silently
            uses the first 500).
        seed: seed of the reference sample.

    Returns:
        The mean sentence BLEU-n, a float in [0, 1].

    Raises:
        ValueError: for an empty reference set or hypothesis list, or n < 1.

    Example:

    >>> refs = [["the", "cat", "sat"], ["a", "dog", "ran"]]
    >>> bleu_against_references([["the", "cat", "sat"], ["a", "dog", "sat"]], refs, n=2)
    0.8535533905932737
    """
    _check_order(n)
    references = _as_sentences(references, "references")
    if not references:
        raise ValueError("BLEU needs at least one reference sentence, got an empty reference set")
    keep = _sample_indices(len(references), sample_size, seed, "sample_size")
    return BleuScorer([references[i] for i in keep], max_order=n).corpus_mean(hypotheses, n)


def self_bleu(sentences, n=4, sample_size=None, seed=0):
    """Texygen self-BLEU-n: mean leave-one-out sentence BLEU-n within the generated sentences.

    Args:
        sentences: generated sentences, a list of at least two token lists.
        n: the n-gram order (weights `(1/n,) * n`).
        sample_size: if given and smaller than the number of sentences, only the sentences at
            indices `sorted(random.Random(seed).sample(range(len(sentences)), sample_size))` are
            used, each scored against the other `sample_size - 1` (Texygen's fast mode uses the
            first 500 sentences).
        seed: seed of the sample.

    Returns:
        The self-BLEU-n, a float in [0, 1]; higher means less diverse.

    Raises:
        ValueError: with fewer than two sentences (after sampling), or n < 1.

    Example:

    >>> self_bleu([["a", "b", "c"], ["a", "b", "c"], ["x", "y", "z"]], n=2)
    0.6666666666666666
    """
    _check_order(n)
    sentences = _as_sentences(sentences, "sentences")
    keep = _sample_indices(len(sentences), sample_size, seed, "sample_size")
    return SelfBleuScorer([sentences[i] for i in keep], max_order=n).corpus_mean(n)


def bleu_report(
    hypotheses,
    references,
    orders=(2, 3, 4, 5),
    reference_sample_size=None,
    self_bleu_sample_size=None,
    seed=0,
):
    """Test-BLEU-n and self-BLEU-n of generated sentences for several orders.

    Args:
        hypotheses: generated sentences, a list of at least two token lists.
        references: real sentences, a non-empty list of token lists.
        orders: the n-gram orders to report.
        reference_sample_size: optional fixed-size random sample of the references (see
            `bleu_against_references`).
        self_bleu_sample_size: optional fixed-size random sample of the hypotheses for self-BLEU
            (see `self_bleu`); test-BLEU always uses all hypotheses.
        seed: seed of both samples.

    Returns:
        A flat dict (JSON-friendly) with keys `"test_bleu_{n}"` and `"self_bleu_{n}"` for each
        order, plus `"num_hypotheses"`, `"num_references"` (references actually used) and
        `"num_self_bleu_sentences"`.

    Example:

    >>> report = bleu_report([["a", "b"], ["a", "c"]], [["a", "b"]], orders=(2,))
    >>> sorted(report)  # doctest: +NORMALIZE_WHITESPACE
    ['num_hypotheses', 'num_references', 'num_self_bleu_sentences', 'self_bleu_2',
     'test_bleu_2']
    """
    orders = _check_orders(orders)
    hypotheses = _as_sentences(hypotheses, "hypotheses")
    references = _as_sentences(references, "references")
    if not references:
        raise ValueError("BLEU needs at least one reference sentence, got an empty reference set")
    if not hypotheses:
        raise ValueError("BLEU needs at least one hypothesis, got an empty list")
    ref_keep = _sample_indices(
        len(references), reference_sample_size, seed, "reference_sample_size"
    )
    hyp_keep = _sample_indices(
        len(hypotheses), self_bleu_sample_size, seed, "self_bleu_sample_size"
    )
    scorer = BleuScorer([references[i] for i in ref_keep], max_order=max(orders))
    test_scores = scorer.mean_scores(hypotheses, orders)
    self_scorer = SelfBleuScorer([hypotheses[i] for i in hyp_keep], max_order=max(orders))
    self_scores = self_scorer.mean_scores(orders)
    report = {}
    for n in orders:
        report[f"test_bleu_{n}"] = test_scores[n]
    for n in orders:
        report[f"self_bleu_{n}"] = self_scores[n]
    report["num_hypotheses"] = len(hypotheses)
    report["num_references"] = len(ref_keep)
    report["num_self_bleu_sentences"] = len(hyp_keep)
    return report
