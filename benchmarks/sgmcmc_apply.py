"""The SG-MCMC update alone: `optimizer.apply` time of pSGLD ÷ RMSprop and SGLD ÷ SGD.

The variables of the PTB-small LSTM LM (2 layers, hidden 200, V 10k: 4.65 M weights), fixed
random gradients, each optimizer's `apply` in a `tf.function`; the four optimizers are timed
in interleaved rounds in one process and the ratios are medians of the per-round ratios, so a
shared machine's load cancels. Isolates the Langevin noise draw (the train step's other costs
are the same for an optimizer and its deterministic twin). It imports only the package's
public API, so it times any checkout: ``PYTHONPATH=CHECKOUT python benchmarks/sgmcmc_apply.py``.

    TF_NUM_INTRAOP_THREADS=1 python -m benchmarks.sgmcmc_apply --out R.json
"""

import argparse
import json
import pathlib
import subprocess
import time

import keras
import numpy as np


def _commit():
    try:
        import tfktopic
        root = pathlib.Path(tfktopic.__file__).resolve().parents[1]
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None


def measure(rounds=25, repeats=5, vocab=10_000, hidden=200):
    """Median apply seconds per optimizer and the two ratios (see the module docstring)."""
    import tensorflow as tf

    from tfktopic.bayes import PSGLD, SGLD
    from tfktopic.models import LSTMLanguageModel

    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(vocab, embedding_dim=hidden, hidden_dim=hidden, num_layers=2)
    model({"tokens": np.zeros((2, 20), "int32")})
    rng = np.random.default_rng(0)
    grads = [tf.constant(rng.normal(size=v.shape).astype("float32") * 1e-3)
             for v in model.trainable_variables]
    makers = {"rmsprop": lambda: keras.optimizers.RMSprop(1e-3, rho=0.99),
              "psgld": lambda: PSGLD(1e-3, num_examples=900_000, seed=0),
              "sgd": lambda: keras.optimizers.SGD(1.0),
              "sgld": lambda: SGLD(1.0, num_examples=900_000, seed=0)}
    steps = {}
    for name, make in makers.items():
        optimizer = make()
        variables = [tf.Variable(v) for v in model.trainable_variables]
        optimizer.build(variables)
        step = tf.function(lambda o=optimizer, vs=variables: o.apply(grads, vs))
        step(), step()  # trace, compile, warm up
        steps[name] = step
    times = {name: [] for name in makers}
    for _ in range(int(rounds)):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(int(repeats)):
                step()
            times[name].append((time.perf_counter() - start) / int(repeats))

    def ratio(a, b):
        return float(np.median(np.asarray(times[a]) / np.asarray(times[b])))

    return {"psgld_over_rmsprop": ratio("psgld", "rmsprop"), "sgld_over_sgd": ratio("sgld", "sgd"),
            "median_apply_s": {n: float(np.median(t)) for n, t in times.items()},
            "config": {"vocab_size": vocab, "hidden_dim": hidden, "num_layers": 2,
                       "weights": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
                       "rounds": int(rounds), "repeats": int(repeats)},
            "commit": _commit(), "backend": keras.backend.backend()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--out", help="write the record here (JSON)")
    args = parser.parse_args()
    result = measure(rounds=args.rounds)
    print(json.dumps(result))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
