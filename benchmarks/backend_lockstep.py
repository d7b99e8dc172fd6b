"""The plain Keras LSTM LM on JAX and on TensorFlow, timed in lock-step on a shared machine.

A JAX process, a TensorFlow process and a TensorFlow process with ``jit_compile=True`` (the
backend is fixed per process; Keras resolves ``jit_compile="auto"`` to XLA on JAX and, for an
LSTM, to a plain TF graph on TensorFlow) each build the
models of `benchmarks.lstm_backend_gap` once and compile them (one untimed epoch); then, round
after round, the coordinator asks each in turn to time one epoch of one variant, alternating
which backend goes first. Each round's JAX ÷ TensorFlow (and TensorFlow-XLA ÷ TensorFlow) tokens/s ratio is taken over the same
minute of the machine, so a load that drifts over minutes (other processes, throttling)
cancels in the ratio; the record keeps every round and the median with its interquartile
range. Variants:

* ``base``: Embedding(10k, 256) -> LSTM(256) -> Dense(10k), batch 64 x 30;
* ``no_recurrence``: the LSTM replaced by Dense(256): the embedding and 10k softmax alone;
* ``recurrence``: the LSTM with a 256-way softmax instead of 10k: the time loop alone;
* ``matmul``: one [1920 x 256] x [256 x 10k] product (the output layer's forward), jitted.

    python -m benchmarks.backend_lockstep --rounds 12 --out R.json
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

VARIANTS = ("base", "no_recurrence", "recurrence", "matmul")


def _child():
    """Serve timings on stdin/stdout: a variant name in, its tokens/s (or GFLOP/s) out."""
    import keras

    from benchmarks.lstm_backend_gap import EMBED, HIDDEN, STEPS_T, VOCAB

    batch, batches = 64, int(os.environ.get("LOCKSTEP_BATCHES", "6"))
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCAB, size=(batches * batch, STEPS_T + 1)).astype(np.int32)
    runs = {}
    for variant in VARIANTS[:3]:
        keras.utils.set_random_seed(0)
        middle = (keras.layers.Dense(HIDDEN, activation="tanh") if variant == "no_recurrence"
                  else keras.layers.LSTM(HIDDEN, return_sequences=True))
        out = 256 if variant == "recurrence" else VOCAB
        model = keras.Sequential([keras.Input((STEPS_T,), dtype="int32"),
                                  keras.layers.Embedding(VOCAB, EMBED), middle,
                                  keras.layers.Dense(out)])
        model.compile(optimizer="adam",
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=True if os.environ.get("LOCKSTEP_JIT") else "auto")
        fit = dict(x=ids[:, :-1], y=ids[:, 1:] % out, batch_size=batch, verbose=0,
                   shuffle=False, epochs=1)
        model.fit(**fit)  # compile
        runs[variant] = (model, fit)
    x = keras.ops.convert_to_tensor(rng.normal(size=(batch * STEPS_T, HIDDEN)).astype("f4"))
    w = keras.ops.convert_to_tensor(rng.normal(size=(HIDDEN, VOCAB)).astype("f4"))
    if keras.backend.backend() == "jax":
        import jax
        product = jax.jit(lambda a, b: a @ b)
        matmul = lambda: jax.block_until_ready(product(x, w))  # noqa: E731
    else:
        import tensorflow as tf
        product = tf.function(lambda a, b: tf.matmul(a, b),
                              jit_compile=bool(os.environ.get("LOCKSTEP_JIT")))
        matmul = lambda: product(x, w).numpy()  # noqa: E731
    matmul()
    print("ready", flush=True)
    for line in sys.stdin:
        variant = line.strip()
        start = time.perf_counter()
        if variant == "matmul":
            for _ in range(5):
                matmul()
            value = 5 * 2 * batch * STEPS_T * HIDDEN * VOCAB / (time.perf_counter() - start) / 1e9
        else:
            model, fit = runs[variant]
            model.fit(**fit)
            value = batches * batch * STEPS_T / (time.perf_counter() - start)
        print(json.dumps(value), flush=True)


#: The timed processes: name -> (Keras backend, XLA-compile the TensorFlow train step).
PROCESSES = {"jax": ("jax", False), "tensorflow": ("tensorflow", False),
             "tensorflow_xla": ("tensorflow", True)}


def _spawn(name):
    backend, jit = PROCESSES[name]
    env = dict(os.environ, KERAS_BACKEND=backend)
    env.pop("LOCKSTEP_JIT", None)
    if jit:
        env["LOCKSTEP_JIT"] = "1"
    root = pathlib.Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.backend_lockstep", "--child"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env, cwd=root)
    while child.stdout.readline().strip() != "ready":
        if child.poll() is not None:
            raise SystemExit(f"the {name} process ended before it was ready")
    return child


def _ask(child, variant):
    child.stdin.write(variant + "\n")
    child.stdin.flush()
    return json.loads(child.stdout.readline())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", help="write the record here (JSON)")
    args = parser.parse_args(argv)
    if args.child:
        return _child()
    children = {name: _spawn(name) for name in PROCESSES}
    rounds = {v: [] for v in VARIANTS}
    for r in range(int(args.rounds)):
        for variant in VARIANTS:
            order = list(PROCESSES)[r % 3:] + list(PROCESSES)[:r % 3]  # who goes first rotates
            value = {name: _ask(children[name], variant) for name in order}
            rounds[variant].append(value)
        print(r, {v: (round(x[-1]["jax"] / x[-1]["tensorflow"], 3),
                      round(x[-1]["tensorflow_xla"] / x[-1]["tensorflow"], 3))
                  for v, x in rounds.items()}, flush=True)
    for child in children.values():
        child.stdin.close()
        child.wait()
    result = {"rounds": int(args.rounds), "cpu_count": os.cpu_count(),
              "threads": os.environ.get("TF_NUM_INTRAOP_THREADS"),
              "xla_flags": os.environ.get("XLA_FLAGS"), "unit": "tokens/s (matmul: GFLOP/s)"}
    for variant, values in rounds.items():
        entry = {"per_round": values}
        for name in PROCESSES:
            entry[f"{name}_median"] = float(np.median([v[name] for v in values]))
            if name != "tensorflow":
                ratio = np.array([v[name] / v["tensorflow"] for v in values])
                entry[f"{name}_over_tensorflow"] = {
                    "median": float(np.median(ratio)), "q25": float(np.quantile(ratio, 0.25)),
                    "q75": float(np.quantile(ratio, 0.75))}
        result[variant] = entry
    print(json.dumps({v: {k: result[v][k]["median"] for k in result[v] if k.endswith("_over_tensorflow")}
                      for v in VARIANTS}))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
