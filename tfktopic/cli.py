"""The ``tfktopic`` command.

    tfktopic report --corpus lee
    tfktopic report --corpus ../shared/data/apnews/apnews.txt --format tdlm \
        --stopwords ../shared/data/stopwords/mallet_en.txt

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


def _parser():
    parser = argparse.ArgumentParser(prog="tfktopic", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
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
