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

Per family (``--families``): every tfktopic family of `benchmarks.gpu_check` at one of its
sizes (``--size small``, ``paper``, ``tiny``) on the Lee corpus, timed with `train_on_batch`
(`--steps` after `--warmup`), against a plain Keras LSTM LM of the same vocabulary,
embedding and hidden sizes on the same sentence batches in the same process; one JSON per
backend, then a Markdown table of both:

    KERAS_BACKEND=jax python -m benchmarks.backend_speed --families all --out jax.json
    KERAS_BACKEND=tensorflow python -m benchmarks.backend_speed --families all --out tf.json
    python -m benchmarks.backend_speed report jax.json tf.json --out table.md

Tokens/s there counts predicted (unmasked) targets.
"""

import argparse
import json
import os
import sys
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
    from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel

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


def plain_like(vocab_size, embedding_dim, hidden_dim):
    """A plain Keras LSTM LM of the given sizes, compiled with Adam (sparse cross-entropy
    from logits, weighted by the batch's mask)."""
    model = keras.Sequential([keras.Input((None,), dtype="int32"),
                              keras.layers.Embedding(vocab_size, embedding_dim),
                              keras.layers.LSTM(hidden_dim, return_sequences=True),
                              keras.layers.Dense(vocab_size)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _rate(losses, nlls, tokens, seconds):
    return {"tokens_per_s": round(tokens / seconds, 1), "loss_first": round(losses[0], 4),
            "loss_last": round(losses[-1], 4)}


def family_speeds(families, size_name="small", steps=20, warmup=3, corpus="lee"):
    """Tokens/s of each family and of a plain Keras LSTM LM of the same size.

    Args:
        families: names from `benchmarks.gpu_check.FAMILIES`.
        size_name: a key of `benchmarks.gpu_check.SIZES`.
        steps, warmup: timed and untimed `train_on_batch` steps.
        corpus: `tfktopic.data.load_corpus` name or path.

    Returns:
        dict: ``plain`` (the plain LSTM LM's record) and one record per family with its
        ``tokens_per_s`` and ``vs_plain`` (its tokens/s over the plain model's), or
        ``error``.
    """
    from benchmarks import gpu_check
    from tfktopic.data.corpora import load_corpus

    size = gpu_check.SIZES[size_name]
    data = gpu_check.Data(load_corpus(corpus), size)
    keras.utils.set_random_seed(0)
    plain = plain_like(len(data.lm_vocab), size["embedding"], size["hidden"])
    result = {"plain": _rate(*gpu_check.run_steps(
        plain, data.sentence_batches(), steps, warmup,
        lambda b: {"x": b["tokens"], "y": b["targets"], "sample_weight": b["mask"]})[:4])}
    print("plain", result["plain"], flush=True)
    for family in families:
        try:
            keras.utils.set_random_seed(0)
            model, batches = gpu_check.build(family, data, size)
            entry = _rate(*gpu_check.run_steps(model, batches, steps, warmup)[:4])
            entry["vs_plain"] = round(entry["tokens_per_s"] / result["plain"]["tokens_per_s"], 3)
        except Exception as error:   # e.g. a model that does not run on this backend yet
            entry = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        result[family] = entry
        print(family, entry, flush=True)
    return result


def report(paths, out=None):
    """A Markdown table of family tokens/s per backend from `family_speeds` JSON files.

    Args:
        paths: JSON files written by ``--families`` runs (one per backend).
        out: optional Markdown file to write.

    Returns:
        The table's text.
    """
    records = []
    for path in paths:
        with open(path) as handle:
            records.append(json.load(handle))
    for path, record in zip(paths, records):
        if "families" not in record:
            raise ValueError(f"{path}: not a --families record (no 'families' key)")
    names = ["plain"] + [f for f in records[0]["families"] if f != "plain"]
    header = ["family"] + [f"{r['backend']} tokens/s (x plain)" for r in records]
    lines = [f"Sizes: {records[0]['size']}; {records[0]['steps']} timed steps; "
             + "; ".join(f"{r['backend']}: threads {r.get('threads')}" for r in records), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        cells = [name]
        for record in records:
            entry = record["families"].get(name, {})
            if "tokens_per_s" in entry:
                ratio = f" ({entry['vs_plain']:.2f})" if "vs_plain" in entry else ""
                cells.append(f"{entry['tokens_per_s']:,.0f}{ratio}")
            else:
                cells.append(entry.get("error", "-")[:60])
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as handle:
            handle.write(text)
    return text


def report_main(argv):
    parser = argparse.ArgumentParser(prog="backend_speed report",
                                     description="Markdown table of per-family speeds")
    parser.add_argument("records", nargs="+", help="JSON files of --families runs")
    parser.add_argument("--out", help="Markdown file to write")
    args = parser.parse_args(argv)
    print(report(args.records, args.out), end="")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--batches", type=int, default=20, help="batches per epoch")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs")
    parser.add_argument("--models", default="plain,tfktopic",
                        help="comma-separated: plain, tfktopic")
    parser.add_argument("--families", help="time these tfktopic families (comma-separated, "
                        "or 'all') against a plain Keras LSTM LM of the same size instead")
    parser.add_argument("--size", default="small", help="--families sizes: small, paper, tiny")
    parser.add_argument("--steps", type=int, default=20, help="--families timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="--families untimed steps")
    args = parser.parse_args(argv)
    if args.families:
        from benchmarks import gpu_check
        families = (list(gpu_check.FAMILIES) if args.families == "all"
                    else args.families.split(","))
        unknown = sorted(set(families) - set(gpu_check.FAMILIES))
        if unknown or args.size not in gpu_check.SIZES:
            parser.error(f"--families: unknown {', '.join(unknown)} (choose from "
                         f"{', '.join(gpu_check.FAMILIES)})" if unknown else
                         f"--size: unknown {args.size!r} (choose from "
                         f"{', '.join(gpu_check.SIZES)})")
        result = {"backend": keras.backend.backend(), "size": args.size, "steps": args.steps,
                  "warmup": args.warmup, "threads": os.environ.get("TF_NUM_INTRAOP_THREADS"),
                  "xla_flags": os.environ.get("XLA_FLAGS"),
                  "families": family_speeds(families, args.size, args.steps, args.warmup)}
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)
        return
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
