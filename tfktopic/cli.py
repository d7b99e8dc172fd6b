"""The ``tfktopic`` command: a thin argparse layer over `tfktopic.runs`.

    tfktopic train tcnlm --corpus lee --out runs/lee-tcnlm
    tfktopic --version
    tfktopic evaluate runs/lee-tcnlm [--corpus PATH] [--protocol preceding|all-other|none]
    tfktopic topics runs/lee-tcnlm [--top-n 10] [--json OUT] [--dot OUT.dot --svg OUT.svg] [--picture OUT.png] [--html OUT.html]
    tfktopic generate runs/lee-tcnlm [--topic K [--layer L] | --document FILE] [--paragraph N]
    tfktopic export runs/lee-tcnlm --saved-model exported/lee-tcnlm
    tfktopic report --corpus ../shared/data/apnews/apnews.txt --format tdlm \
        --stopwords ../shared/data/stopwords/mallet_en.txt

``train MODEL`` (lstm, doc_lstm, doc_lstm_chunked, lda_lstm, topicrnn, doc_topicrnn, tcnlm,
rgbn_rnn, gbn_rnn)
trains on a corpus split 80/10/10 by document, with a progress bar and a
validation pass every epoch, checkpoints to the run directory ``--out``
(running the same command again after an interruption resumes), then prints
the test perplexity under the leak-free protocol next to a unigram model, the
top words of the topics and topic-conditioned sentences. ``evaluate``,
``topics``, ``generate`` and ``export`` take a run directory (see
`tfktopic.runs` for its layout) or ``pretrained:NAME``.

``report`` reads a corpus, splits it by document, builds the LM and topic
vocabularies on the training part, builds the sentence windows with leak-free
evaluation contexts (the run's data path, `tfktopic.runs.read_corpus` and
`tfktopic.runs.prepare_data`) and prints corpus statistics, vocabulary sizes and
a sample batch of the tf.data pipeline.

Every user error exits with status 2 and one line
``tfktopic <command>: error: ...`` naming the file or argument, and nothing
else is written to stderr: TensorFlow's native log lines, Python warnings and
absl messages are silenced unless ``tfktopic --verbose COMMAND ...`` is given.
"""

import argparse
import contextlib
import logging
import os
import sys
import warnings

from tfktopic.startup import silence_native_stderr

__all__ = ["main"]


def _report(args):
    from tfktopic import runs

    data = {**runs.DATA_DEFAULTS, "min_count": args.min_count, "min_doc_freq": args.min_doc_freq,
            "stopwords": args.stopwords, "sentences_per_document": args.sentences_per_document}
    corpus = runs.read_corpus(args.corpus, args.format, data,
                              max_documents=(args.limit or None) if args.format == "imdb" else None)
    # The run's data path on the corpus read: split, vocabularies, sentence windows.
    prepared = runs.prepare_data({"name": "lstm", "data": data}, corpus, seed=args.seed)
    parts, lm_vocab, topic_vocab = prepared.parts, prepared.lm_vocab, prepared.topic_vocab
    print(f"corpus: {corpus.source or args.corpus} (format {args.format or 'inferred'})")
    header = f"{'split':<6}{'docs':>8}{'sentences':>11}{'tokens':>11}{'types':>9}{'sent.len':>10}"
    print(header)
    for name, part in (("all", corpus), *parts.items()):
        s = part.stats()
        print(f"{name:<6}{s['num_documents']:>8}{s['num_sentences']:>11}{s['num_tokens']:>11}"
              f"{s['num_types']:>9}{s['mean_sentence_length']:>10.1f}")
    print(f"LM vocabulary: {len(lm_vocab)} types (min count {args.min_count}, "
          f"{lm_vocab.num_predictable} predictable)")
    print(f"topic vocabulary: {len(topic_vocab)} words (removed: "
          + ", ".join(f"{k} {v}" for k, v in sorted(topic_vocab.ignored.items())) + ")")
    train_examples, test_examples = prepared.examples["train"], prepared.examples["test"]
    print(f"sentence windows: train {len(train_examples)} (context: all other sentences), "
          f"test {len(test_examples)} (context: preceding sentences only, leak-free)")
    oov = sum(int((row == lm_vocab.unk_id).sum()) for row in test_examples.targets)
    print(f"test targets: {test_examples.num_targets} (<unk> rate "
          f"{oov / max(test_examples.num_targets, 1):.2%})")
    batch = next(iter(prepared.dataset("test", args.batch_size, shuffle=True, seed=args.seed)))
    print("sample test batch:")
    for key, value in batch.items():
        print(f"  {key:<12} {value.dtype.name:<8} {tuple(value.shape)}")
    row = int(batch["context_bow"].numpy().sum(axis=1).argmax())
    bow = batch["context_bow"].numpy()[row]
    top = topic_vocab.decode([i for i in bow.argsort()[::-1][:10] if bow[i] > 0])
    print(f"  sentence: {prepared.tokenizer.decode(batch['tokens'].numpy()[row])}")
    print(f"  its context ({int(bow.sum())} topic words), most frequent: {', '.join(top)}")
    return 0


def _progress_verbosity(verbose, stream=None):
    """``train --verbose``: as given, else the progress bar (1) on a terminal and one line
    per epoch (2) otherwise -- a progress bar piped to a file is thousands of backspaces
    (measured: about 31,000 for a 34 s run)."""
    if verbose is not None:
        return verbose
    stream = sys.stdout if stream is None else stream
    try:
        return 1 if stream.isatty() else 2
    except (AttributeError, ValueError):
        return 2


def _train_options(args):
    """``train``'s parsed options as `tfktopic.runs.train_run` keyword arguments."""
    return dict(corpus=args.corpus, format=args.format, preset=args.preset, epochs=args.epochs,
                batch_size=args.batch_size, max_documents=args.max_documents,
                stopwords=args.stopwords, embeddings=args.embeddings, optimizer=args.optimizer,
                learning_rate=args.learning_rate, strategy=args.strategy, seed=args.seed,
                overrides=args.set, verbose=_progress_verbosity(args.verbose),
                split_seed=args.split_seed, subset_seed=args.subset_seed,
                patience=args.patience, precision=args.precision, prepared=args.prepared)


def _tensorboard_callbacks(log_dir):
    """``train --tensorboard DIR``: a `keras.callbacks.TensorBoard`, or a one-line error
    naming the ``tensorboard`` extra when the package is not installed."""
    import importlib.util

    from tfktopic.errors import TfktopicError

    if log_dir is None:
        return []
    if importlib.util.find_spec("tensorboard") is None:
        raise TfktopicError("--tensorboard needs the tensorboard package, not installed with "
                            "tfktopic: pip install 'tfktopic[tensorboard]'")
    import keras

    return [keras.callbacks.TensorBoard(log_dir=str(log_dir))]


def _train(args):
    from tfktopic.runs import train_run

    callbacks = _tensorboard_callbacks(args.tensorboard)  # before any data is read
    train_run(args.model, args.out, **_train_options(args), callbacks=callbacks)
    return 0


def train_settings(argv):
    """The settings ``tfktopic train ARGV`` trains with, resolved without reading data.

    `argv` is parsed by this command line's own parser and resolved by
    `tfktopic.runs.resolve_settings`, as `tfktopic.runs.train_run` does first.

    Args:
        argv: the arguments after ``tfktopic`` (``["train", "rgbn_rnn", ...]``).

    Returns:
        (the parsed options, the settings dict: ``name``, ``model``, ``data``,
        ``training``).

    Example:
    >>> _, settings = train_settings(["train", "tcnlm", "--set", "num_topics=20"])
    >>> settings["model"]["num_topics"]
    20
    """
    from tfktopic.runs import resolve_settings

    args = _parser().parse_args(list(argv))
    if args.command != "train":
        raise ValueError(f"train_settings: not a train command: {argv!r}")
    options = _train_options(args)
    keys = ("preset", "overrides", "epochs", "batch_size", "learning_rate", "stopwords",
            "optimizer", "patience", "precision")
    return args, resolve_settings(args.model, **{key: options[key] for key in keys})


def _evaluation_output(args, directory):
    """Where ``evaluate`` writes its JSON: ``--json``, ``--out DIR``, else the run
    directory -- or, for ``pretrained:NAME``, ``./tfktopic-evaluations/NAME`` (never
    inside the installed package)."""
    import pathlib

    from tfktopic import pretrained
    from tfktopic.errors import TfktopicError

    name = args.run.split(":", 1)[1].strip() if args.run.startswith("pretrained:") else None
    if args.json:
        out = pathlib.Path(args.json)
    elif args.out:
        out = pathlib.Path(args.out) / "evaluation.json"
    elif name is not None:
        out = pathlib.Path("tfktopic-evaluations") / name / "evaluation.json"
    else:
        out = directory / "evaluation.json"
    shipped = pretrained.directory().resolve()
    if out.resolve() == shipped or shipped in out.resolve().parents:
        raise TfktopicError(f"{out}: inside the pretrained models' folder {shipped}; "
                            "write the evaluation elsewhere (--out DIR)")
    return out


def _evaluation_source(args, run):
    """The line naming the corpus ``evaluate`` reads, after checking a recorded one exists.

    Raises:
        TfktopicError: the corpus recorded in run.json (or a split file) no longer exists.
    """
    import pathlib

    from tfktopic.runs.data import given_split
    from tfktopic.errors import TfktopicError

    if args.corpus is not None:
        return f"evaluating on {args.corpus} (named by --corpus)"
    recorded = str(run.config["corpus"])
    if recorded != "lee":
        files = given_split(recorded) or {}
        for path in [recorded, *map(str, files.values())]:
            if not pathlib.Path(path).exists():
                raise TfktopicError(f"{path}: the corpus recorded in {run.path / 'run.json'} no "
                                    "longer exists; name one with --corpus")
        if files:  # a corpus that comes split (PTB): its own test file is scored
            return f"evaluating on {files['test']} (recorded in run.json)"
    return f"evaluating on {recorded} (recorded in run.json)"


def _evaluate(args):
    import json

    from tfktopic.runs import evaluate_run, load_run

    from tfktopic.atomic import write_json
    from tfktopic.runs.directory import resolve_run_dir
    from tfktopic.runs.lock import run_lock

    directory = resolve_run_dir(args.run)
    out = _evaluation_output(args, directory)
    inside = out.resolve().parent == directory.resolve()
    # Writing into the run directory: exclusive with a `train` (or another evaluate) there.
    with run_lock(directory, what="run directory") if inside else contextlib.nullcontext():
        run = load_run(directory)
        print(_evaluation_source(args, run))
        report = evaluate_run(run, corpus=args.corpus, format=args.format,
                              protocol=args.protocol, max_documents=args.max_documents,
                              num_generated=args.num_generated, seed=args.seed,
                              lda_baseline=args.lda_baseline)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, json.loads(json.dumps(report, default=float)))
    print(f"wrote {out}")
    return 0


def _topics(args):
    from tfktopic.runs import load_run, topics_report

    if args.html and not args.html.lower().endswith((".html", ".htm")):
        raise ValueError(f"--html {args.html}: the file must end in .html")
    run = load_run(args.run)
    topics_report(run, top_n=args.top_n, json_path=args.json,
                  dot_path=args.dot, svg_path=args.svg, picture_path=args.picture)
    if args.html:
        from tfktopic.topic_view import save_run_view

        print(f"wrote {save_run_view(run, args.html)}")
    return 0


def _generate(args):
    from tfktopic.runs import generate_text, load_run

    run = load_run(args.run)
    texts = generate_text(run, num=args.num, max_len=args.max_len, topic=args.topic,
                          layer=args.layer, document=args.document, paragraph=args.paragraph,
                          method=args.method, temperature=args.temperature, top_k=args.top_k,
                          seed=args.seed, allow_unk=args.unk, sampler=args.sampler,
                          top_p=args.top_p, log=lambda line: print(line, file=sys.stderr))
    print(("\n\n" if args.paragraph else "\n").join(texts))
    return 0


def _export(args):
    import pathlib

    from tfktopic import backend
    from tfktopic.errors import TfktopicError
    from tfktopic.runs import export_run, load_run

    backend.require_tensorflow("tfktopic export (a SavedModel)")
    import tensorflow as tf

    run = load_run(args.run)
    target = pathlib.Path(args.saved_model)
    parent = next((p for p in [target, *target.parents] if p.exists()), pathlib.Path("."))
    if not os.access(parent, os.W_OK):
        raise TfktopicError(f"{args.saved_model}: cannot write the SavedModel ({parent} is not "
                            "writable); pass --saved-model to a writable place")
    try:
        path = export_run(run, args.saved_model)
    except (tf.errors.PermissionDeniedError, tf.errors.ResourceExhaustedError,
            tf.errors.NotFoundError, tf.errors.FailedPreconditionError) as error:
        reason = str(getattr(error, "message", error)).splitlines()[0]
        raise TfktopicError(f"{args.saved_model}: cannot write the SavedModel ({reason})"
                            ) from None
    print(f"SavedModel written to {path}")
    return 0


def is_out_of_memory(error):
    """Whether `error` is an out-of-memory error of Python, TensorFlow or JAX / XLA.

    `MemoryError`, TensorFlow's ``ResourceExhaustedError`` (by name: TensorFlow need
    not be imported) and JAX's ``XlaRuntimeError`` / ``JaxRuntimeError`` whose message
    starts with XLA's status ``RESOURCE_EXHAUSTED``.
    """
    if isinstance(error, MemoryError):
        return True
    if any(cls.__name__ == "ResourceExhaustedError" for cls in type(error).__mro__):
        return True
    return "RESOURCE_EXHAUSTED" in str(error)[:200]


_SIZE_SETTINGS = ("hidden_dim", "hidden_sizes", "embedding_dim", "num_topics", "topic_sizes",
                  "factor_dim", "ntm_units", "encoder_units", "num_layers", "max_len",
                  "context_len")


def out_of_memory_message(args, error):
    """One line for an out-of-memory `error`: what ran out and which setting to lower."""
    reason = " ".join(str(getattr(error, "message", error) or "").split())[:160]
    given = [item.split("=", 1)[0].strip() for item in getattr(args, "set", None) or []]
    sizes = [key for key in given if key in _SIZE_SETTINGS]
    lower = [f"--set {key}" for key in sizes]
    flag = {"train": "--batch-size", "report": "--batch-size",
            "evaluate": "--max-documents"}.get(getattr(args, "command", None))
    if flag:
        lower.append(flag)
    if not sizes and args.command == "train":
        lower.append("the preset's model size (--set hidden_dim=...)")
    what = f" ({reason})" if reason else ""
    return f"out of memory{what}; lower {' or '.join(lower) or 'the model size'}"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tfktopic <command>: error: ...`` and status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _prepare(args):
    """`tfktopic prepare`: stream a corpus into sharded examples on disk."""
    from tfktopic.data.shards import prepare_corpus

    manifests = prepare_corpus(
        args.corpus, args.format, args.out, seed=args.seed,
        sentences_per_document=args.sentences_per_document, kinds=tuple(args.kinds),
        min_count=args.min_count, min_doc_freq=args.min_doc_freq, stopwords=args.stopwords,
        protocol=args.train_context, max_size=args.max_size)
    for part, manifest in manifests.items():
        counts = {kind: sum(s["count"] for s in entry["shards"])
                  for kind, entry in manifest["kinds"].items()}
        print(f"{part}: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    return 0


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _learning_rate(text):
    from tfktopic.errors import TfktopicError
    from tfktopic.runs.checks import check_learning_rate

    try:
        check_learning_rate(float(text), name="")
    except (TfktopicError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}") from None
    return float(text)


_FORMATS = ["tdlm", "ptb", "imdb", "text", "lee"]
_RUN_HELP = "a run directory written by `tfktopic train`, or pretrained:NAME"


# The choices of ``train``, spelled out so that parsing (and ``--help``) imports no
# TensorFlow / Keras; tests/library/test_cli_hygiene.py checks them against `tfktopic.runs.MODELS`
# and `tfktopic.runs.precision.PRECISIONS`.
MODELS = ("lstm", "doc_lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn", "doc_topicrnn",
          "tcnlm", "rgbn_rnn", "gbn_rnn")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def version_text():
    """``tfktopic --version``: tfktopic's version, the Keras backend and the library versions.

    Returns:
        Lines such as ``tfktopic 0.1.0`` / ``keras 3.15.0 (backend: tensorflow)`` /
        ``tensorflow 2.21.0``: the backend's own package and TensorFlow Probability where
        installed.
    """
    import importlib.metadata

    import keras

    from tfktopic.version import __version__

    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    backend = keras.config.backend()
    lines = [f"tfktopic {__version__}", f"keras {keras.__version__} (backend: {backend})"]
    for package in dict.fromkeys([backend if backend != "jax" else "jax", "tensorflow",
                                  "tensorflow-probability"]):
        if version(package):
            lines.append(f"{package} {version(package)}")
    return "\n".join(lines)


class _Version(argparse.Action):
    """``--version``: print `version_text` and exit 0 (imports Keras only when given)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit(0)


def _parser():
    parser = _Parser(prog="tfktopic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=_Version,
                        help="print tfktopic's version, the Keras backend and the versions of "
                             "Keras, the backend and TensorFlow Probability, and exit")
    parser.add_argument("--verbose", dest="show_logs", action="store_true",
                        help="show TensorFlow's log lines, warnings and tracebacks on stderr "
                             "(before the command: tfktopic --verbose train ...)")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train", help="train a model into a run directory and evaluate it",
        description="Train a model on a corpus split 80/10/10 by document, with a validation "
                    "pass every epoch and checkpoints in --out (the same command resumes after "
                    "an interruption); then print the test perplexity (leak-free) next to a "
                    "unigram model, the topics and topic-conditioned sentences.")
    train.add_argument("model", choices=MODELS, help="which model")
    train.add_argument("--corpus", default="lee",
                       help="'lee' (embedded news corpus) or a path (default: lee)")
    train.add_argument("--format", choices=_FORMATS, default=None,
                       help="corpus format (inferred for lee, *.jsonl.gz and ptb.* files)")
    train.add_argument("--prepared", default=None, metavar="DIR",
                       help="train from the shards of `tfktopic prepare CORPUS --out DIR` "
                            "(bounded memory) instead of reading --corpus into memory")
    train.add_argument("--preset", default="small",
                       help="preset of the model family, e.g. small (default), paper, "
                            "reference_code (rGBN), paper_large (TCNLM)")
    train.add_argument("--epochs", type=_positive, default=None,
                       help="override the preset's epochs (with --patience: the maximum)")
    train.add_argument("--patience", type=_positive, default=None,
                       help="early stopping: stop after N epochs without a lower validation "
                            "perplexity; the best epoch is kept (default: the preset's)")
    train.add_argument("--batch-size", type=_positive, default=None,
                       help="override the preset's batch size (windows; rGBN: documents)")
    train.add_argument("--learning-rate", type=_learning_rate, default=None,
                       help="override the preset's learning rate")
    train.add_argument("--max-documents", type=_positive, default=None,
                       help="use only the first N documents (quick runs)")
    train.add_argument("--subset-seed", type=int, default=None,
                       help="with --max-documents: a seeded random N documents (kept in file "
                            "order) instead of the first N")
    train.add_argument("--stopwords", default=None,
                       help="'gensim', 'none' or a stop-list file (default: the preset's)")
    train.add_argument("--embeddings", default=None,
                       help="word2vec .bin/.txt file or KeyedVectors converted with "
                            "convert_word2vec; the embedding size follows the vectors")
    train.add_argument("--optimizer", choices=["adam", "sgld", "psgld"], default="adam",
                       help="adam (default) or SG-MCMC (any model; step sizes of the "
                            "sgmcmc_ptb small preset)")
    train.add_argument("--precision", choices=list(PRECISIONS), default=None,
                       help="Keras dtype policy: float32 (default), mixed_bfloat16 or "
                            "mixed_float16 (variables, softmax loss, topic model and KL "
                            "stay float32)")
    train.add_argument("--strategy", choices=["none", "mirrored", "multiworker",
                                              "data_parallel"],
                       default="none",
                       help="mirrored / multiworker: tf.distribute (TensorFlow; multiworker "
                            "reads TF_CONFIG); data_parallel: keras.distribution.DataParallel "
                            "over all devices under KERAS_BACKEND=jax (MirroredStrategy under "
                            "TensorFlow); several JAX processes: start one per host with "
                            "KERAS_DISTRIBUTION_JOB_ADDRESSES=host:port,... (the first the "
                            "coordinator), KERAS_DISTRIBUTION_NUM_PROCESSES=N and "
                            "KERAS_DISTRIBUTION_PROCESS_ID=0..N-1")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a preset setting, e.g. --set hidden_dim=16 "
                            "--set 'hidden_sizes=[16, 8]' (repeatable; JSON values)")
    train.add_argument("--out", default="runs/train", help="run directory (default: runs/train)")
    train.add_argument("--tensorboard", default=None, metavar="DIR",
                       help="write TensorBoard logs to DIR (needs the extra: "
                            "pip install 'tfktopic[tensorboard]')")
    train.add_argument("--seed", type=int, default=0,
                       help="initialisation and shuffling seed (and the split's by default)")
    train.add_argument("--split-seed", type=int, default=None,
                       help="seed of the 80/10/10 split by document (default: --seed); fix it "
                            "to compare training seeds on one split")
    train.add_argument("--verbose", type=int, default=None, choices=[0, 1, 2],
                       help="0: silent, 1: progress bar, 2: one line per epoch (default: 1 "
                            "on a terminal, 2 when stdout is a file or a pipe)")
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "evaluate", help="perplexity, NPMI coherence and BLEU of a trained run",
        description="Score a run: perplexity on a corpus (default: the run's own test split, "
                    "recomputed from run.json), NPMI coherence of the topics' top-10 words "
                    "against that corpus, and BLEU-3/4 of generated sentences against its "
                    "sentences. Reads only the corpus named by --corpus or the one recorded in "
                    "the run's run.json, and says which. Printed and written as JSON (default "
                    "DIR/evaluation.json; pretrained:NAME: ./tfktopic-evaluations/NAME).")
    evaluate.add_argument("run", metavar="DIR", help=_RUN_HELP)
    evaluate.add_argument("--corpus", default=None,
                          help="score this whole corpus ('lee' or a path) instead of the test "
                               "split")
    evaluate.add_argument("--format", choices=_FORMATS, default=None,
                          help="format of --corpus (inferred, else the run's)")
    evaluate.add_argument("--protocol", choices=["preceding", "all-other", "all_other", "none"],
                          default="preceding",
                          help="topic context: preceding sentences only (leak-free, default), "
                               "all other sentences (the papers'; lets future text in) or none "
                               "(every context empty: what the topics are worth to the model)")
    evaluate.add_argument("--max-documents", type=_positive, default=None,
                          help="with --corpus: only its first N documents")
    evaluate.add_argument("--num-generated", type=int, default=100,
                          help="sentences generated for BLEU (generating models; 0: skip)")
    evaluate.add_argument("--json", default=None,
                          help="output JSON file (default OUT/evaluation.json)")
    evaluate.add_argument("--out", default=None, metavar="OUT",
                          help="folder of evaluation.json (default: the run directory; "
                               "pretrained:NAME: ./tfktopic-evaluations/NAME)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--lda-baseline", action="store_true",
                          help="topic models: also fit a gensim LDA with as many topics on the "
                               "run's training split and report its NPMI and diversity")
    evaluate.set_defaults(handler=_evaluate)

    topics = commands.add_parser(
        "topics", help="top words of the topics (rGBN/GBN: the hierarchy)",
        description="Print the top words of every topic; for rgbn_rnn / gbn_rnn every layer, "
                    "with the hierarchy as JSON and a Graphviz DOT / SVG picture.")
    topics.add_argument("run", metavar="DIR", help=_RUN_HELP)
    topics.add_argument("--top-n", type=_positive, default=10, help="words per topic")
    topics.add_argument("--json", default=None,
                        help="write the topics (rGBN/GBN: the hierarchy) as JSON")
    topics.add_argument("--dot", default=None, help="rGBN/GBN: write the hierarchy as DOT")
    topics.add_argument("--svg", default=None,
                        help="rGBN/GBN: render the hierarchy as SVG (Graphviz's layout when "
                             "`dot` is installed, else drawn with matplotlib)")
    topics.add_argument("--picture", default=None,
                        help="any topic model: a .svg or .png picture of the topics (rGBN/GBN: "
                             "the hierarchy; others: top words with their weights)")
    topics.add_argument("--html", default=None, metavar="FILE",
                        help="an interactive, self-contained HTML view: intertopic distance "
                             "map and top words by relevance (rGBN/GBN: a layer selector)")
    topics.set_defaults(handler=_topics)

    generate = commands.add_parser(
        "generate", help="generate text with a trained run",
        description="Generate sentences (every model but LDA+LSTM; the LSTMs from <bos> "
                    "alone): from the prior, from a topic (--topic K, rGBN/GBN "
                    "--layer L, 1 = word level), from the topics of a text file (--document), "
                    "or rGBN/GBN paragraphs whose topics "
                    "evolve from sentence to sentence (--paragraph N).")
    generate.add_argument("run", metavar="DIR", help=_RUN_HELP)
    generate.add_argument("--topic", type=int, default=None, help="condition on topic K (0-based)")
    generate.add_argument("--layer", type=int, default=None,
                          help="rGBN/GBN: layer of --topic (1-based; 1 = word-level topics)")
    generate.add_argument("--document", default=None,
                          help="condition on the topics of this text file")
    generate.add_argument("--paragraph", type=int, default=None, metavar="N",
                          help="rGBN/GBN: paragraphs of N sentences")
    generate.add_argument("--num", type=int, default=None,
                          help="sentences (default 3), or paragraphs with --paragraph (default 1)")
    generate.add_argument("--max-len", type=int, default=30, help="maximum tokens per sentence")
    generate.add_argument("--method", choices=["greedy", "temperature", "top_k"], default="top_k")
    generate.add_argument("--temperature", type=float, default=1.0)
    generate.add_argument("--top-k", type=int, default=10)
    generate.add_argument("--sampler", choices=["greedy", "random", "top_k", "top_p"],
                          default=None, help="the sampler (overrides --method)")
    generate.add_argument("--top-p", type=float, default=0.9,
                          help="nucleus mass of --sampler top_p")
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--unk", action=argparse.BooleanOptionalAction, default=False,
                          help="allow <unk> in the text (default: no)")
    generate.set_defaults(handler=_generate)

    export = commands.add_parser(
        "export", help="export a run as a TensorFlow SavedModel",
        description="Write the run's model with serving signatures and its vocabularies as a "
                    "TensorFlow SavedModel (tfktopic.export.export_saved_model).")
    export.add_argument("run", metavar="DIR", help=_RUN_HELP)
    export.add_argument("--saved-model", required=True, metavar="OUT",
                        help="output SavedModel directory (new or empty)")
    export.set_defaults(handler=_export)

    report = commands.add_parser(
        "report", help="corpus statistics, vocabularies and a sample batch",
        description="Read a corpus and report what the data pipeline makes of it.")
    report.add_argument("--corpus", default="lee",
                        help="'lee' (embedded news corpus) or a path (default: lee)")
    report.add_argument("--format", choices=_FORMATS, default=None,
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
    report.set_defaults(handler=_report)

    prepare = commands.add_parser(
        "prepare", help="stream a corpus into sharded examples on disk (bounded memory)",
        description="Split a TDLM/PTB corpus 80/10/10, build the vocabularies in one streaming "
                    "pass and write the examples to .npz shards with a manifest.")
    prepare.add_argument("corpus", help="a TDLM, PTB, IMDB (.jsonl.gz or aclImdb/) or raw text "
                                        "file")
    prepare.add_argument("--out", required=True, help="the prepared directory")
    prepare.add_argument("--format", choices=("tdlm", "ptb", "imdb", "text"), default="tdlm",
                         help="text: documents separated by blank lines (default: %(default)s)")
    prepare.add_argument("--kinds", nargs="+", choices=("sentences", "streams"),
                         default=["sentences"],
                         help="examples to write: sentences (the window and chunk models: lstm, "
                              "lda_lstm, topicrnn, tcnlm, rgbn_rnn, gbn_rnn, doc_lstm_chunked), "
                              "streams (doc_lstm, doc_topicrnn); default: sentences")
    prepare.add_argument("--min-count", type=int, default=3)
    prepare.add_argument("--max-size", type=_positive, default=None,
                         help="keep at most this many LM vocabulary entries (the most frequent; "
                              "specials included), as the data setting max_size")
    prepare.add_argument("--train-context", choices=("preceding", "all_other"),
                         default="all_other",
                         help="topic context of the training windows (the data setting "
                              "train_context of the topic models trained --prepared; default "
                              "all_other, as training from a corpus in memory; validation and "
                              "test are always the leak-free 'preceding')")
    prepare.add_argument("--min-doc-freq", type=int, default=1)
    prepare.add_argument("--stopwords", default="gensim")
    prepare.add_argument("--sentences-per-document", type=int, default=10)
    prepare.add_argument("--seed", type=int, default=0)
    prepare.set_defaults(handler=_prepare)
    return parser


def main(argv=None):
    """Entry point of the ``tfktopic`` console script; returns the exit status.

    Every user error (missing or malformed file, unknown model or preset, an
    option that does not apply, a corrupt checkpoint) exits with status 2 and
    one line ``tfktopic <command>: error: ...`` on stderr.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = bool(argv) and argv[0] == "--verbose"
    if not verbose:
        # Before TensorFlow is imported (the parser imports it).
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with contextlib.ExitStack() as stack:
        if not verbose:
            stack.enter_context(_quiet())
        args = _parser().parse_args([str(a) for a in argv])
        from tfktopic.errors import TfktopicError

        try:
            return args.handler(args)
        except ImportError as error:                # a backend that is not installed
            message = missing_backend_message(error)
            if message is None:
                raise
            print(f"tfktopic {args.command}: error: {message}", file=sys.stderr)
            return 2
        except (TfktopicError, ValueError, OSError) as error:
            if verbose:
                import traceback

                traceback.print_exc()
            message = " ".join(str(error).split("\n")) or type(error).__name__
            print(f"tfktopic {args.command}: error: {message}", file=sys.stderr)
            return 2
        except Exception as error:  # noqa: BLE001 -- out of memory only; the rest re-raised
            if not is_out_of_memory(error):
                raise
            if verbose:
                import traceback

                traceback.print_exc()
            print(f"tfktopic {args.command}: error: {out_of_memory_message(args, error)}",
                  file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"tfktopic {args.command}: interrupted; run the same command again to resume",
                  file=sys.stderr)
            return 130


#: The extra that installs each Keras backend tfktopic runs on.
BACKEND_EXTRAS = {"tensorflow": "tensorflow", "jax": "jax"}


def missing_backend_message(error):
    """One line for an ImportError of Keras' backend package, or `None` for another one.

    Example:
    >>> missing_backend_message(ModuleNotFoundError("No module named 'jax'", name="jax"))[:52]
    "Keras' backend 'jax' is not installed: pip install '"
    """
    missing = (getattr(error, "name", None) or "").split(".")[0]
    if missing not in BACKEND_EXTRAS:
        return None
    other = next(name for name in BACKEND_EXTRAS if name != missing)
    return (f"Keras' backend {missing!r} is not installed: pip install "
            f"'tfktopic[{BACKEND_EXTRAS[missing]}]', or use {other} "
            f"(pip install 'tfktopic[{BACKEND_EXTRAS[other]}]' and KERAS_BACKEND={other})")


@contextlib.contextmanager
def _quiet():
    """Silence what TensorFlow and Keras write to stderr besides our own lines.

    TensorFlow's native start-up lines (absl ``I0000 ...``, the ``cuInit``
    error) ignore ``TF_CPP_MIN_LOG_LEVEL`` in part, so file descriptor 2 points
    to /dev/null for the command, while Python's ``sys.stderr`` keeps writing
    to the real stderr; Python warnings (Keras' ``shuffle=True`` warning) and
    absl / TensorFlow Python log records below ERROR are dropped.
    """
    loggers = [logging.getLogger(name) for name in ("absl", "tensorflow", "keras")]
    levels = [logger.level for logger in loggers]
    saved_stderr, saved_fd = sys.stderr, None
    try:
        real = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        real = False  # captured (tests): Python's stderr does not go to fd 2 anyway
    try:
        saved_fd = silence_native_stderr()
        if real:
            sys.stderr = os.fdopen(os.dup(saved_fd), "w", buffering=1,
                                   encoding=saved_stderr.encoding, errors="backslashreplace")
    except OSError:
        saved_fd = None
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        if saved_fd is not None:
            if sys.stderr is not saved_stderr:
                sys.stderr.flush()
                sys.stderr.close()
                sys.stderr = saved_stderr
            os.dup2(saved_fd, 2)
            os.close(saved_fd)


if __name__ == "__main__":
    sys.exit(main())
