"""Our streamed document models' perplexity on Zheng, Vafa & Blei's target sets.

Given a run directory of ``tfktopic train doc_lstm`` or ``doc_topicrnn``
(``model.keras``, ``lm_vocab.json``, ``run.json``, ``results.json``), this scores
every test target of the run's own test split once, keeping each target's NLL
(the document TopicRNN with its leak-free topic context from the preceding text,
as its test perplexity), and reports the perplexity over three target sets
(README.md beside this file, "Target sets"):

``all``
    every target we score: each word and one ``<eos>`` per sentence (must
    equal ``results.json``'s test perplexity; checked);
``without_sentence_eos``
    their data's targets: each word and only the document's final ``<eos>``
    (the sentence-internal ``<eos>`` targets dropped);
``their_scored``
    the targets their evaluation actually scores: additionally without the
    target at index k = L, 2L, ... of their document sequence
    ``[<sos>, w_1, ..., w_N, <eos>]`` (their ``elif is_last:`` on a list pads
    the last target of every window; measured by ``check_targets.py``).

The subsets are an approximation of their protocol: our model still *read*
the sentence ``<eos>`` tokens as inputs (it was trained and is evaluated on
streams with them), we only leave their predictions out of the average.

Usage::

    python -m studies.study.peer.compare RUN_DIR [--peer-log ../peer-runs/lstm_lm.log]
        [--out FILE.json] [--split test|valid] [--peer-seqlen 30]
"""

import argparse
import json
import math
import pathlib
import re
import sys

import numpy as np


def per_token_log_probs(model, streams, batch_size, bptt, context=None, context_len=None):
    """log p of every target of every stream (list of float64 arrays, one per document).

    The batches are `tfktopic.data.streams.stream_batches` in the evaluation
    order, exactly as `score_stream_perplexity` builds them; row b of a batch
    holds the window of document ``document[b]`` whose targets follow the
    document's previous windows, so a per-document cursor maps them back.
    With a `context` (the document TopicRNN: ``"preceding"``) the batches carry
    its topic contexts and the model returns log-probabilities, not logits.
    """
    import tensorflow as tf

    from tfktopic.data.streams import stream_batches
    from tfktopic.evaluation.perplexity import masked_token_log_probs

    @tf.function(reduce_retracing=True)
    def log_probs(batch):
        logits = model(batch, training=False)
        return masked_token_log_probs(batch["targets"], logits, batch["mask"], context is None)

    out = [np.full(max(len(s) - 1, 0), np.nan) for s in streams.streams]
    cursor = np.zeros(len(streams.streams), np.int64)
    for batch in stream_batches(streams, batch_size, bptt, context=context,
                                context_len=context_len):
        lp = log_probs({k: tf.constant(v) for k, v in batch.items()}).numpy()
        for b, d in enumerate(batch["document"]):
            if d < 0:
                continue
            n = int(batch["mask"][b].sum())
            if batch["reset"][b] and cursor[d] != 0:
                raise RuntimeError(f"document {d} restarted")
            out[d][cursor[d]:cursor[d] + n] = lp[b, :n]
            cursor[d] += n
    lengths = np.array([len(o) for o in out])
    if (cursor != lengths).any() or any(np.isnan(o).any() for o in out):
        raise RuntimeError("not every target was scored exactly once")
    return out


def target_sets(stream, eos_id, peer_seqlen):
    """Boolean masks over the targets ``stream[1:]`` of one document.

    Returns:
        dict ``all`` / ``without_sentence_eos`` / ``their_scored`` of bool
        arrays, and ``their_index``: for each target, its index k in their
        sequence ``[<sos>, w_1, ..., w_N, <eos>]`` (-1 for a sentence-internal
        ``<eos>``, which their data does not have).
    """
    targets = np.asarray(stream[1:])
    n = len(targets)
    is_eos = targets == eos_id
    internal = is_eos.copy()
    if n:
        internal[-1] = False  # the document's final <eos> is theirs too
    # k = our stream position p (1-based target) minus the internal <eos> before p.
    positions = np.arange(1, n + 1)
    before = np.concatenate([[0], np.cumsum(internal)[:-1]]) if n else np.zeros(0, np.int64)
    their_index = np.where(internal, -1, positions - before)
    keep = ~internal
    scored = keep & (their_index % int(peer_seqlen) != 0)
    return {"all": np.ones(n, bool), "without_sentence_eos": keep, "their_scored": scored,
            "their_index": their_index}


def summarise(nll_sum, count):
    nll = nll_sum / count if count else float("nan")
    return {"perplexity": math.exp(nll) if count else float("nan"), "nll": nll,
            "num_tokens": int(count)}


def parse_peer_log(path):
    """Their train.py's final line: test and best validation perplexity (+ epochs run)."""
    text = pathlib.Path(path).read_text(errors="replace").replace("\r", "\n")
    final = re.findall(r"tst ppl\s+([0-9.]+)\s*\|\s*best val ppl\s+([0-9.]+)", text)
    epochs = re.findall(r"end of epoch\s+(\d+).*?val ppl\s+([0-9.]+)", text)
    report = {"log": str(path), "epochs_run": len(epochs),
              "val_ppl_per_epoch": [float(v) for _, v in epochs]}
    if final:
        report.update(test_ppl=float(final[-1][0]), best_val_ppl=float(final[-1][1]),
                      finished=True)
    else:
        report["finished"] = False
    if report["val_ppl_per_epoch"]:
        report.setdefault("best_val_ppl", min(report["val_ppl_per_epoch"]))
    return report


def compare(run_dir, split="test", peer_seqlen=30, peer_log=None, batch_size=None):
    from tfktopic import runs
    from tfktopic.data.streams import document_streams

    run = runs.load_run(run_dir)
    if run.name not in ("doc_lstm", "doc_topicrnn"):
        raise SystemExit(f"{run_dir}: a {run.name} run; this compares the streamed doc_lstm "
                         "and doc_topicrnn")
    config = run.config
    topical = run.name == "doc_topicrnn"      # scored as its test: the preceding text only
    part = runs.run_splits(config)[split]
    bptt = int(config["data"].get("bptt", 30))
    batch = int(batch_size or config.get("training", {}).get("batch_size", 64))
    batch = min(batch, int(run.model.max_streams))  # as score_perplexity
    streams = document_streams(part, run.lm_vocab, run.topic_vocab if topical else None)
    log_p = per_token_log_probs(
        run.model, streams, batch, bptt, context="preceding" if topical else None,
        context_len=int(config["data"]["context_len"]) if topical else None)

    sums = {"all": 0.0, "without_sentence_eos": 0.0, "their_scored": 0.0}
    counts = dict.fromkeys(sums, 0)
    per_doc = []
    for stream, lp in zip(streams.streams, log_p):
        masks = target_sets(stream, run.lm_vocab.eos_id, peer_seqlen)
        for name in sums:
            sums[name] += float(-lp[masks[name]].sum())
            counts[name] += int(masks[name].sum())
        per_doc.append(int(masks["their_scored"].sum()))

    words = sum(len(s) for doc in part for s in doc)
    sentences = sum(len(doc) for doc in part)
    expected = {"all": words + sentences, "without_sentence_eos": words + len(part),
                "their_scored": sum(n + 1 - (n + 1) // peer_seqlen
                                    for n in (sum(len(s) for s in doc) for doc in part))}
    for name, value in expected.items():
        if counts[name] != value:
            raise RuntimeError(f"{name}: {counts[name]} targets, expected {value}")
    report = {
        "run": str(run.path), "split": split,
        "documents": len(part), "words": words, "sentences": sentences,
        "peer_seqlen": int(peer_seqlen), "bptt": bptt, "batch_size": batch,
        "ours": {name: summarise(sums[name], counts[name]) for name in sums},
        "target_sets": {
            "all": "every word + one <eos> per sentence (what tfktopic scores)",
            "without_sentence_eos": "every word + the document's final <eos> (their data)",
            "their_scored": f"their data without index k = {peer_seqlen}, {2 * peer_seqlen}, "
                            "... of [<sos>, w_1..w_N, <eos>] (what their evaluation scores)"},
        "caveat": "subsets of our model's predictions: our model still read the sentence "
                  "<eos> tokens as inputs; only their predictions are left out",
    }
    if split == "test":
        recorded = json.loads((run.path / "results.json").read_text())["test"]
        ours = report["ours"]["all"]
        report["check_results_json"] = {
            "results_json_perplexity": recorded["perplexity"],
            "results_json_num_tokens": recorded["num_tokens"],
            "relative_difference": ours["perplexity"] / recorded["perplexity"] - 1.0,
            "equal": bool(recorded["num_tokens"] == ours["num_tokens"]
                          and abs(ours["nll"] - recorded["nll"]) < 1e-6)}
    else:
        report["check_run_json_best_val_ppl"] = (config.get("progress") or {}).get("best_val_ppl")
    if peer_log is not None:
        peer = parse_peer_log(peer_log)
        report["peer"] = peer
        key = "test_ppl" if split == "test" else "best_val_ppl"
        if peer.get(key):
            report["ratio_ours_their_scored_to_peer"] = (
                report["ours"]["their_scored"]["perplexity"] / peer[key])
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a `tfktopic train doc_lstm` or `doc_topicrnn` run "
                                    "directory")
    parser.add_argument("--split", default="test", choices=("test", "valid"))
    parser.add_argument("--peer-seqlen", type=int, default=30, help="their --max_seqlen")
    parser.add_argument("--peer-log", help="their train.py log (for its test perplexity)")
    parser.add_argument("--batch-size", type=int, help="streams per batch (default: the run's)")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    report = compare(args.run, args.split, args.peer_seqlen, args.peer_log, args.batch_size)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    check = report.get("check_results_json")
    if check is not None and not check["equal"]:
        print("error: the 'all' perplexity does not reproduce results.json", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
