"""Perplexity, coherence and BLEU of every model on real corpora (DESIGN.md §7).

    python -m benchmarks.quality --mode medium --models tcnlm --out benchmarks/results/medium/x.json
"""

from benchmarks.common import run
from benchmarks.speed import registries

if __name__ == "__main__":
    run("quality", registries("QUALITY"))
