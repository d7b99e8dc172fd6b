"""Peak memory and throughput of the in-memory vs the streamed (sharded) data path.

Each measurement runs in a fresh subprocess (peak RSS = its ru_maxrss):

* ``memory``  -- read_tdlm + vocabularies + sentence_examples (today's path);
* ``streamed`` -- shards.prepare_directory (one counting pass + one writing pass)
  followed by one epoch of the ShardReader (bounded buffer, BoW per batch).

* ``streamed_train`` -- as ``streamed``, then 50 training steps of a small LSTM LM fed
  by the reader through `tf_dataset` (the model and its runtime on top of the data).

Corpora: synthetic TDLM files (Zipfian words, 20-token sentences, 10 sentences a
document) of the sizes given by --tokens, and the first N reviews of IMDB (all splits
and labels, file order) given by --imdb. Run with one core:

    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --tokens 1e6 4e6 --out R.json
    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --imdb 25000 50000 100000 \
        --modes memory streamed_train --out R.json
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import pathlib

CHILD = r"""
import json, resource, sys, time, pathlib
mode, path, out, format = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
t0 = time.time()
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


def measure(mode, path, out, format="tdlm"):
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(out), format],
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{mode} on {path} failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


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
                        choices=["memory", "streamed", "streamed_train"])
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
                                 format)
                result.update(mode=mode, corpus=format, reviews=reviews, tokens=tokens,
                              tokens_per_s=tokens / result["prepare_s"])
                rows.append(result)
                print(json.dumps(result), flush=True)
                # after each measurement: an interrupted run keeps what it measured
                pathlib.Path(args.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
