"""TopicRNN / TopicLSTM / TopicGRU on Penn Treebank (Dieng et al. 2017, §4.1, Table 2).

    python scripts/topicrnn_ptb.py --neurons 100 --cell gru
    python scripts/topicrnn_ptb.py --quick          # a small slice, about a minute
    python scripts/topicrnn_ptb.py --baseline       # also a plain RNN of the same size (Table 2)

Setup (preset ``ptb_<neurons>`` in `tfktopic.models.topicrnn.PRESETS`):
documents are blocks of 10 sentences, the LM vocabulary is PTB's 10k types,
the inference network sees the stop-word-free bag of words (Mallet's list by
default: the paper's 449-word list is not published), 1 recurrent layer of
10 / 100 / 300 units with K = 18 / 50 / 50 topics, Adam, at most 15 epochs
with early stopping on the validation perplexity, no dropout.

Training contexts are the other sentences of the document ("all_other"),
evaluation contexts the **preceding** sentences only (leak-free; theta = mean
of q; the stop-word indicator is marginalised). Each sentence window starts
from a zero RNN state (sentence-level protocol, DESIGN.md §5) unless
``--level document``, which carries the state across the sentences of a
document (``document_dataset`` chunks of 10 sentences). The papers'
"all_other" test perplexity, which lets future text in, is printed too and
labelled as such.

PTB comes split (train / valid / test files): `tfktopic.runs.prepare_data`
takes the three parts as they are and builds the vocabularies on the training
file; the models, the training and the sentence-level scoring are
`tfktopic.runs`' (`build_model`, `fit_model`, `score_perplexity`).
"""

import argparse
import json
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA),
                        help="folder with ptb/ptb.{train,valid,test}.txt and stopwords/mallet_en.txt "
                             "(default: %(default)s)")
    parser.add_argument("--neurons", type=int, choices=(10, 100, 300), default=100,
                        help="recurrent units: the paper's 10 / 100 / 300 (K = 18 / 50 / 50)")
    parser.add_argument("--cell", choices=("rnn", "lstm", "gru"), default="rnn",
                        help="rnn = TopicRNN, lstm = TopicLSTM, gru = TopicGRU")
    parser.add_argument("--variant", choices=("paper", "disjoint"), default="paper")
    parser.add_argument("--level", choices=("sentence", "document"), default="sentence",
                        help="zero state per sentence, or state carried across a document")
    parser.add_argument("--stopwords", default=None,
                        help="stop list for X_c (default: Mallet's list in --data-dir)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a small slice of PTB and 2 epochs (about a minute on 2 cores)")
    parser.add_argument("--baseline", action="store_true",
                        help="also train a plain RNN LM of the same cell and size on the same "
                             "windows and epochs (Table 2's comparison)")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    return parser.parse_args(argv)


def require(path, what):
    if not path.exists():
        sys.exit(f"error: {what} not found at {path}; pass --data-dir (the shared data folder "
                 f"with ptb/ and stopwords/)")
    return path


def fit(settings, data, args, patience, datasets=None):
    """`runs.build_model` + `runs.fit_model` with early stopping on ``val_ppl``."""
    import keras

    from tfktopic import runs

    model = runs.build_model(settings, data, seed=args.seed)
    stopping = keras.callbacks.EarlyStopping(monitor="val_ppl", mode="min", patience=patience,
                                             restore_best_weights=True)
    start = time.perf_counter()
    runs.fit_model(model, data, settings, callbacks=[stopping], verbose=2, seed=args.seed,
                   datasets=datasets)
    return model, round(time.perf_counter() - start, 1)


def main(argv=None):
    args = parse_args(argv)
    data_dir = pathlib.Path(args.data_dir)
    ptb = {split: require(data_dir / "ptb" / f"ptb.{split}.txt", f"PTB {split} file")
           for split in ("train", "valid", "test")}
    stopwords = args.stopwords or str(require(data_dir / "stopwords" / "mallet_en.txt",
                                              "Mallet stop list"))

    from tfktopic import runs
    from tfktopic.data import document_sequences, read_ptb
    from tfktopic.data.pipeline import document_dataset
    from tfktopic.evaluation import evaluate_perplexity, unigram_perplexity
    settings = runs.preset_settings("topicrnn", f"ptb_{args.neurons}")
    training = settings["training"]
    training["epochs"] = args.epochs or (2 if args.quick else training["epochs"])
    training["batch_size"] = args.batch_size or training["batch_size"]
    training["learning_rate"] = args.learning_rate or (3e-3 if args.quick
                                                       else training["learning_rate"])
    settings["model"].update(cell=args.cell, variant=args.variant, seed=args.seed)
    settings["data"]["stopwords"] = stopwords
    epochs, batch_size = training["epochs"], training["batch_size"]
    per_doc = settings["data"]["sentences_per_document"]
    corpora = {split: read_ptb(path, sentences_per_document=per_doc)
               for split, path in ptb.items()}
    if args.quick:
        corpora = {"train": corpora["train"].subset(range(200)),
                   "valid": corpora["valid"].subset(range(30)),
                   "test": corpora["test"].subset(range(30))}
    data = runs.prepare_data(settings, corpora)
    lm_vocab, topic_vocab = data.lm_vocab, data.topic_vocab
    print(f"PTB ({'quick slice' if args.quick else 'full'}): "
          + ", ".join(f"{k} {len(v)} documents" for k, v in data.parts.items()))
    print(f"LM vocabulary {len(lm_vocab)} (incl. <pad>, <bos>); topic vocabulary "
          f"{len(topic_vocab)} content words; stop words/special/symbols for l_t: "
          f"{len(lm_vocab) - len(topic_vocab)} (paper: 9,551 content / 449 stop words); "
          f"removed: {topic_vocab.ignored}")

    def chunks(split, protocol, shuffle):
        """--level document: TopicRNN on chunks of a document's sentences (state carried)."""
        sequences = document_sequences(data.parts[split], lm_vocab, topic_vocab,
                                       sentences_per_chunk=per_doc, max_len=data.data["max_len"],
                                       context_len=data.data["context_len"], protocol=protocol)
        return document_dataset(sequences, batch_size=max(1, batch_size // per_doc),
                                shuffle=shuffle, seed=args.seed, document_targets=True)

    def perplexity(name, model, split, protocol):
        if args.level == "document":
            return evaluate_perplexity(model, chunks(split, protocol, False),
                                       protocol=protocol).perplexity
        return runs.score_perplexity(name, model, data.parts[split], lm_vocab, topic_vocab,
                                     data.data, protocol, batch_size)[0].perplexity

    datasets = None
    if args.level == "document":
        datasets = (chunks("train", "all_other", True), chunks("valid", "preceding", False))
    patience = training["patience"]
    model, train_seconds = fit(settings, data, args, patience, datasets)
    print(f"model: Topic{args.cell.upper()} {args.neurons} units, K={model.num_topics}, "
          f"variant {args.variant}, level {args.level}, {model.count_params():,} parameters; "
          f"epochs {epochs}, batch {batch_size}, Adam {training['learning_rate']}")

    results = {"neurons": args.neurons, "cell": args.cell, "variant": args.variant,
               "level": args.level, "num_topics": model.num_topics, "epochs": epochs,
               "quick": args.quick, "train_seconds": train_seconds,
               "lm_vocab": len(lm_vocab), "topic_vocab": len(topic_vocab), "perplexity": {}}
    print("\nperplexity (theta = mean of q from the preceding sentences, l_t marginalised):")
    for split in ("train", "valid", "test"):
        value = perplexity("topicrnn", model, split, "preceding")
        results["perplexity"][split] = value
        print(f"  {split:<6} {value:9.2f}")
    leaky = perplexity("topicrnn", model, "test", "all_other")
    results["perplexity"]["test_all_other"] = leaky
    print(f"  test   {leaky:9.2f}  (papers' 'all_other' protocol: the context includes later "
          "sentences -- not leak-free)")
    results["perplexity"]["test_unigram"] = unigram_perplexity(lm_vocab, data.examples["test"])
    print(f"  test   {results['perplexity']['test_unigram']:9.2f}  (unigram baseline)")
    print("\ntopics (top words of the rows of B):")
    topics = model.topics(top_n=8, vocabulary=topic_vocab)
    for k, words in enumerate(topics[:10]):
        print(f"  {k:>3}: {' '.join(words)}")
    results["topics"] = topics
    sentence = model.generate(num_sentences=1, max_len=25, topic=0, method="top_k", seed=args.seed,
                              tokenizer=data.tokenizer)[0]
    print("\ngenerated (topic 0, top-k):", sentence)
    if args.baseline:
        # A plain RNN LM of the same cell and size on the same windows and budget
        # (embedding size = hidden size, as TopicRNN's default).
        name = "doc_lstm_chunked" if args.level == "document" else "lstm"
        baseline = {"name": name, "data": data.data, "training": training,
                    "model": {"embedding_dim": args.neurons, "hidden_dim": args.neurons,
                              "cell": args.cell, "document_level": args.level == "document"}}
        print(f"\nbaseline: plain {args.cell.upper()} {args.neurons} units")
        lstm, seconds = fit(baseline, data.for_model("lstm"), args, patience, datasets)
        results["baseline"] = {"cell": args.cell, "neurons": args.neurons,
                               "train_seconds": seconds, "perplexity": {}}
        for split in ("valid", "test"):
            value = perplexity("lstm", lstm, split, "preceding")
            results["baseline"]["perplexity"][split] = value
            print(f"  baseline {split:<6} {value:9.2f}")
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
