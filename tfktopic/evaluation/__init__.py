"""Evaluation: perplexity, NPMI topic coherence, test-BLEU and self-BLEU."""

from tfktopic.evaluation.perplexity import (
    Perplexity,
    PerplexityResult,
    evaluate_perplexity,
    masked_token_nll,
)
