"""Training speed of every model against a plain Keras LSTM LM (DESIGN.md §7).

    python -m benchmarks.speed --mode medium --models tcnlm --out benchmarks/results/medium/x.json
    python -m benchmarks.run_all --quick    # every benchmark, then BENCHMARKS.md
"""

import importlib

from benchmarks.common import run

FAMILIES = ("benchmarks.sgmcmc", "benchmarks.topic_models", "benchmarks.topicrnn_ptb",
            "benchmarks.rgbn")


def registries(kind):
    found = []
    for name in FAMILIES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            continue
        found.append(getattr(module, kind, {}))
    return found


if __name__ == "__main__":
    run("speed", registries("SPEED"))
