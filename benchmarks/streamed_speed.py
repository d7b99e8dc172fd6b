"""Training speed from a prepared directory ÷ from the corpus in memory (issue 50's target: >= 0.95).

One process, one model family: the corpus is read into memory (`tfktopic.runs.data.prepare_data`,
the ``tfktopic train --corpus`` path) and prepared into shards (`tfktopic prepare`, the
``tfktopic train --prepared`` path) with the same settings, so both give the same
vocabularies and examples; two models of the same seed are built, one per path, and then
trained in interleaved rounds: one timed "epoch" of `--steps` steps from each training stream
(``model.fit(stream, steps_per_epoch=...)``), alternating which goes first. The ratio of each
round's steps/s (prepared ÷ in memory) is taken over the same minute of the machine, so a
drifting load cancels; the record keeps every round and the median with its interquartile range.

Both models first train `--warmup-steps` steps of their stream, untimed. On TensorFlow the
training cross-entropy is one XLA program per bucket of 64 gathered positions
(`tfktopic.evaluation.cross_entropy.ROW_BUCKET`), compiled once per process: without the
warm-up the model that meets a bucket first pays its compilation inside a timed round
(rGBN-RNN on Lee, 8 x 30 positions a chunk: 13 compilations of about 2.4 s in its first 33
steps; none with ``TFKTOPIC_XLA_LOOPS=0``).

    TF_NUM_INTRAOP_THREADS=1 python -m benchmarks.streamed_speed --model lstm --imdb 2000 \
        --rounds 8 --out R.json
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np


def _fit_seconds(model, stream, steps):
    start = time.perf_counter()
    model.fit(stream, steps_per_epoch=steps, epochs=1, verbose=0)
    return time.perf_counter() - start


def measure(model_name, corpus, format, rounds, steps, batch_size, max_size, directory,
            model_settings=None, warmup_steps=100):
    import keras

    from benchmarks.data_scale import imdb_subset
    from tfktopic.runs.data import prepare_data
    from tfktopic.runs.prepared import load_prepared
    from tfktopic.runs.settings import preset_settings
    from tfktopic.runs.training import build_model

    settings = preset_settings(model_name)
    settings["data"].update(max_size=max_size, min_count=3)
    settings["model"].update(model_settings or {})
    if corpus.startswith("imdb:"):
        path = pathlib.Path(directory) / "imdb.jsonl.gz"
        imdb_subset(path, int(corpus.split(":")[1]))
        corpus, format = str(path), "imdb"
    elif corpus == "lee":  # as a TDLM file: `tfktopic prepare` reads files
        from tfktopic.data import load_corpus

        path = pathlib.Path(directory) / "lee.txt"
        path.write_text("".join("\t".join(" ".join(s) for s in document) + "\n"
                                for document in load_corpus("lee")), encoding="utf-8")
        corpus, format = str(path), "tdlm"
    out = pathlib.Path(directory) / "prepared"
    data = settings["data"]
    subprocess.run([sys.executable, "-m", "tfktopic", "prepare", corpus, "--format", format,
                    "--out", str(out), "--min-count", "3", "--max-size", str(max_size),
                    "--train-context", str(data.get("train_context", "all_other")),
                    "--kinds", "sentences", "streams"], check=True, capture_output=True)
    memory = prepare_data(settings, corpus, format, seed=0)
    prepared = load_prepared(out, model_name, dict(settings["data"]))
    assert len(memory.lm_vocab) == len(prepared.lm_vocab), "the two paths' vocabularies differ"
    models, streams = {}, {}
    for name, rundata in (("memory", memory), ("prepared", prepared)):
        models[name] = build_model(settings, rundata, seed=0)
        streams[name], epoch = rundata.training_stream(batch_size, seed=0)
        _fit_seconds(models[name], streams[name], min(steps, epoch))  # compile
    for name in models:  # the XLA row buckets both streams meet (module docstring)
        _fit_seconds(models[name], streams[name], int(warmup_steps))
    per_round = []
    for r in range(int(rounds)):
        order = ("memory", "prepared") if r % 2 == 0 else ("prepared", "memory")
        seconds = {name: _fit_seconds(models[name], streams[name], steps) for name in order}
        per_round.append(seconds)
        print(r, {k: round(v, 2) for k, v in seconds.items()}, flush=True)
    ratio = np.array([s["memory"] / s["prepared"] for s in per_round])
    return {"model": model_name, "corpus": corpus, "steps_per_round": int(steps),
            "batch_size": int(batch_size), "max_size": int(max_size),
            "warmup_steps": int(warmup_steps),
            "model_settings": dict(settings["model"]),
            "examples": len(memory.examples["train"]), "backend": keras.backend.backend(),
            "prepared_over_memory": {"median": float(np.median(ratio)),
                                     "q25": float(np.quantile(ratio, 0.25)),
                                     "q75": float(np.quantile(ratio, 0.75))},
            "per_round_s": per_round}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lstm")
    parser.add_argument("--corpus", default="lee", help="lee, a corpus path, or imdb:N")
    parser.add_argument("--format", default=None)
    parser.add_argument("--imdb", type=int, help="the first N IMDB reviews (as --corpus imdb:N)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-size", type=int, default=10000)
    parser.add_argument("--warmup-steps", type=int, default=100,
                        help="untimed steps of each model before the rounds (XLA buckets)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=INT",
                        help="a model size (e.g. hidden_dim=16), as tfktopic train --set")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    model_settings = {}
    for item in args.set:
        key, _, value = item.partition("=")
        if not value.lstrip("-").isdigit():
            parser.error(f"--set {item}: expected KEY=INT")
        model_settings[key] = int(value)
    corpus = f"imdb:{args.imdb}" if args.imdb else args.corpus
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.model, corpus, args.format,
                         args.rounds, args.steps, args.batch_size, args.max_size, tmp,
                         model_settings, args.warmup_steps)
    print(json.dumps({k: result[k] for k in ("model", "prepared_over_memory")}))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
