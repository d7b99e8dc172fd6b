"""Peak memory and throughput of the in-memory vs the streamed (sharded) data path.

Each measurement runs in a fresh subprocess (peak RSS = its ru_maxrss):

* ``memory``  -- read_tdlm + vocabularies + sentence_examples (today's path);
* ``streamed`` -- shards.prepare_directory (one counting pass + one writing pass)
  followed by one epoch of the ShardReader (bounded buffer, BoW per batch).

* ``streamed_train`` -- as ``streamed``, then 50 training steps of a small LSTM LM fed
  by the reader through `tf_dataset` (the model and its runtime on top of the data).
* ``prepare`` -- ``tfktopic prepare`` alone (a subprocess; its time, disk and own peak RSS):
  the preparation of corpora far larger than memory.
* ``train`` -- ``tfktopic prepare`` (a subprocess, timed, its own peak RSS recorded as
  ``prepare_peak_rss_mb``) and then the
  whole ``tfktopic train lstm --prepared DIR`` run (--train-epochs epochs of a tiny LSTM:
  training, validation, test scoring, samples): the peak RSS of the run.
* ``prepare_steps`` -- ``tfktopic prepare`` (as ``train``), then --train-steps steps of
  the tiny LSTM (batch 256) from the shuffled training shards, the peak RSS after every 100
  steps: training on a corpus whose in-memory examples would not fit, with flat memory.
* ``train_memory`` -- the same run from the corpus in memory (``tfktopic train lstm
  --corpus FILE``), for comparison.

Corpora: synthetic TDLM files (Zipfian words, 20-token sentences, 10 sentences a
document) of the sizes given by --tokens, and the first N reviews of IMDB (all splits
and labels, file order) given by --imdb. Run with one core:

    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --tokens 1e6 4e6 --out R.json
    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --imdb 25000 50000 100000 \
        --modes memory streamed_train --out R.json
    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --imdb 5000 20000 --modes train \
        train_memory --max-size 5000 --out R.json
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import pathlib

CHILD = r"""
import json, resource, sys, time, pathlib
mode, path, out, format = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
t0 = time.time()
if mode in ("train", "train_memory"):
    from tfktopic.cli import main
    source = (["--prepared", out] if mode == "train" else
              ["--corpus", path, "--format", format, "--set", f"min_count={options['min_count']}",
               *(["--set", f"max_size={options['max_size']}"] if options.get("max_size")
                 else [])])
    code = main(["train", "lstm", *source, "--out", out + "-run", "--epochs",
                 str(options["epochs"]), "--set", "hidden_dim=16", "--set", "embedding_dim=16",
                 "--batch-size", "256", "--verbose", "0"])
    assert code == 0, code
    run = json.loads((pathlib.Path(out + "-run") / "results.json").read_text())
    history = json.loads((pathlib.Path(out + "-run") / "run.json").read_text())["progress"][
        "history"]
    print(json.dumps({"examples": None, "prepare_s": options.get("prepare_s", 0.0),
                      "train_s": time.time() - t0, "total_s": time.time() - t0,
                      "test_ppl": run["test"]["perplexity"],
                      "test_tokens": run["test"]["num_tokens"],
                      "epoch_s": [h["seconds"] for h in history],
                      "disk_bytes": options.get("disk_bytes", 0),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.exit(0)
if mode == "prepare_steps":  # training steps from the prepared shards (already written)
    import numpy as np
    from tfktopic.data import Vocabulary
    from tfktopic.data.shards import ShardReader, tf_dataset
    from tfktopic.models import LSTMLanguageModel
    train = pathlib.Path(out) / "train"
    size = len(Vocabulary.load(train / "lm_vocab.json"))
    model = LSTMLanguageModel(size, embedding_dim=16, hidden_dim=16)
    model.compile(optimizer="adam")
    reader = ShardReader(train, buffer_size=10000, seed=0)
    steps, block = int(options["steps"]), 100
    data = iter(tf_dataset(reader, 256).repeat().prefetch(2))
    rss, seconds, losses = [], [], []
    for start in range(0, steps, block):
        t = time.time()
        for _ in range(min(block, steps - start)):
            losses.append(float(np.ravel(model.train_on_batch(next(data)))[0]))
        seconds.append(time.time() - t)
        rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps({"examples": len(reader), "prepare_s": 0.0, "total_s": time.time() - t0,
                      "steps": steps, "block_steps": block, "block_s": seconds,
                      "peak_rss_mb_by_block": rss, "loss_first_last_100": [
                          float(np.mean(losses[:100])), float(np.mean(losses[-100:]))],
                      "examples_read": reader.position, "epochs_read": reader.epoch, "train_shards": len(reader.shards),
                      "peak_rss_mb": rss[-1]}))
    sys.exit(0)
if mode == "memory":
    from tfktopic.data import read_imdb, read_tdlm, Vocabulary, TopicVocabulary
    from tfktopic.data.contexts import sentence_examples
    corpus = read_tdlm(path) if format == "tdlm" else read_imdb(path)
    lm = Vocabulary.build(corpus, min_count=3)
    topic = TopicVocabulary.build(corpus, lm)
    n = len(sentence_examples(corpus, lm, topic))
    prep = time.time() - t0
else:
    from tfktopic.data.shards import prepare_directory, iter_documents, ShardReader
    prepare_directory(lambda: iter_documents(path, format), out, min_count=3)
    prep = time.time() - t0
    n = sum(len(b["tokens"]) for b in ShardReader(out, buffer_size=10000).batches(64))
    if mode == "streamed_train":
        from tfktopic.data import Vocabulary
        from tfktopic.data.shards import tf_dataset
        from tfktopic.models import LSTMLanguageModel
        size = len(Vocabulary.load(pathlib.Path(out) / "lm_vocab.json"))
        model = LSTMLanguageModel(size, embedding_dim=64, hidden_dim=128)
        model.compile(optimizer="adam")
        data = tf_dataset(ShardReader(out, buffer_size=10000), 64).repeat()
        model.fit(data, steps_per_epoch=50, epochs=1, verbose=0)
disk = sum(f.stat().st_size for f in pathlib.Path(out).glob("*")) if mode != "memory" else 0
print(json.dumps({"examples": n, "prepare_s": prep, "total_s": time.time() - t0,
                  "disk_bytes": disk,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def synthetic(path, num_tokens, seed=0):
    """Write a Zipfian TDLM corpus of about `num_tokens` tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(50000)])
    written = 0
    with open(path, "w", encoding="utf-8") as handle:
        while written < num_tokens:
            ids = np.minimum(rng.zipf(1.2, size=(10, 20)) - 1, len(words) - 1)
            handle.write("\t".join(" ".join(words[row]) for row in ids) + "\n")
            written += ids.size
    return written


def prepare(path, out, format, min_count, max_size=None):
    """``tfktopic prepare`` in a subprocess: (seconds, bytes on disk, its peak RSS in MB)."""
    t0 = time.time()
    size = ["--max-size", str(max_size)] if max_size else []
    child = subprocess.Popen([sys.executable, "-m", "tfktopic", "prepare", str(path), "--format",
                              format, "--out", str(out), "--min-count", str(min_count), *size],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (its peak RSS)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"tfktopic prepare {path} failed: {stderr.decode()[-300:]}")
    seconds = time.time() - t0
    disk = sum(f.stat().st_size for f in pathlib.Path(out).rglob("*") if f.is_file())
    return seconds, disk, usage.ru_maxrss / 1024


def measure(mode, path, out, format="tdlm", options=None):
    options = dict(options or {})
    if mode == "prepare":  # `tfktopic prepare` alone: its time, disk and own peak RSS
        seconds, disk, rss = prepare(path, out, format, options["min_count"],
                                     options.get("max_size"))
        return {"examples": None, "prepare_s": seconds, "total_s": seconds,
                "disk_bytes": disk, "peak_rss_mb": rss}
    if mode in ("train", "prepare_steps"):
        options["prepare_s"], options["disk_bytes"], prepare_rss = prepare(
            path, out, format, options["min_count"], options.get("max_size"))
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(out), format,
                             json.dumps(options)], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{mode} on {path} failed: {result.stderr.strip()[-1500:]}")
    row = json.loads(result.stdout.strip().splitlines()[-1])
    if mode in ("train", "prepare_steps"):
        row["prepare_peak_rss_mb"] = prepare_rss
    if mode == "prepare_steps":
        row.update(prepare_s=options["prepare_s"], disk_bytes=options["disk_bytes"])
    return row


def imdb_subset(path, num_reviews, source=None):
    """Write the first `num_reviews` reviews of IMDB's jsonl.gz to `path`; their tokens."""
    import gzip

    from tfktopic.data.corpora import iter_imdb

    source = source or pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / \
        "imdb" / "aclImdb_reviews.jsonl.gz"
    if not source.exists():
        raise SystemExit(f"IMDB not found at {source}: the shared data folder is absent")
    with gzip.open(source, "rt", encoding="utf-8") as src, \
            gzip.open(path, "wt", encoding="utf-8") as dst:
        for i, line in zip(range(int(num_reviews)), src):
            dst.write(line)
    return sum(len(s) for document in (d for d, _, _ in iter_imdb(path)) for s in document)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=float, nargs="+", default=[])
    parser.add_argument("--imdb", type=int, nargs="+", default=[],
                        help="the first N IMDB reviews (a corpus per N)")
    parser.add_argument("--modes", nargs="+", default=["memory", "streamed"],
                        choices=["memory", "streamed", "streamed_train", "prepare", "train",
                                 "train_memory", "prepare_steps"])
    parser.add_argument("--min-count", type=int, default=3,
                        help="train modes: the LM vocabulary's min_count")
    parser.add_argument("--max-size", type=int, default=None,
                        help="train modes: cap the LM vocabulary (the same model at every "
                             "corpus size: the softmax grows with the vocabulary)")
    parser.add_argument("--train-epochs", type=int, default=1, help="train modes: epochs")
    parser.add_argument("--train-steps", type=int, default=1000,
                        help="prepare_steps: training steps (batch 256) from the shards")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpora = [("tdlm", int(size), None) for size in args.tokens] + \
                  [("imdb", None, int(n)) for n in args.imdb]
        for format, size, reviews in corpora:
            if format == "tdlm":
                path = pathlib.Path(tmp) / f"syn{size}.txt"
                tokens = synthetic(path, size)
            else:
                path = pathlib.Path(tmp) / f"imdb{reviews}.jsonl.gz"
                tokens = imdb_subset(path, reviews)
            for mode in args.modes:
                result = measure(mode, path, pathlib.Path(tmp) / f"prep-{mode}-{path.stem}",
                                 format, {"min_count": args.min_count,
                                          "max_size": args.max_size,
                                          "epochs": args.train_epochs,
                                          "steps": args.train_steps})
                result.update(mode=mode, corpus=format, reviews=reviews, tokens=tokens,
                              tokens_per_s=(tokens / result["prepare_s"]
                                            if result["prepare_s"] else None))
                if mode.startswith("train") or mode == "prepare_steps":
                    result.update(min_count=args.min_count, max_size=args.max_size,
                                  epochs=args.train_epochs,
                                  model="lstm embedding_dim=16 hidden_dim=16 batch 256")
                rows.append(result)
                print(json.dumps(result), flush=True)
                # after each measurement: an interrupted run keeps what it measured
                pathlib.Path(args.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
