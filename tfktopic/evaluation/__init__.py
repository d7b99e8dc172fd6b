"""Evaluation: perplexity, NPMI topic coherence, test-BLEU and self-BLEU."""

from tfktopic.evaluation.bleu import (
    BleuScorer,
    SelfBleuScorer,
    bleu_against_references,
    bleu_report,
    self_bleu,
)
from tfktopic.evaluation.coherence import (
    CoherenceResult,
    ReferenceCounts,
    npmi_coherence,
    npmi_from_counts,
    topic_diversity,
)
from tfktopic.evaluation.perplexity import (
    Perplexity,
    PerplexityResult,
    evaluate_perplexity,
    gather_real_positions,
    gathered_token_nll,
    masked_token_nll,
    unigram_perplexity,
)
