"""Peak memory and throughput of the in-memory vs the streamed (sharded) data path.

Each measurement runs in a fresh subprocess (peak RSS = its ru_maxrss):

* ``memory``  -- read_tdlm + vocabularies + sentence_examples (today's path);
* ``streamed`` -- shards.prepare_directory (one counting pass + one writing pass)
  followed by one epoch of the ShardReader (bounded buffer, BoW per batch).

Corpora: synthetic TDLM files (Zipfian words, 20-token sentences, 10 sentences a
document) of the sizes given by --tokens. Run with one core:

    TF_NUM_INTRAOP_THREADS=1 python benchmarks/data_scale.py --tokens 1e6 4e6 --out R.json
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
mode, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.time()
if mode == "memory":
    from tfktopic.data import read_tdlm, Vocabulary, TopicVocabulary
    from tfktopic.data.contexts import sentence_examples
    corpus = read_tdlm(path)
    lm = Vocabulary.build(corpus, min_count=3)
    topic = TopicVocabulary.build(corpus, lm)
    n = len(sentence_examples(corpus, lm, topic))
    prep = time.time() - t0
else:
    from tfktopic.data.shards import prepare_directory, iter_documents, ShardReader
    prepare_directory(lambda: iter_documents(path, "tdlm"), out, min_count=3)
    prep = time.time() - t0
    n = sum(len(b["tokens"]) for b in ShardReader(out, buffer_size=10000).batches(64))
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


def measure(mode, path, out):
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(out)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=float, nargs="+", default=[1e6, 4e6])
    parser.add_argument("--modes", nargs="+", default=["memory", "streamed"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.tokens:
            path = pathlib.Path(tmp) / f"syn{int(size)}.txt"
            tokens = synthetic(path, int(size))
            for mode in args.modes:
                result = measure(mode, path, pathlib.Path(tmp) / f"prep-{mode}-{int(size)}")
                result.update(mode=mode, tokens=tokens,
                              tokens_per_s=tokens / result["prepare_s"])
                rows.append(result)
                print(json.dumps(result), flush=True)
    pathlib.Path(args.out).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
