"""Training speed of every model against a plain Keras LSTM LM (DESIGN.md §7).

    python -m benchmarks.speed --mode medium --models tcnlm --out benchmarks/results/medium/x.json
    python -m benchmarks.run_all --quick    # every benchmark, then docs/results/benchmarks.md
"""

from benchmarks import rgbn, sgmcmc, topic_models, topicrnn_ptb
from benchmarks.common import run

#: The benchmark families (module name -> module), each with ``SPEED`` / ``QUALITY``.
MODULES = {"benchmarks.sgmcmc": sgmcmc, "benchmarks.topic_models": topic_models,
           "benchmarks.topicrnn_ptb": topicrnn_ptb, "benchmarks.rgbn": rgbn}
FAMILIES = tuple(MODULES)


def registries(kind):
    """The ``SPEED`` or ``QUALITY`` dicts of every family."""
    return [getattr(module, kind, {}) for module in MODULES.values()]


if __name__ == "__main__":
    run("speed", registries("SPEED"))
