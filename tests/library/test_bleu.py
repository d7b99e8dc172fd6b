"""Test-BLEU / self-BLEU must equal nltk's `sentence_bleu` with smoothing method 1 (Texygen)."""

import math
import random

import pytest
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from tfktopic.evaluation import bleu as bleu_lib

ORDERS = (2, 3, 4, 5)
METHOD1 = SmoothingFunction().method1
TOL = 1e-12


def nltk_scores(references, hypothesis):
    """nltk BLEU-n for every n in ORDERS: {n: score}.

    One call with a list of weight tuples computes exactly what separate calls with
    weights=(1/n,)*n compute (same clipped counts and brevity penalty), only faster.
    """
    scores = sentence_bleu(
        references,
        hypothesis,
        weights=[(1 / n,) * n for n in ORDERS],
        smoothing_function=METHOD1,
    )
    return dict(zip(ORDERS, scores))


@pytest.fixture(scope="module")
def apnews_sentences(apnews_path):
    """Sentences (token lists) of the first 300 APNEWS documents (TDLM format)."""
    sentences = []
    with open(apnews_path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle):
            if line_no >= 300:
                break
            for sentence in line.rstrip("\n").split("\t"):
                tokens = sentence.split()
                if tokens:
                    sentences.append(tokens)
    assert len(sentences) > 400, "expected a few thousand sentences in 300 APNEWS documents"
    return sentences


@pytest.fixture(scope="module")
def refs_and_hyps(apnews_sentences):
    references = apnews_sentences[:200]
    hypotheses = [list(s) for s in apnews_sentences[200:260]]
    hypotheses += [
        apnews_sentences[260][:1],  # shorter than every n >= 2
        apnews_sentences[261][:2],
        apnews_sentences[262][:3],
        [],  # empty hypothesis: BLEU 0
        ["zzzunseen", "qqqunseen", "xxxunseen"],  # no unigram match: BLEU 0
        ["the"] * 7,  # clipping of a repeated word
        list(references[17]),  # a copy of a reference
    ]
    return references, hypotheses


@pytest.fixture(scope="module")
def nltk_per_hyp(refs_and_hyps):
    references, hypotheses = refs_and_hyps
    return [nltk_scores(references, h) for h in hypotheses]


def test_sentence_bleu_equals_nltk_on_real_sentences(refs_and_hyps, nltk_per_hyp):
    references, hypotheses = refs_and_hyps
    scorer = bleu_lib.BleuScorer(references, max_order=5)
    for hyp, expected in zip(hypotheses, nltk_per_hyp):
        for n in ORDERS:
            got = scorer.sentence_bleu(hyp, n)
            assert got == pytest.approx(expected[n], abs=TOL), (n, hyp)
    # the edge cases are what they should be
    assert scorer.sentence_bleu([], 4) == 0.0
    assert scorer.sentence_bleu(["zzzunseen", "qqqunseen"], 2) == 0.0
    assert scorer.sentence_bleu(references[17], 4) == pytest.approx(1.0, abs=TOL)
    assert 0.0 < scorer.sentence_bleu(hypotheses[60], 5) < 1.0  # one token, len < n


def test_single_weight_call_matches_too(refs_and_hyps):
    references, hypotheses = refs_and_hyps
    scorer = bleu_lib.BleuScorer(references, max_order=4)
    for hyp in hypotheses[:5] + hypotheses[-7:]:
        expected = sentence_bleu(references, hyp, (0.25,) * 4, smoothing_function=METHOD1)
        assert scorer.sentence_bleu(hyp, 4) == pytest.approx(expected, abs=TOL)


def test_test_bleu_is_mean_of_nltk_sentence_scores(refs_and_hyps, nltk_per_hyp):
    references, hypotheses = refs_and_hyps
    per_hyp = nltk_per_hyp
    scorer = bleu_lib.BleuScorer(references, max_order=5)
    means = scorer.mean_scores(hypotheses, ORDERS)
    for n in ORDERS:
        expected = sum(s[n] for s in per_hyp) / len(hypotheses)
        assert bleu_lib.bleu_against_references(hypotheses, references, n=n) == pytest.approx(
            expected, abs=TOL
        )
        assert scorer.corpus_mean(hypotheses, n) == pytest.approx(expected, abs=TOL)
        assert means[n] == pytest.approx(expected, abs=TOL)
        assert scorer.sentence_scores(hypotheses, n) == pytest.approx(
            [s[n] for s in per_hyp], abs=TOL
        )


@pytest.mark.parametrize(
    "ref_lengths, hyp_length",
    [
        ((13, 11), 12),  # equidistant: the shorter (11) wins, so BP = 1
        ((5, 9), 7),  # equidistant: 5 wins, BP = 1 (9 would penalise)
        ((9, 8, 30), 7),  # closest is 8 > 7: penalised
        ((5, 8), 7),  # a shorter one exists, the longer (8) is closer: 8 wins, penalised
        ((3,), 10),  # hypothesis longer than every reference
        ((0, 4), 1),  # an empty reference is a candidate length
    ],
)
def test_brevity_penalty_closest_length_ties_to_shorter(ref_lengths, hyp_length):
    references = [["a"] * length for length in ref_lengths]
    hypothesis = ["a"] * hyp_length
    scorer = bleu_lib.BleuScorer(references, max_order=5)
    expected = nltk_scores(references, hypothesis)
    for n in ORDERS:
        assert scorer.sentence_bleu(hypothesis, n) == pytest.approx(expected[n], abs=TOL)


def brute_force_self_bleu(sentences):
    """Leave-one-out nltk loop: per-sentence {n: score} for every sentence."""
    return [
        nltk_scores(sentences[:i] + sentences[i + 1 :], hyp) for i, hyp in enumerate(sentences)
    ]


def test_self_bleu_equals_leave_one_out_nltk(apnews_sentences):
    sentences = [list(s) for s in apnews_sentences[-40:]]
    sentences[5] = sentences[5][:2]
    sentences[11] = []
    sentences[23] = sentences[23][:1]
    assert len({tuple(s) for s in sentences}) == len(sentences), "no duplicates here"
    brute = brute_force_self_bleu(sentences)
    scorer = bleu_lib.SelfBleuScorer(sentences, max_order=5)
    for n in ORDERS:
        scores = scorer.sentence_scores(n)
        assert scores == pytest.approx([b[n] for b in brute], abs=TOL)
        # the hypothesis is never among its own references (that would give 1.0)
        assert max(scores) < 1.0
        expected_mean = sum(b[n] for b in brute) / len(sentences)
        assert bleu_lib.self_bleu(sentences, n=n) == pytest.approx(expected_mean, abs=TOL)


def test_self_bleu_duplicates_and_top_count_owner(apnews_sentences):
    base = [list(s) for s in apnews_sentences[300:310]]
    sentences = base + [list(base[3]), list(base[7])]
    # the top count of "the" / ("the", "the") is owned by the hypothesis itself; the
    # other sentences hold smaller counts, which must then be the clip
    sentences += [["the", "the", "the", "the", "cat"], ["the", "the", "dog"], ["the", "cat"]]
    brute = brute_force_self_bleu(sentences)
    scorer = bleu_lib.SelfBleuScorer(sentences, max_order=5)
    for n in ORDERS:
        scores = scorer.sentence_scores(n)
        assert scores == pytest.approx([b[n] for b in brute], abs=TOL)
        for twin_a, twin_b in ((3, 10), (7, 11)):
            assert scores[twin_a] == 1.0 and scores[twin_b] == 1.0
        assert all(scores[i] < 1.0 for i in range(len(sentences)) if i not in (3, 7, 10, 11))
    assert bleu_lib.SelfBleuScorer([["a", "b", "c"], ["a", "b", "c"], ["x", "y"]]).sentence_bleu(
        2, n=2
    ) == 0.0


def test_reference_sample_is_the_documented_fixed_sample(refs_and_hyps):
    references, hypotheses = refs_and_hyps
    keep = sorted(random.Random(7).sample(range(len(references)), 50))
    expected = bleu_lib.BleuScorer([references[i] for i in keep], max_order=3).corpus_mean(
        hypotheses, 3
    )
    got = bleu_lib.bleu_against_references(hypotheses, references, n=3, sample_size=50, seed=7)
    assert got == pytest.approx(expected, abs=TOL)
    full = bleu_lib.bleu_against_references(hypotheses, references, n=3)
    assert got < full  # fewer references, fewer matches
    assert bleu_lib.bleu_against_references(
        hypotheses, references, n=3, sample_size=10_000
    ) == pytest.approx(full, abs=TOL)


def test_self_bleu_sample_and_report(refs_and_hyps):
    references, hypotheses = refs_and_hyps
    keep = sorted(random.Random(3).sample(range(len(hypotheses)), 20))
    expected = bleu_lib.self_bleu([hypotheses[i] for i in keep], n=4)
    assert bleu_lib.self_bleu(hypotheses, n=4, sample_size=20, seed=3) == pytest.approx(
        expected, abs=TOL
    )
    report = bleu_lib.bleu_report(
        hypotheses, references, orders=(2, 4), reference_sample_size=100, seed=3
    )
    ref_keep = sorted(random.Random(3).sample(range(len(references)), 100))
    assert report["num_references"] == 100
    assert report["num_hypotheses"] == report["num_self_bleu_sentences"] == len(hypotheses)
    for n in (2, 4):
        assert report[f"test_bleu_{n}"] == pytest.approx(
            bleu_lib.bleu_against_references(hypotheses, [references[i] for i in ref_keep], n=n),
            abs=TOL,
        )
        assert report[f"self_bleu_{n}"] == pytest.approx(
            bleu_lib.self_bleu(hypotheses, n=n), abs=TOL
        )
    assert set(report) == {
        "test_bleu_2", "test_bleu_4", "self_bleu_2", "self_bleu_4",
        "num_references", "num_hypotheses", "num_self_bleu_sentences",
    }


def test_whitespace_strings_are_token_lists():
    references = ["the cat sat on the mat", "a dog sat <unk> down"]
    scorer = bleu_lib.BleuScorer(references)
    hyp = "the <unk> dog sat down"
    assert scorer.sentence_bleu(hyp, 3) == scorer.sentence_bleu(hyp.split(), 3)
    expected = sentence_bleu(
        [r.split() for r in references], hyp.split(), (1 / 3,) * 3, smoothing_function=METHOD1
    )
    assert scorer.sentence_bleu(hyp, 3) == pytest.approx(expected, abs=TOL)


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="empty reference set"):
        bleu_lib.BleuScorer([])
    with pytest.raises(ValueError, match="empty reference set"):
        bleu_lib.bleu_against_references([["a"]], [], n=2)
    with pytest.raises(ValueError, match="empty reference set"):
        bleu_lib.bleu_report([["a"], ["b"]], [])
    with pytest.raises(ValueError, match="n must be >= 1"):
        bleu_lib.bleu_against_references([["a"]], [["a"]], n=0)
    with pytest.raises(ValueError, match="n must be >= 1"):
        bleu_lib.self_bleu([["a"], ["b"]], n=-1)
    with pytest.raises(ValueError, match="max_order=3"):
        bleu_lib.BleuScorer([["a"]], max_order=3).sentence_bleu(["a"], n=4)
    with pytest.raises(ValueError, match="at least one hypothesis"):
        bleu_lib.bleu_against_references([], [["a"]], n=2)
    with pytest.raises(ValueError, match="at least two sentences"):
        bleu_lib.self_bleu([["a", "b"]], n=2)
    with pytest.raises(ValueError, match="sample_size"):
        bleu_lib.bleu_against_references([["a"]], [["a"], ["b"]], n=1, sample_size=0)
    with pytest.raises(TypeError, match="single string"):
        bleu_lib.BleuScorer("the cat sat")


def test_sentence_bleu_from_stats_is_the_formula():
    # p1 = 3/4, p2 = 0 -> 0.1/3, r = 5 > 4 -> BP = exp(1 - 5/4)
    got = bleu_lib.sentence_bleu_from_stats([3, 0], [4, 3], hyp_len=4, ref_len=5, n=2)
    expected = math.exp(1 - 5 / 4) * math.sqrt(0.75 * 0.1 / 3)
    assert got == pytest.approx(expected, rel=1e-14)


def test_a_sample_of_one_reference_is_allowed():
    """sample_size = 1, the smallest sample, scores against the one sampled reference."""
    import random

    references = [["a", "b", "c"], ["a", "x", "y"], ["q", "r", "s"]]
    hypotheses = [["a", "b", "y"]]
    kept = random.Random(5).sample(range(3), 1)[0]
    assert bleu_lib.bleu_against_references(hypotheses, references, n=1, sample_size=1,
                                            seed=5) == pytest.approx(
        bleu_lib.bleu_against_references(hypotheses, [references[kept]], n=1))


def test_defaults_are_bleu_4_orders_2_to_5_and_the_seed_0_reference_sample(refs_and_hyps):
    """The documented defaults: n = 4, orders 2..5 (the papers' BLEU-2..5), max_order 5,
    and the reference sample of seed 0."""
    references, hypotheses = refs_and_hyps
    hypotheses = hypotheses[:40]
    scorer = bleu_lib.BleuScorer(references)
    assert scorer.max_order == 5
    assert scorer.sentence_bleu(hypotheses[0]) == scorer.sentence_bleu(hypotheses[0], 4)
    assert scorer.sentence_bleu(hypotheses[0], 4) != scorer.sentence_bleu(hypotheses[0], 5)
    assert scorer.sentence_scores(hypotheses) == scorer.sentence_scores(hypotheses, 4)
    assert scorer.corpus_mean(hypotheses) == scorer.corpus_mean(hypotheses, 4)
    assert sorted(scorer.mean_scores(hypotheses)) == [2, 3, 4, 5]
    own = bleu_lib.SelfBleuScorer(hypotheses)
    assert own.max_order == 5
    assert own.sentence_bleu(0) == own.sentence_bleu(0, 4) != own.sentence_bleu(0, 5)
    assert own.sentence_scores() == own.sentence_scores(4)
    assert own.corpus_mean() == own.corpus_mean(4)
    assert sorted(own.mean_scores()) == [2, 3, 4, 5]
    keep = sorted(random.Random(0).sample(range(len(references)), 50))
    expected = bleu_lib.BleuScorer([references[i] for i in keep]).corpus_mean(hypotheses, 4)
    got = bleu_lib.bleu_against_references(hypotheses, references, sample_size=50)
    assert got == pytest.approx(expected, abs=TOL)
    keep = sorted(random.Random(0).sample(range(len(hypotheses)), 20))
    expected = bleu_lib.SelfBleuScorer([hypotheses[i] for i in keep]).corpus_mean(4)
    assert bleu_lib.self_bleu(hypotheses, sample_size=20) == pytest.approx(expected, abs=TOL)
    report = bleu_lib.bleu_report(hypotheses, references)
    sampled = bleu_lib.bleu_report(hypotheses, references, reference_sample_size=50,
                                   self_bleu_sample_size=20)
    assert sampled == bleu_lib.bleu_report(hypotheses, references, reference_sample_size=50,
                                           self_bleu_sample_size=20, seed=0)
    assert sampled["test_bleu_4"] == pytest.approx(got, abs=TOL)
    assert sorted(k for k in report if k.startswith(("test_", "self_"))) == sorted(
        f"{kind}_bleu_{n}" for kind in ("test", "self") for n in (2, 3, 4, 5))


def test_self_bleu_takes_the_closer_longer_length_of_the_others():
    """Lengths 3, 5, 6: for the sentence of length 5 the closest other length is 6 (above,
    penalised); for the longest (6) it is 5 (below)."""
    sentences = [["a", "b", "c"], ["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f"]]
    scorer = bleu_lib.SelfBleuScorer(sentences)
    for i, expected in enumerate(brute_force_self_bleu(sentences)):
        for n in ORDERS:
            assert scorer.sentence_bleu(i, n) == pytest.approx(expected[n], abs=TOL)


def test_self_bleu_of_two_sentences_scores_each_against_the_other():
    """Two sentences are the fewest self-BLEU accepts (each is the other's reference)."""
    pair = [["a", "b", "c", "d"], ["a", "b", "c", "e"]]
    scores = bleu_lib.SelfBleuScorer(pair).sentence_scores(n=2)
    expected = [nltk_scores([pair[1]], pair[0])[2], nltk_scores([pair[0]], pair[1])[2]]
    assert scores == pytest.approx(expected, abs=TOL) and scores[0] > 0
    with pytest.raises(ValueError, match="at least two sentences"):
        bleu_lib.SelfBleuScorer(pair[:1])
