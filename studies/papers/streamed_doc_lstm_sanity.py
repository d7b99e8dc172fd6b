"""Sanity check on APNEWS: sentence LSTM vs chunked doc_lstm vs streamed document LSTM.

    python studies/papers/streamed_doc_lstm_sanity.py --documents 300 --epochs 3 --out results.json

A short run on a subset (not a result): the three LSTM language models of the
same size, on the same split (80/10/10 by document, seed 0), vocabulary and
number of epochs, each scored on the same test targets:

* ``lstm`` -- sentence level, every sentence window from a zero state
  (`tfktopic.runs.make_examples` / `score_perplexity`);
* ``doc_lstm`` -- the *chunked* variant of `tfktopic.runs`: documents cut into
  chunks of J = 8 windows in training, each chunk from a zero state; scored on
  whole documents;
* ``streamed`` -- `DocumentLSTMLanguageModel` (Zheng, Vafa & Blei's
  baseline): one stream per document, truncated BPTT of 30, the state carried
  within a document and reset at its start, in training and evaluation.

It also reports the training throughput (predicted tokens per second) of the
three models, measured in this process after scoring: `--speed-rounds` more
epochs of each, interleaved, median per model.
"""

import argparse
import json
import pathlib
import time

import keras

from tfktopic.data.streams import stream_examples
from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.models import DocumentLSTMLanguageModel, LSTMLanguageModel, score_stream_perplexity
from tfktopic.runs.data import (build_vocabularies, make_dataset, make_examples, read_corpus,
                                score_perplexity, split_corpus)
from tfktopic.runs.settings import DATA_DEFAULTS

SHARED_DATA = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"


class EpochTimer(keras.callbacks.Callback):
    """Wall time of every training epoch (validation excluded)."""

    def on_train_begin(self, logs=None):
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self.start)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(SHARED_DATA / "apnews" / "apnews.txt"))
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="sentence windows per batch (lstm, doc_lstm)")
    parser.add_argument("--streams", type=int, default=64,
                        help="parallel streams (streamed): 64 x 30 targets per batch")
    parser.add_argument("--bptt", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="lstm,doc_lstm,streamed")
    parser.add_argument("--speed-rounds", type=int, default=3,
                        help="after scoring: timed training epochs per model, interleaved")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    data = dict(DATA_DEFAULTS, stopwords="gensim")
    corpus = read_corpus(args.data, "tdlm", data, max_documents=args.documents)
    parts = split_corpus(corpus, args.seed)
    lm_vocab, topic_vocab = build_vocabularies(parts["train"], data)
    test_sentences = make_examples("lstm", parts["test"], lm_vocab, topic_vocab, data)
    record = {"documents": len(corpus), "epochs": args.epochs, "vocab": len(lm_vocab),
              "embedding_dim": args.embedding_dim, "hidden_dim": args.hidden_dim,
              "learning_rate": args.learning_rate, "seed": args.seed,
              "test_targets": test_sentences.num_targets,
              "unigram_test_ppl": unigram_perplexity(lm_vocab, test_sentences), "models": {}}
    print(json.dumps({k: v for k, v in record.items() if k != "models"}))
    sizes = dict(embedding_dim=args.embedding_dim, hidden_dim=args.hidden_dim)
    trained = {}
    for name in args.models.split(","):
        keras.utils.set_random_seed(args.seed)
        timer = EpochTimer()
        if name in ("lstm", "doc_lstm"):
            model = LSTMLanguageModel(len(lm_vocab), document_level=name == "doc_lstm", **sizes)
            train = make_examples(name, parts["train"], lm_vocab, topic_vocab, data,
                                  protocol="all_other")
            train_ds = make_dataset(name, train, args.batch_size, shuffle=True, seed=args.seed)
            train_targets, steps = train.num_targets, None
            padded = train.tokens.size
        else:
            model = DocumentLSTMLanguageModel(len(lm_vocab), max_streams=args.streams, **sizes)
            train_ds, steps, streams = stream_examples(
                parts["train"], lm_vocab, bptt=args.bptt, batch_size=args.streams, shuffle=True,
                seed=args.seed)
            train_targets = streams.num_targets
            padded = steps * args.streams * args.bptt
        model.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
        model.fit(train_ds, epochs=args.epochs, steps_per_epoch=steps, callbacks=[timer],
                  verbose=2)
        if name == "streamed":
            result, _ = score_stream_perplexity(model, parts["test"], lm_vocab, bptt=args.bptt)
        else:
            result, _ = score_perplexity(name, model, parts["test"], lm_vocab, topic_vocab, data,
                                         batch_size=args.batch_size)
        steady = timer.times[1:] or timer.times
        seconds = sum(steady) / len(steady)
        record["models"][name] = {
            "test_ppl": result.perplexity, "test_targets": result.num_tokens,
            "epoch_seconds": timer.times, "train_targets": train_targets,
            "updates_per_epoch": int(model.optimizer.iterations.numpy()) // args.epochs,
            "train_targets_per_second": train_targets / seconds,
            "padded_steps_per_second": padded / seconds}
        print(name, json.dumps(record["models"][name]))
        trained[name] = (model, train_ds, steps, train_targets)
    # Throughput on a shared machine: one more epoch of each model in turn,
    # `--speed-rounds` times (interleaved, so load changes hit all models),
    # then the median predicted tokens per second of each.
    for _ in range(args.speed_rounds):
        for name, (model, train_ds, steps, train_targets) in trained.items():
            start = time.perf_counter()
            model.fit(train_ds, epochs=1, steps_per_epoch=steps, verbose=0)
            rate = train_targets / (time.perf_counter() - start)
            record["models"][name].setdefault("speed_rounds", []).append(rate)
    for name in trained:
        rounds = sorted(record["models"][name].get("speed_rounds", []))
        if rounds:
            record["models"][name]["median_train_targets_per_second"] = rounds[len(rounds) // 2]
    if "lstm" in trained and "streamed" in trained and args.speed_rounds:
        record["streamed_over_lstm_speed"] = (
            record["models"]["streamed"]["median_train_targets_per_second"]
            / record["models"]["lstm"]["median_train_targets_per_second"])
        print("streamed / sentence LSTM training tokens/s:", record["streamed_over_lstm_speed"])
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    return record


if __name__ == "__main__":
    main()
