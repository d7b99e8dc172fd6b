"""The ``tfktopic`` command.

    tfktopic train tcnlm --corpus lee --preset small --out runs/lee-tcnlm
    tfktopic report --corpus lee
    tfktopic report --corpus ../shared/data/apnews/apnews.txt --format tdlm \
        --stopwords ../shared/data/stopwords/mallet_en.txt

``train`` trains a topic-guided language model (TCNLM, TopicRNN or the LSTM
baseline) on a corpus split 80/10/10 by document, with a progress bar and a
validation pass every epoch, checkpoints to ``--out`` (running the same
command again after an interruption resumes), then prints the test perplexity
under the leak-free protocol next to a unigram model, the top words of the
topics and topic-conditioned sentences.

``report`` reads a corpus, splits it by document, builds the LM and topic
vocabularies on the training part, builds the sentence windows with leak-free
evaluation contexts and prints corpus statistics, vocabulary sizes and a sample
batch of the tf.data pipeline. Every user error exits with status 2 and one
line naming the file or argument.
"""

import argparse
import os
import sys

__all__ = ["main"]


def _report(args):
    from tfktopic.data import (TopicVocabulary, Vocabulary, load_corpus, sentence_examples)
    from tfktopic.data.pipeline import sentence_dataset

    kwargs = {}
    if args.format == "ptb":
        kwargs["sentences_per_document"] = args.sentences_per_document
    if args.format == "imdb" and args.limit:
        kwargs["limit"] = args.limit
    corpus = load_corpus(args.corpus, format=args.format, **kwargs)
    train, valid, test = corpus.split((0.8, 0.1, 0.1), seed=args.seed)
    print(f"corpus: {corpus.source or args.corpus} (format {args.format or 'inferred'})")
    header = f"{'split':<6}{'docs':>8}{'sentences':>11}{'tokens':>11}{'types':>9}{'sent.len':>10}"
    print(header)
    for name, part in (("all", corpus), ("train", train), ("valid", valid), ("test", test)):
        s = part.stats()
        print(f"{name:<6}{s['num_documents']:>8}{s['num_sentences']:>11}{s['num_tokens']:>11}"
              f"{s['num_types']:>9}{s['mean_sentence_length']:>10.1f}")
    lm_vocab = Vocabulary.build(train, min_count=args.min_count)
    topic_vocab = TopicVocabulary.build(train, lm_vocab, stopwords=args.stopwords,
                                        min_doc_freq=args.min_doc_freq)
    print(f"LM vocabulary: {len(lm_vocab)} types (min count {args.min_count}, "
          f"{lm_vocab.num_predictable} predictable)")
    print(f"topic vocabulary: {len(topic_vocab)} words (removed: "
          + ", ".join(f"{k} {v}" for k, v in sorted(topic_vocab.ignored.items())) + ")")
    train_examples = sentence_examples(train, lm_vocab, topic_vocab, protocol="all_other")
    test_examples = sentence_examples(test, lm_vocab, topic_vocab, protocol="preceding")
    print(f"sentence windows: train {len(train_examples)} (context: all other sentences), "
          f"test {len(test_examples)} (context: preceding sentences only, leak-free)")
    oov = sum(int((row == lm_vocab.unk_id).sum()) for row in test_examples.targets)
    print(f"test targets: {test_examples.num_targets} (<unk> rate "
          f"{oov / max(test_examples.num_targets, 1):.2%})")
    batch = next(iter(sentence_dataset(test_examples, batch_size=args.batch_size, shuffle=True,
                                       seed=args.seed)))
    print("sample test batch:")
    for key, value in batch.items():
        print(f"  {key:<12} {value.dtype.name:<8} {tuple(value.shape)}")
    row = int(batch["context_bow"].numpy().sum(axis=1).argmax())
    tokens = lm_vocab.decode(batch["tokens"].numpy()[row], strip_special=True)
    bow = batch["context_bow"].numpy()[row]
    top = [topic_vocab.words[i] for i in bow.argsort()[::-1][:10] if bow[i] > 0]
    print(f"  sentence: {' '.join(tokens)}")
    print(f"  its context ({int(bow.sum())} topic words), most frequent: {', '.join(top)}")
    return 0


TRAIN_MODELS = ("tcnlm", "topicrnn", "lstm")


def _model_preset(name, preset):
    """(constructor kwargs, data settings, training settings) of a model preset."""
    if name == "tcnlm":
        from tfktopic.models.tcnlm import PRESETS
    else:
        from tfktopic.models.topicrnn import PRESETS
    if preset not in PRESETS:
        raise ValueError(f"--preset: unknown preset {preset!r} for {name}; "
                         f"choose from {', '.join(sorted(PRESETS))}")
    entry = PRESETS[preset]
    if "model" in entry:
        return dict(entry["model"]), dict(entry["data"]), dict(entry["training"])
    data_keys = ("min_count", "stopwords", "max_freq_fraction", "min_doc_freq", "max_len",
                 "context_len", "max_size")
    train_keys = ("optimizer", "learning_rate", "batch_size", "epochs", "clipnorm")
    model_keys = ("hidden_dim", "embedding_dim", "num_topics", "encoder_units", "cell",
                  "num_layers", "variant", "dropout")
    pick = lambda keys: {k: entry[k] for k in keys if k in entry}
    return pick(model_keys), pick(data_keys), pick(train_keys)


def _unigram_perplexity(train_examples, test_examples, vocab_size):
    import numpy as np

    counts = np.bincount(train_examples.targets[train_examples.mask > 0],
                         minlength=vocab_size).astype(float) + 0.5
    log_p = np.log(counts / counts.sum())
    targets = test_examples.targets[test_examples.mask > 0]
    return float(np.exp(-log_p[targets].mean()))


def _train(args):
    import json
    import pathlib

    import keras

    from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, sentence_examples
    from tfktopic.data.pipeline import sentence_dataset
    from tfktopic.evaluation import evaluate_perplexity

    model_kwargs, data_cfg, train_cfg = _model_preset(
        "tcnlm" if args.model == "tcnlm" else "topicrnn", args.preset)
    if args.epochs is not None:
        train_cfg["epochs"] = args.epochs
    if args.stopwords is not None:
        data_cfg["stopwords"] = args.stopwords
    stopwords = data_cfg.get("stopwords", "gensim")
    if stopwords not in ("gensim", "none") and not pathlib.Path(stopwords).is_file():
        raise ValueError(f"--stopwords: preset {args.preset!r} uses the stop list {stopwords!r}, "
                         "which is not a file here; pass --stopwords PATH (e.g. Mallet's "
                         "en.txt) or --stopwords gensim")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    kwargs = {}
    if args.format == "ptb":
        kwargs["sentences_per_document"] = 10
    corpus = load_corpus(args.corpus, format=args.format, **kwargs)
    train, valid, test = corpus.split((0.8, 0.1, 0.1), seed=args.seed)
    lm_vocab = Vocabulary.build(train, min_count=data_cfg.get("min_count", 3),
                                max_size=data_cfg.get("max_size"))
    topic_vocab = TopicVocabulary.build(train, lm_vocab, stopwords=stopwords,
                                        max_freq_fraction=data_cfg.get("max_freq_fraction",
                                                                       0.001),
                                        min_doc_freq=data_cfg.get("min_doc_freq", 1))
    lm_vocab.save(out / "lm_vocab.json")
    topic_vocab.save(out / "topic_vocab.json")
    max_len, context_len = data_cfg.get("max_len", 30), data_cfg.get("context_len", 300)
    examples = {
        name: sentence_examples(part, lm_vocab, topic_vocab, max_len=max_len,
                                context_len=context_len,
                                protocol="all_other" if name == "train" else "preceding")
        for name, part in (("train", train), ("valid", valid), ("test", test))}
    batch_size = train_cfg.get("batch_size", 64)
    topicrnn = args.model == "topicrnn"
    datasets = {name: sentence_dataset(ex, batch_size=batch_size, shuffle=name == "train",
                                       seed=args.seed, document_targets=topicrnn)
                for name, ex in examples.items()}
    print(f"{corpus.source or args.corpus}: {len(train)} / {len(valid)} / {len(test)} documents "
          f"(train / valid / test), LM vocabulary {len(lm_vocab)}, topic vocabulary "
          f"{len(topic_vocab)}, {len(examples['train'])} training windows")

    keras.utils.set_random_seed(args.seed)
    if args.model == "tcnlm":
        from tfktopic.models.tcnlm import TCNLM
        model = TCNLM(len(lm_vocab), len(topic_vocab), **model_kwargs)
    elif args.model == "topicrnn":
        from tfktopic.models.topicrnn import TopicRNN
        model = TopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, **model_kwargs)
    else:
        from tfktopic.models import LSTMLanguageModel
        model = LSTMLanguageModel(len(lm_vocab), embedding_dim=model_kwargs.get(
            "embedding_dim") or model_kwargs["hidden_dim"], hidden_dim=model_kwargs["hidden_dim"],
            dropout=model_kwargs.get("dropout", 0.0))
    model.compile(optimizer=keras.optimizers.Adam(train_cfg.get("learning_rate", 1e-3),
                                                  clipnorm=train_cfg.get("clipnorm")))
    model(next(iter(datasets["valid"])))  # build, so BackupAndRestore can restore weights
    callbacks = [
        keras.callbacks.BackupAndRestore(str(out / "backup")),
        keras.callbacks.ModelCheckpoint(str(out / "model.keras"), monitor="val_ppl",
                                        mode="min", save_best_only=True),
        keras.callbacks.TerminateOnNaN(),
    ]
    print(f"training {args.model} (preset {args.preset}) for {train_cfg.get('epochs', 10)} "
          f"epochs; checkpoints in {out}")
    model.fit(datasets["train"], validation_data=datasets["valid"],
              epochs=train_cfg.get("epochs", 10), callbacks=callbacks, verbose=args.verbose)
    if (out / "model.keras").exists():
        model = keras.saving.load_model(out / "model.keras")

    result = evaluate_perplexity(model, datasets["test"], protocol="preceding")
    unigram = _unigram_perplexity(examples["train"], examples["test"], len(lm_vocab))
    print(f"\ntest perplexity (leak-free: topic context from preceding sentences only): "
          f"{result.perplexity:.2f} over {result.num_tokens} tokens")
    print(f"unigram model on the same tokens: {unigram:.2f}")
    summary = {"model": args.model, "preset": args.preset, "corpus": str(args.corpus),
               "test": result.as_dict(), "unigram_ppl": unigram}
    if hasattr(model, "topics"):
        topics = model.topics(top_n=10, vocabulary=topic_vocab)
        print("\ntopics (top 10 words):")
        for k, words in enumerate(topics):
            print(f"  topic {k:>2}: {' '.join(words)}")
        summary["topics"] = topics
        print("\ngenerated sentences (top-k sampling, conditioned on one topic):")
        summary["generated"] = {}
        for k in range(min(3, len(topics))):
            options = {"allow_unk": False} if args.model == "tcnlm" else {}
            ids = model.generate(num_sentences=1, max_len=25, topic=k, method="top_k",
                                 top_k=10, seed=args.seed + k, **options)
            text = " ".join(lm_vocab.decode(ids[0], strip_special=True))
            summary["generated"][k] = text
            print(f"  topic {k:>2} ({' '.join(topics[k][:3])}): {text}")
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    print(f"\nmodel, vocabularies and results.json written to {out}")
    return 0


def _parser():
    parser = argparse.ArgumentParser(prog="tfktopic", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser(
        "train", help="train a topic-guided language model and evaluate it",
        description="Train a model on a corpus split 80/10/10 by document; print test "
                    "perplexity (leak-free), topics and topic-conditioned sentences.")
    train.add_argument("model", choices=TRAIN_MODELS, help="which model")
    train.add_argument("--corpus", default="lee",
                       help="'lee' (embedded news corpus) or a path (default: lee)")
    train.add_argument("--format", choices=["tdlm", "ptb", "imdb", "text", "lee"], default=None)
    train.add_argument("--preset", default="small",
                       help="model preset, e.g. small (default), paper, paper_large")
    train.add_argument("--epochs", type=int, default=None, help="override the preset's epochs")
    train.add_argument("--stopwords", default=None,
                       help="'gensim', 'none' or a stop-list file (default: the preset's)")
    train.add_argument("--out", default="runs/train", help="output directory (default: runs/train)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--verbose", type=int, default=1, choices=[0, 1, 2],
                       help="1: progress bar (default), 2: one line per epoch")
    train.set_defaults(run=_train)
    report = commands.add_parser(
        "report", help="corpus statistics, vocabularies and a sample batch",
        description="Read a corpus and report what the data pipeline makes of it.")
    report.add_argument("--corpus", default="lee",
                        help="'lee' (embedded news corpus) or a path (default: lee)")
    report.add_argument("--format", choices=["tdlm", "ptb", "imdb", "text", "lee"], default=None,
                        help="corpus format (inferred for lee, *.jsonl.gz and ptb.* files)")
    report.add_argument("--min-count", type=int, default=3,
                        help="LM vocabulary minimum count (papers: 10; default 3 for small corpora)")
    report.add_argument("--min-doc-freq", type=int, default=1,
                        help="topic vocabulary minimum document frequency")
    report.add_argument("--stopwords", default="gensim",
                        help="'gensim', 'none' or a stop-list file such as Mallet's en.txt")
    report.add_argument("--sentences-per-document", type=int, default=10,
                        help="PTB format: sentences per document")
    report.add_argument("--limit", type=int, default=None, help="IMDB: read at most N reviews")
    report.add_argument("--batch-size", type=int, default=16)
    report.add_argument("--seed", type=int, default=0)
    report.set_defaults(run=_report)
    return parser


def main(argv=None):
    """Entry point of the ``tfktopic`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from tfktopic.errors import TfktopicError

    try:
        return args.run(args)
    except (TfktopicError, ValueError, OSError) as error:
        print(f"tfktopic {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
