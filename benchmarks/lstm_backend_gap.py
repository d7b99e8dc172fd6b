"""Why a plain Keras LSTM LM trains slower on JAX than on TensorFlow on a CPU.

One process per backend (the backend is fixed at the first `import keras`); inside it the
variants below are run round-robin `--repeats` times under the same conditions, and each
variant's median tokens/s (over the timed epochs, the first, compiling epoch excluded) and
median first-epoch seconds are written to `--out`:

* ``base``: Embedding(10k, 256) -> LSTM(256) -> Dense(10k), batch 64 x 30 (as
  `benchmarks.backend_speed`);
* ``unroll``: the same with ``LSTM(unroll=True)`` (no loop over time: 30 copies of the cell);
* ``no_recurrence``: the LSTM replaced by a Dense(256) of the same input / output sizes (the
  embedding and 10k softmax work without the time loop: what is left is the recurrence's cost);
* ``batch256``: ``base`` with batches of 256 x 30 (per-step overheads amortised).

    KERAS_BACKEND=tensorflow python -m benchmarks.lstm_backend_gap --out tf.json
    KERAS_BACKEND=jax python -m benchmarks.lstm_backend_gap --out jax.json
"""

import argparse
import json
import os
import statistics
import time

import keras
import numpy as np

VOCAB, EMBED, HIDDEN, STEPS_T = 10_000, 256, 256, 30


def build(variant):
    """The plain Keras LSTM LM of `variant`, compiled with Adam."""
    middle = (keras.layers.Dense(HIDDEN, activation="tanh") if variant == "no_recurrence"
              else keras.layers.LSTM(HIDDEN, return_sequences=True,
                                     unroll=variant == "unroll"))
    model = keras.Sequential([keras.Input((STEPS_T,), dtype="int32"),
                              keras.layers.Embedding(VOCAB, EMBED), middle,
                              keras.layers.Dense(VOCAB)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def measure(variant, batches):
    """(first epoch's seconds, timed epoch's tokens/s) of one fresh model."""
    batch = 256 if variant == "batch256" else 64
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCAB, size=(batches * batch, STEPS_T + 1)).astype(np.int32)
    keras.utils.set_random_seed(0)
    model = build(variant)
    fit = dict(x=ids[:, :-1], y=ids[:, 1:], batch_size=batch, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(epochs=1, **fit)
    first = time.perf_counter() - start
    start = time.perf_counter()
    model.fit(epochs=1, **fit)
    return first, batches * batch * STEPS_T / (time.perf_counter() - start)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--batches", type=int, default=10, help="batches per timed epoch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default="base,unroll,no_recurrence,batch256")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    runs = {v: [] for v in variants}
    for _ in range(args.repeats):
        for variant in variants:
            runs[variant].append(measure(variant, args.batches))
            print(variant, runs[variant][-1], flush=True)
    result = {"backend": keras.backend.backend(), "batches": args.batches,
              "repeats": args.repeats, "xla_flags": os.environ.get("XLA_FLAGS"),
              "threads": os.environ.get("TF_NUM_INTRAOP_THREADS")}
    for variant, values in runs.items():
        result[variant] = {"first_epoch_s": round(statistics.median(v[0] for v in values), 2),
                           "tokens_per_s": round(statistics.median(v[1] for v in values), 1),
                           "all_tokens_per_s": [round(v[1], 1) for v in values]}
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
