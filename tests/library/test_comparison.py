"""The paired bootstrap of perplexity ratios (tfktopic.evaluation.comparison)."""

import itertools
import math

import numpy as np
import pytest

from tfktopic.evaluation.comparison import paired_bootstrap, seed_summary


def _random_nll(seed, num_docs, low, high):
    """Per-document token counts and NLL sums of 3 seeds of A and 2 of B (NLL per token
    uniform in [low, high])."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(5, 40, size=num_docs).astype(float)
    return (tokens, rng.uniform(low, high, size=(3, num_docs)) * tokens,
            rng.uniform(low, high, size=(2, num_docs)) * tokens)


def test_point_ratio_is_the_ratio_of_seed_mean_perplexities():
    tokens, nll_a, nll_b = _random_nll(1, 30, 3.0, 5.0)
    result = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=10)
    ppl_a = [math.exp(row.sum() / tokens.sum()) for row in nll_a]
    ppl_b = [math.exp(row.sum() / tokens.sum()) for row in nll_b]
    assert result.ppl_a == pytest.approx(ppl_a)
    assert result.ppl_b == pytest.approx(ppl_b)
    assert result.ratio == pytest.approx(np.mean(ppl_a) / np.mean(ppl_b))


def test_document_bootstrap_matches_the_exact_resampling_distribution():
    # Three documents, one seed each: the 27 equally likely ordered draws give the
    # exact bootstrap distribution of the ratio; the Monte Carlo one must match it.
    tokens = np.array([10.0, 20.0, 5.0])
    nll_a = np.array([30.0, 90.0, 25.0])
    nll_b = np.array([35.0, 80.0, 15.0])
    exact = []
    for draw in itertools.product(range(3), repeat=3):
        idx = list(draw)
        count = tokens[idx].sum()
        exact.append(math.exp(nll_a[idx].sum() / count) / math.exp(nll_b[idx].sum() / count))
    exact = np.array(exact)
    for level in (0.5, 0.8):
        result = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=40000, level=level,
                                  resample_seeds=False, seed=3)
        tail = (1 - level) / 2
        # A quantile q of a discrete distribution: P(X < q) <= tail <= P(X <= q)
        # (with Monte Carlo slack; the interpolated percentile lies between atoms).
        for value, prob in ((result.low, tail), (result.high, 1 - tail)):
            assert np.mean(exact < value - 1e-9) <= prob + 0.01
            assert np.mean(exact <= value + 1e-9) >= prob - 0.01
            below = exact[exact <= value + 1e-9].max()
            above = exact[exact >= value - 1e-9].min()
            assert below <= value <= above


def test_interval_ends_are_the_exact_bootstrap_quantiles_at_its_level():
    # Six documents: the 6^6 = 46,656 equally likely ordered draws are the exact bootstrap
    # distribution, fine enough that the ends must sit between its quantiles at
    # (1 - level) / 2 +- 0.01 (and 1 minus that): a wrong tail (e.g. (1 - level) / 3) fails.
    tokens = np.array([10.0, 20.0, 5.0, 15.0, 8.0, 12.0])
    nll_a = np.array([30.0, 90.0, 25.0, 61.0, 33.0, 40.0])
    nll_b = np.array([35.0, 80.0, 15.0, 66.0, 30.0, 49.0])
    draws = np.array(list(itertools.product(range(6), repeat=6)))
    exact = np.exp(nll_a[draws].sum(1) / tokens[draws].sum(1)
                   - nll_b[draws].sum(1) / tokens[draws].sum(1))
    for level in (0.5, 0.9):
        result = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=40000, level=level,
                                  resample_seeds=False, seed=5)
        tail = (1 - level) / 2
        for value, q in ((result.low, tail), (result.high, 1 - tail)):
            assert np.quantile(exact, q - 0.01) <= value <= np.quantile(exact, q + 0.01), \
                (level, q, value)


def test_interval_covers_the_true_ratio_at_its_level():
    # Documents drawn from a population where model A's per-token NLL is 0.05
    # nats lower on average: true ratio exp(-0.05) (equal document lengths).
    rng = np.random.default_rng(7)
    truth = math.exp(-0.05)
    covered = 0
    trials = 150
    for trial in range(trials):
        tokens = np.full(80, 25.0)
        base = rng.normal(4.5, 0.4, size=80)
        gap = rng.normal(0.05, 0.3, size=80)
        nll_b = base * tokens
        nll_a = (base - gap) * tokens
        result = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=400, level=0.9,
                                  resample_seeds=False, seed=trial)
        covered += result.low <= truth <= result.high
    assert 0.82 <= covered / trials <= 0.97


def test_identical_models_are_inconclusive_and_a_clear_gap_is_decided():
    tokens = np.full(40, 10.0)
    rng = np.random.default_rng(0)
    nll = rng.uniform(30, 50, size=40)
    same = paired_bootstrap(nll, nll, tokens, num_resamples=200)
    assert same.ratio == pytest.approx(1.0)
    assert same.verdict == "inconclusive"
    better = paired_bootstrap(nll - 2.0, nll, tokens, num_resamples=200)
    assert better.verdict == "A better" and better.high < 1.0
    worse = paired_bootstrap(nll + 2.0, nll, tokens, num_resamples=200)
    assert worse.verdict == "B better" and worse.low > 1.0


def test_seed_spread_widens_the_interval():
    # Documents agree exactly; the seeds of A disagree: only seed resampling
    # can see that the 2% gain is within A's seed-to-seed spread.
    tokens = np.full(60, 20.0)
    nll_b = np.full((3, 60), 4.0 * 20)
    shifts = np.array([-0.08, 0.0, 0.02])[:, None]
    nll_a = (4.0 - 0.02 + shifts) * 20 * np.ones((3, 60))
    without = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000,
                               resample_seeds=False)
    with_seeds = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000)
    assert without.verdict == "A better"
    assert with_seeds.high - with_seeds.low > 5 * (without.high - without.low)
    assert with_seeds.verdict == "inconclusive"


def test_two_seeds_are_resampled_too():
    # Two seeds far apart: resampling them (with replacement: both, one or the other)
    # widens the interval; without it only the documents vary.
    tokens = np.full(40, 20.0)
    rng = np.random.default_rng(3)
    base = rng.uniform(3.9, 4.1, size=40) * tokens
    nll_a = np.stack([base - 0.1 * tokens, base + 0.1 * tokens])
    nll_b = np.stack([base, base])
    with_seeds = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=500)
    without = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=500, resample_seeds=False)
    assert with_seeds.high - with_seeds.low > 5 * (without.high - without.low)


def test_unequal_seed_counts_keep_the_interval_around_the_ratio():
    # 3 seeds of A against 2 of B: each model's resampled seed mean is a mean (weights
    # summing to 1), so the interval stays around the point ratio.
    tokens, nll_a, nll_b = _random_nll(4, 50, 3.9, 4.1)
    result = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=500)
    assert result.low < result.ratio < result.high
    assert result.high / result.low < 1.1


def test_edge_cases_that_are_valid_input():
    # One document; a document without targets (weight 0); one resample; one token in all.
    one = paired_bootstrap([4.0], [5.0], [1.0], num_resamples=1)
    assert one.ratio == pytest.approx(math.exp(4.0) / math.exp(5.0))
    assert one.low == one.high == pytest.approx(one.ratio)
    empty_doc = paired_bootstrap([4.0, 0.0], [5.0, 0.0], [2.0, 0.0], num_resamples=20)
    assert empty_doc.ratio == pytest.approx(math.exp(2.0) / math.exp(2.5))


@pytest.mark.parametrize("kwargs, message", [
    ({"nll_a": np.ones((2, 4))}, "nll_a: expected"),
    ({"tokens": np.zeros(3)}, "positive total"),
    ({"tokens": np.array([])}, "non-empty vector"),
    ({"tokens": np.array([2.0, -1.0, 1.0])}, "counts must be >= 0"),
    ({"num_resamples": 0}, "num_resamples"),
    ({"level": 1.0}, "level"),
    ({"nll_b": np.array([1.0, np.nan, 1.0])}, "non-finite"),
])
def test_bad_input_is_refused_with_the_argument_named(kwargs, message):
    args = {"nll_a": np.ones(3), "nll_b": np.ones(3), "tokens": np.ones(3)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(**args)


def test_seed_summary_is_mean_and_sample_sd():
    summary = seed_summary([1.0, 2.0, 4.0])
    assert summary["mean"] == pytest.approx(7 / 3)
    assert summary["sd"] == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1))
    assert seed_summary([1.0, 3.0])["sd"] == pytest.approx(math.sqrt(2.0))   # two seeds
    assert seed_summary([5.0]) == {"mean": 5.0, "sd": 0.0, "n": 1}


def test_defaults_are_2000_resamples_and_seed_0_so_a_verdict_is_reproducible():
    tokens, nll_a, nll_b = _random_nll(5, 25, 3.0, 5.0)
    default = paired_bootstrap(nll_a, nll_b, tokens)
    assert default.num_resamples == 2000 and default.level == 0.95 and default.resample_seeds
    explicit = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000, seed=0)
    assert (default.low, default.high) == (explicit.low, explicit.high)
    other = paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000, seed=1)
    assert (default.low, default.high) != (other.low, other.high)
