"""Training speed (tokens/s of `model.fit`) of an LSTM LM under the running Keras backend.

Two models of the same size (E256 / H256, vocabulary 10k, batches of 64 x 30 random
ids): a plain Keras LSTM LM (Embedding, LSTM, Dense, sparse cross-entropy, stock
`compile`/`fit`) and tfktopic's ``lstm`` model (`LSTMLanguageModel`, the base class's
own train step). Run it once per backend; the backend is fixed by ``KERAS_BACKEND``
at the first `import keras`, so each run measures one:

    KERAS_BACKEND=tensorflow python -m benchmarks.backend_speed --out tf.json
    KERAS_BACKEND=jax python -m benchmarks.backend_speed --out jax.json

The first epoch (tracing / compiling) is timed apart from the next ones; tokens/s is
over the timed epochs (all 64 x 30 positions count as tokens).
"""

import argparse
import json
import os
import time

import keras
import numpy as np

VOCAB, EMBED, HIDDEN, BATCH, STEPS_T = 10_000, 256, 256, 64, 30


def _data(batches, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, VOCAB, size=(batches * BATCH, STEPS_T + 1)).astype(np.int32)
    return tokens[:, :-1], tokens[:, 1:]


def plain_keras(batches):
    """The stock Keras LSTM LM: (model, fit arguments)."""
    model = keras.Sequential([keras.Input((STEPS_T,), dtype="int32"),
                              keras.layers.Embedding(VOCAB, EMBED),
                              keras.layers.LSTM(HIDDEN, return_sequences=True),
                              keras.layers.Dense(VOCAB)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _data(batches)
    return model, {"x": x, "y": y}


def tfktopic_lstm(batches):
    """tfktopic's ``lstm`` model of the same size: (model, fit arguments)."""
    from tfktopic.models.lstm_lm import LSTMLanguageModel

    model = LSTMLanguageModel(VOCAB, EMBED, HIDDEN)
    model.compile(optimizer="adam")
    x, y = _data(batches)
    return model, {"x": {"tokens": x, "targets": y, "mask": np.ones(y.shape, np.float32)}}


def measure(build, batches, epochs):
    """(first epoch's seconds, timed epochs' tokens/s)."""
    keras.utils.set_random_seed(0)
    model, data = build(batches)
    start = time.perf_counter()
    model.fit(**data, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    first = time.perf_counter() - start
    start = time.perf_counter()
    model.fit(**data, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    return first, batches * epochs * BATCH * STEPS_T / seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--batches", type=int, default=20, help="batches per epoch")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs")
    parser.add_argument("--models", default="plain,tfktopic",
                        help="comma-separated: plain, tfktopic")
    args = parser.parse_args(argv)
    builders = {"plain": plain_keras, "tfktopic": tfktopic_lstm}
    result = {"backend": keras.backend.backend(), "batches": args.batches,
              "epochs": args.epochs, "threads": os.environ.get("TF_NUM_INTRAOP_THREADS"),
              "xla_flags": os.environ.get("XLA_FLAGS")}
    for name in args.models.split(","):
        try:
            first, rate = measure(builders[name], args.batches, args.epochs)
            result[name] = {"first_epoch_s": round(first, 2), "tokens_per_s": round(rate, 1)}
        except Exception as error:   # e.g. a model that does not run on this backend yet
            result[name] = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        print(name, result[name], flush=True)
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
