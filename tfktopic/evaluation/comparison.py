"""Paired comparison of two language models' perplexities (DESIGN.md §5a).

A verdict "model A beats model B" rests on the ratio of their test
perplexities, on the same target tokens, with an interval that accounts for
both sources of chance in it:

* **the test set**: the documents are a sample; resampling them *paired*
  (the same documents for both models) gives the document-level bootstrap;
* **the training run**: each model is trained with several seeds; resampling
  the seeds of each model (independently: seed ``s`` of A has nothing to do
  with seed ``s`` of B) adds the seed-to-seed spread.

For one bootstrap replicate with document multiset D* and seed multisets
S*_A, S*_B the statistic is

    r* = mean_{s in S*_A} PPL_s^A(D*) / mean_{s in S*_B} PPL_s^B(D*),
    PPL_s(D*) = exp( sum_{d in D*} NLL_{s,d} / sum_{d in D*} N_d ),

and the interval is the percentile interval of r*. The point estimate is r
on the full data (mean perplexity over seeds, ratio of the means). A ratio
whose interval contains 1 is **inconclusive**, never a win.

Example:
>>> import numpy as np
>>> tokens = np.full(50, 20.0)
>>> a = np.full((3, 50), 20 * 4.0)     # every doc: 4.0 nats per token
>>> b = np.full((3, 50), 20 * 4.2)
>>> result = paired_bootstrap(a, b, tokens, num_resamples=200)
>>> round(result.ratio, 4), result.verdict
(0.8187, 'A better')
"""

import dataclasses

import numpy as np

__all__ = ["PerplexityComparison", "paired_bootstrap", "seed_summary"]


@dataclasses.dataclass(frozen=True)
class PerplexityComparison:
    """The ratio PPL(A) / PPL(B) with its bootstrap interval.

    Attributes:
        ratio: mean-over-seeds perplexity of A / that of B, on all documents.
        low, high: the percentile interval of the ratio at `level`.
        level: the interval's coverage (e.g. 0.95).
        num_resamples: bootstrap replicates.
        resample_seeds: whether seeds were resampled too.
        ppl_a, ppl_b: per-seed test perplexities of A and B (all documents).
        verdict: "A better" (high < 1), "B better" (low > 1) or "inconclusive".
    """

    ratio: float
    low: float
    high: float
    level: float
    num_resamples: int
    resample_seeds: bool
    ppl_a: tuple
    ppl_b: tuple
    verdict: str

    def as_dict(self):
        """A JSON-ready dict of the fields."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()}


def _as_seed_matrix(nll, num_documents, name):
    nll = np.asarray(nll, dtype=np.float64)
    if nll.ndim == 1:
        nll = nll[None, :]
    if nll.ndim != 2 or nll.shape[1] != num_documents:
        raise ValueError(f"{name}: expected per-document NLL sums of shape [seeds, "
                         f"{num_documents}] (or [{num_documents}]), got {nll.shape}")
    if not np.all(np.isfinite(nll)):
        raise ValueError(f"{name}: non-finite NLL sums")
    return nll


def _mean_perplexity(nll, doc_weights, tokens):
    """Mean over seeds of exp(sum_d w_d NLL_{s,d} / sum_d w_d N_d).

    Args:
        nll: [S, D] per-document NLL sums of S seeds.
        doc_weights: [R, D] how often each document is drawn in each of R
            replicates (all ones: the full test set).
        tokens: [D] predicted tokens per document.
        (seed weights are applied by the caller.)

    Returns:
        [R, S] perplexities.
    """
    nats = doc_weights @ nll.T                       # [R, S]
    count = doc_weights @ tokens                     # [R]
    return np.exp(nats / count[:, None])


def paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000, level=0.95,
                     resample_seeds=True, seed=0):
    """Bootstrap interval of PPL(A) / PPL(B) over documents (paired) and seeds.

    Args:
        nll_a: [S_A, D] (or [D]) negative log-likelihood sums of model A per
            test document, one row per training seed.
        nll_b: [S_B, D] (or [D]) the same for model B, on the same documents
            and the same target tokens.
        tokens: [D] number of predicted tokens of each document (the same for
            both models: they must score the same targets).
        num_resamples: bootstrap replicates.
        level: coverage of the percentile interval.
        resample_seeds: also resample each model's seeds with replacement
            (when a model has one seed this adds nothing).
        seed: the bootstrap's random seed.

    Returns:
        A `PerplexityComparison`.

    Raises:
        ValueError: shapes disagree, a count is not positive, or a value is
            not finite.
    """
    tokens = np.asarray(tokens, dtype=np.float64)
    if tokens.ndim != 1 or tokens.size == 0:
        raise ValueError(f"tokens: expected a non-empty vector of per-document counts, got "
                         f"shape {tokens.shape}")
    if np.any(tokens < 0) or tokens.sum() <= 0:
        raise ValueError("tokens: counts must be >= 0 with a positive total")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if int(num_resamples) < 1:
        raise ValueError(f"num_resamples must be >= 1, got {num_resamples}")
    num_docs = tokens.size
    nll_a = _as_seed_matrix(nll_a, num_docs, "nll_a")
    nll_b = _as_seed_matrix(nll_b, num_docs, "nll_b")

    ones = np.ones((1, num_docs))
    ppl_a = _mean_perplexity(nll_a, ones, tokens)[0]
    ppl_b = _mean_perplexity(nll_b, ones, tokens)[0]
    ratio = float(ppl_a.mean() / ppl_b.mean())

    rng = np.random.default_rng(seed)
    # Paired documents: one multinomial draw of D documents per replicate.
    doc_weights = rng.multinomial(num_docs, np.full(num_docs, 1.0 / num_docs),
                                  size=int(num_resamples)).astype(np.float64)
    draws_a = _mean_perplexity(nll_a, doc_weights, tokens)       # [R, S_A]
    draws_b = _mean_perplexity(nll_b, doc_weights, tokens)

    def seed_mean(draws):
        num_seeds = draws.shape[1]
        if not resample_seeds or num_seeds == 1:
            return draws.mean(axis=1)
        weights = rng.multinomial(num_seeds, np.full(num_seeds, 1.0 / num_seeds),
                                  size=draws.shape[0]) / num_seeds
        return (draws * weights).sum(axis=1)

    replicate = seed_mean(draws_a) / seed_mean(draws_b)
    tail = (1.0 - level) / 2.0
    low, high = (float(v) for v in np.quantile(replicate, [tail, 1.0 - tail]))
    verdict = "A better" if high < 1.0 else "B better" if low > 1.0 else "inconclusive"
    return PerplexityComparison(ratio=ratio, low=low, high=high, level=float(level),
                                num_resamples=int(num_resamples),
                                resample_seeds=bool(resample_seeds),
                                ppl_a=tuple(float(v) for v in ppl_a),
                                ppl_b=tuple(float(v) for v in ppl_b), verdict=verdict)


def seed_summary(values):
    """Mean and sample standard deviation of per-seed values.

    Args:
        values: a sequence of numbers (e.g. test perplexities of 3 seeds).

    Returns:
        dict with ``mean``, ``sd`` (ddof=1; 0.0 for one value) and ``n``.

    Example:
    >>> seed_summary([78.0, 80.0, 79.0])
    {'mean': 79.0, 'sd': 1.0, 'n': 3}
    """
    values = np.asarray(list(values), dtype=np.float64)
    if values.size == 0:
        raise ValueError("seed_summary: no values")
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return {"mean": float(values.mean()), "sd": sd, "n": int(values.size)}
