"""A run's data: reading, split, data rules, vocabularies, examples, pipelines and scoring.

`prepare_data` is the one data path of the package: ``tfktopic train``, the
scripts and the benchmarks all call it, so a benchmark number is computed on
exactly the data a user gets from ``tfktopic train`` with the same settings.
The pieces it composes (`read_corpus`, `split_corpus`, `resolve_data_rules`,
`build_vocabularies`, `make_examples`, `make_dataset`, `score_perplexity`)
are public for `evaluate_run`, which recomputes a run's test split from
``run.json``. What a model is fed is its own business: each function asks the
model's `tfktopic.data.preprocessors.Preprocessor`
(``registry.get(model_name).preprocessor()``) and names no model itself.
"""

import dataclasses
import pathlib

import numpy as np

from tfktopic.data.preprocessors import StreamExamples, WINDOW_TRAIN_CONTEXTS  # noqa: F401
from tfktopic.errors import TfktopicError
from tfktopic.models import registry
from tfktopic.presets import resolve_data_rules  # noqa: F401  (re-exported)
from tfktopic.runs.settings import SPLIT

__all__ = ["RunData", "StreamExamples", "prepare_data", "resolve_format", "read_corpus",
           "given_split", "split_corpus",
           "resolve_data_rules", "build_vocabularies", "make_examples", "make_dataset",
           "score_perplexity", "npmi_reference", "NPMI_REFERENCE", "NPMI_WINDOW",
           "perplexity_message", "protocol_label", "normalize_protocol", "preprocessor",
           "train_protocol"]

#: The one NPMI reference-corpus rule of the package (see `npmi_reference`).
NPMI_REFERENCE = "the training split (window 20)"
NPMI_WINDOW = 20


# -------------------------------------------------------------------- reading and split
def resolve_format(corpus, format=None):
    """The corpus format: `format`, or inferred ("lee", ``*.jsonl.gz``, ``ptb.*``).

    Raises:
        ValueError: when it cannot be inferred (message names ``--format``).
    """
    from tfktopic.data.corpora import FORMATS, infer_format

    if format is not None:
        return format
    if str(corpus) == "lee":
        return "lee"
    try:
        return infer_format(pathlib.Path(str(corpus)))
    except ValueError:
        raise ValueError(f"--format: cannot tell the format of {str(corpus)!r}; pass --format "
                         f"{'|'.join(FORMATS)}") from None


def read_corpus(source, format, data, max_documents=None, subset_seed=None, will_split=False):
    """Read a run's corpus with its data settings.

    Args:
        source: "lee" or a path.
        format: one of `tfktopic.data.FORMATS`.
        data: the run's data settings (``sentences_per_document`` for PTB).
        max_documents: keep only N documents: the first N, or with
            `subset_seed` a seeded random N (kept in file order). IMDB with
            the first N reads only N.
        subset_seed: seed of the random subset (`None`: the first N).
        will_split: the corpus is to be split 80/10/10: refuse a TDLM/PTB file
            too small for that after a cheap line count, before parsing it.

    Returns:
        A `Corpus`.
    """
    from tfktopic.data import load_corpus

    if max_documents is not None and int(max_documents) < 1:
        raise ValueError(f"--max-documents must be >= 1, got {max_documents}")
    kwargs = {}
    if format == "ptb":
        kwargs["sentences_per_document"] = int(data.get("sentences_per_document", 10))
    if format == "imdb" and max_documents and subset_seed is None:
        kwargs["limit"] = int(max_documents)
    if will_split and format in ("tdlm", "ptb") and str(source) != "lee":
        _refuse_too_few_documents(source, format, kwargs, max_documents)
    corpus = load_corpus(source, format=format, **kwargs)
    return subset_documents(corpus, max_documents, subset_seed)


def _empty_parts(num_documents, seed=0):
    """The parts of the 80/10/10 split that `num_documents` documents leave empty."""
    from tfktopic.data import Corpus

    parts = Corpus([[]] * int(num_documents)).split(SPLIT, seed=seed)
    return [name for name, part in zip(("train", "valid", "test"), parts) if len(part) == 0]


def _refuse_too_few_documents(source, format, kwargs, max_documents):
    """Refuse, after a cheap count and before any parsing, a corpus too small to split."""
    from tfktopic.data.corpora import count_documents

    n = count_documents(source, format, kwargs.get("sentences_per_document", 10))
    if max_documents:
        n = min(n, int(max_documents))
    empty = _empty_parts(n) if n < 1000 else []
    if empty:
        raise TfktopicError(
            f"{source}: {n} documents leave the {'/'.join(empty)} split empty (80/10/10 by "
            "document); use a corpus (or --max-documents) of at least 10 documents")


def subset_indices(num_documents, max_documents=None, subset_seed=None):
    """The indices, in file order, of the documents `subset_documents` keeps of
    `num_documents`: the first `max_documents`, or a seeded random subset."""
    if not max_documents or int(max_documents) >= int(num_documents):
        return list(range(int(num_documents)))
    n = int(max_documents)
    if subset_seed is None:
        return list(range(n))
    order = np.random.default_rng(int(subset_seed)).permutation(int(num_documents))
    return sorted(order[:n].tolist())


def subset_documents(corpus, max_documents=None, subset_seed=None):
    """The first `max_documents` documents, or a seeded random subset in file order
    (`subset_indices`)."""
    if not max_documents or int(max_documents) >= len(corpus):
        return corpus
    return corpus.subset(subset_indices(len(corpus), max_documents, subset_seed))


def given_split(corpus):
    """The train / valid / test files of a corpus that comes split, or `None`.

    A path named ``NAME.train.EXT`` next to ``NAME.valid.EXT`` and
    ``NAME.test.EXT`` (Mikolov's PTB: ``ptb.train.txt``, ...) is used with its
    own split -- the papers' -- instead of an 80/10/10 split by document.

    Returns:
        dict ``train`` / ``valid`` / ``test`` of paths, or `None`.
    """
    if str(corpus) == "lee" or not isinstance(corpus, (str, pathlib.PurePath)):
        return None
    path = pathlib.Path(str(corpus))
    parts = path.name.split(".")
    if "train" not in parts:
        return None
    i = parts.index("train")
    files = {split: path.with_name(".".join(parts[:i] + [split] + parts[i + 1:]))
             for split in ("train", "valid", "test")}
    return files if all(f.is_file() for f in files.values()) else None


def split_corpus(corpus, seed):
    """80/10/10 split by document (seeded); dict ``train``/``valid``/``test``.

    Raises:
        TfktopicError: when a part would be empty (too few documents).
    """
    parts = dict(zip(("train", "valid", "test"), corpus.split(SPLIT, seed=seed)))
    empty = [name for name, part in parts.items() if len(part) == 0]
    if empty:
        raise TfktopicError(
            f"{corpus.source or 'corpus'}: {len(corpus)} documents leave the {'/'.join(empty)} "
            "split empty (80/10/10 by document); use a corpus (or --max-documents) of at "
            "least 10 documents")
    return parts


def build_vocabularies(train, data):
    """The LM and topic vocabularies of a run, built on its training part.

    Args:
        train: the training `Corpus`.
        data: data settings (``min_count``, ``max_size``, ``stopwords``,
            ``max_freq_fraction``, ``min_doc_freq``).

    Returns:
        (lm_vocab, topic_vocab).
    """
    from tfktopic.data import TopicVocabulary, Vocabulary

    lm_vocab = Vocabulary.build(train, min_count=int(data["min_count"]),
                                max_size=data.get("max_size"))
    topic_vocab = TopicVocabulary.build(train, lm_vocab, stopwords=data["stopwords"],
                                        max_freq_fraction=float(data["max_freq_fraction"]),
                                        min_doc_freq=int(data["min_doc_freq"]))
    return lm_vocab, topic_vocab


# ----------------------------------------------------------------- examples, pipelines
def preprocessor(model_name):
    """The `tfktopic.data.preprocessors.Preprocessor` of a model (its data kind and flags)."""
    return registry.get(model_name).preprocessor()


def train_protocol(model_name, data):
    """The training context of a model, the data setting ``train_context``.

    "all_other" (the default: every other sentence of the document, as the papers
    trained) or "preceding" (the preceding sentences only, as every model is scored:
    training then sees the contexts it is evaluated with); the streamed models also
    take Zheng et al.'s "whole_document" (`tfktopic.data.streams.CONTEXTS`).
    (`Preprocessor.train_protocol` of the model.)

    Raises:
        ValueError: a context the model's examples cannot be built with (named).
    """
    return preprocessor(model_name).train_protocol(data)


def make_examples(model_name, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                  whole_documents=False):
    """Sentence windows, document chunks or document streams of a corpus part for a model.

    Args:
        model_name: a model name; its data kind (`ModelEntry.data_kind`) decides:
            "windows" sentence windows, "chunks" document chunks, "streams"
            document streams (`StreamExamples`).
        corpus: a `Corpus` (part).
        lm_vocab, topic_vocab: the run's vocabularies.
        data: data settings (``max_len``, ``context_len``, ``sentences_per_chunk``).
        protocol: "preceding" (leak-free), "all_other" (training; the papers'
            evaluation protocol) or "none" (empty contexts: an ablation).
        whole_documents: chunked models: one chunk per document (J = the
            longest document's window count), so the document-level LSTM
            carries its state over whole documents.

    Returns:
        `SentenceExamples`, `DocumentSequences` or `StreamExamples`.
    """
    return preprocessor(model_name).examples(corpus, lm_vocab, topic_vocab, data,
                                             protocol=protocol, whole_documents=whole_documents)


def make_dataset(model_name, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                 initial_epoch=0):
    """The tf.data pipeline of `examples` for a model (`Preprocessor.dataset`).

    Sentence models get ``sentence_dataset`` batches of `batch_size` windows
    (TopicRNN with ``doc_targets``); rGBN / GBN ``document_dataset`` batches of
    `batch_size` chunks (the papers' B documents); the chunked document-level
    LSTM batches of about `batch_size` windows (``batch_size // J`` chunks, at
    least 1); the streamed models `batch_size` parallel document streams
    (`tfktopic.data.streams.document_stream_dataset`: endless when shuffled,
    starting at `initial_epoch`; always fixed shapes). `drop_remainder` gives
    fixed-shape batches (timing). Under another backend than TensorFlow the same dicts
    come as numpy from a `keras.utils.PyDataset` (`tfktopic.data.batches`).
    """
    return preprocessor(model_name).dataset(examples, batch_size, shuffle=shuffle, seed=seed,
                                            drop_remainder=drop_remainder,
                                            initial_epoch=initial_epoch)


# -------------------------------------------------------------------------- RunData
@dataclasses.dataclass
class RunData:
    """The prepared data of a run (`prepare_data`).

    Attributes:
        model_name: the model the examples are cut for (its `preprocessor`).
        corpus: the corpus read (after ``max_documents``; a corpus that came
            split: its training part).
        parts: dict ``train`` / ``valid`` / ``test`` of `Corpus` (80/10/10 by document).
        lm_vocab, topic_vocab: the vocabularies, built on ``parts["train"]``.
        data: the resolved data settings (`resolve_data_rules`), as recorded in run.json.
        examples: dict of the splits' examples: training contexts ``all_other``
            (the papers'), validation and test ``preceding`` (leak-free).
        notes: lines about resolved data rules (printed by `train_run`).

    Example:
    >>> from tfktopic import runs
    >>> settings = runs.preset_settings("tcnlm", "small")
    >>> data = runs.prepare_data(settings, "lee")                       # doctest: +SKIP
    >>> batch = next(iter(data.dataset("train", 64)))                   # doctest: +SKIP
    """

    model_name: str
    corpus: object
    parts: dict
    lm_vocab: object
    topic_vocab: object
    data: dict
    examples: dict
    notes: list = dataclasses.field(default_factory=list)

    @property
    def tokenizer(self):
        """The `tfktopic.tokenizer.Tokenizer` of the two vocabularies."""
        from tfktopic.tokenizer import Tokenizer

        return Tokenizer(self.lm_vocab, self.topic_vocab)

    @property
    def preprocessor(self):
        """The model's `tfktopic.data.preprocessors.Preprocessor`."""
        return preprocessor(self.model_name)

    @property
    def unit(self):
        """"documents" (streamed), "chunks" (document-chunked models) or "windows"."""
        return self.preprocessor.unit

    def dataset(self, split, batch_size, shuffle=None, seed=0, drop_remainder=False,
                initial_epoch=0):
        """The tf.data pipeline of a split (`make_dataset`; shuffled for "train" by default)."""
        if shuffle is None:
            shuffle = split == "train"
        return make_dataset(self.model_name, self.examples[split], batch_size, shuffle=shuffle,
                            seed=seed, drop_remainder=drop_remainder,
                            initial_epoch=initial_epoch)

    def steps(self, split, batch_size, drop_remainder=False):
        """Batches of one epoch of a split (streamed training: `steps_per_epoch`)."""
        return self.preprocessor.steps(self.examples[split], batch_size,
                                       drop_remainder=drop_remainder, training=split == "train")

    def training_stream(self, batch_size, seed=0, initial_epoch=0, dataset=None):
        """The training stream from epoch `initial_epoch` on, and the steps of one epoch.

        Args:
            batch_size: the run's batch size.
            seed: the shuffling seed.
            initial_epoch: epochs already done (a resumed run).
            dataset: one shuffled epoch made earlier (`dataset`; made here when `None`).

        Returns:
            (stream for ``fit``, steps_per_epoch).
        """
        from tfktopic.runs import checkpoints

        if self.preprocessor.kind == "streams":
            # An endless seeded stream of document orders (numpy, not tf.data's seed):
            # made here at the epoch it resumes from.
            return (self.dataset("train", batch_size, seed=seed, initial_epoch=int(initial_epoch)),
                    self.steps("train", batch_size))
        # Repeated, epoch k's batches are the k-th reshuffle of the seeded pipeline
        # whether the run starts at 0 or resumes at k (`checkpoints.epoch_data`).
        if dataset is None:
            dataset = self.dataset("train", batch_size, shuffle=True, seed=seed)
        return checkpoints.epoch_data(dataset, int(initial_epoch))

    def score_test(self, model, batch_size=64):
        """The test perplexity (leak-free "preceding"; `score_perplexity`), per document."""
        result, _ = score_perplexity(self.model_name, model, self.parts["test"], self.lm_vocab,
                                     self.topic_vocab, self.data, "preceding", batch_size)
        return result

    def unigram_test(self):
        """The unigram baseline's perplexity on the same test targets."""
        from tfktopic.data.preprocessors import sentence_windows
        from tfktopic.evaluation.perplexity import unigram_perplexity

        return unigram_perplexity(self.lm_vocab, sentence_windows(
            self.parts["test"], self.lm_vocab, self.topic_vocab, self.data))

    def for_model(self, model_name):
        """The same split, vocabularies and data settings, with the examples of another model.

        E.g. the sentence windows of an LSTM baseline beside an rGBN-RNN's
        document chunks.
        """
        if model_name == self.model_name:
            return self
        if preprocessor(model_name).shares_examples(self.preprocessor):
            # Same kind of examples (windows, or chunks of J windows): shared.
            return dataclasses.replace(self, model_name=model_name)
        examples = {name: make_examples(model_name, self.parts[name], self.lm_vocab,
                                        self.topic_vocab, self.data,
                                        protocol=train_protocol(model_name, self.data)
                                        if name == "train" else "preceding")
                    for name in self.parts}
        return dataclasses.replace(self, model_name=model_name, examples=examples)

    def with_protocol(self, protocol):
        """The same data with the validation and test examples under another protocol.

        Args:
            protocol: "preceding" (leak-free, the default of `prepare_data`) or
                "all_other" (the papers': the context lets future text in).
        """
        protocol = normalize_protocol(protocol)
        examples = dict(self.examples)
        for name in ("valid", "test"):
            examples[name] = make_examples(self.model_name, self.parts[name], self.lm_vocab,
                                           self.topic_vocab, self.data, protocol=protocol)
        return dataclasses.replace(self, examples=examples)

    def npmi_reference(self, words, window_size=NPMI_WINDOW):
        """`ReferenceCounts` of `words` in this run's training split (`npmi_reference`)."""
        return npmi_reference(self.parts["train"], words, window_size)

    def describe(self):
        """A JSON-ready summary: documents per split, vocabulary sizes, example counts."""
        return {"corpus": str(self.corpus.source or ""),
                "documents": {k: len(v) for k, v in self.parts.items()},
                "split": f"by document {'/'.join(str(round(100 * f)) for f in SPLIT)}",
                "lm_vocab": len(self.lm_vocab), "topic_vocab": len(self.topic_vocab),
                f"train_{self.unit}": len(self.examples["train"]),
                "train_targets": int(self.examples["train"].num_targets),
                "test_targets": int(self.examples["test"].num_targets)}


def prepare_data(settings, corpus, format=None, max_documents=None, seed=0, subset_seed=None,
                 model_name=None):
    """Read, split, resolve the data rules, build vocabularies and examples of a run.

    The one data path of the package (CLI, scripts, benchmarks).

    Args:
        settings: `preset_settings` output (``name`` and ``data`` are used;
            ``data["stopwords"]`` a stop-list path, "gensim" or "none").
        corpus: "lee", a corpus path, a `Corpus`, or a dict ``train`` /
            ``valid`` / ``test`` of `Corpus` for a corpus that comes split
            (then no 80/10/10 split is made and `max_documents` applies to
            each part). A path with sibling split files (`given_split`, e.g.
            ``ptb.train.txt``) is read as such a dict.
        format: corpus format (inferred for lee, ``*.jsonl.gz``, ``ptb.*``).
        max_documents: use only N documents (the first N, or a seeded random
            N with `subset_seed`).
        seed: seed of the 80/10/10 split by document.
        subset_seed: seed of the random document subset (`None`: the first N).
        model_name: the model whose examples to cut (default ``settings["name"]``).

    Returns:
        A `RunData`.

    Raises:
        ValueError / TfktopicError: unknown format, too few documents, ...
    """
    model_name = model_name or settings["name"]
    data = settings["data"]
    files = given_split(corpus)
    if files is not None:
        format = resolve_format(corpus, format)
        corpus = {name: read_corpus(path, format, data) for name, path in files.items()}
    if isinstance(corpus, dict):
        if sorted(corpus) != ["test", "train", "valid"]:
            raise ValueError(f"a split corpus needs the parts train, valid and test, got "
                             f"{', '.join(sorted(corpus))}")
        parts = {name: subset_documents(corpus[name], max_documents, subset_seed)
                 for name in ("train", "valid", "test")}
        source = parts["train"]
    else:
        if isinstance(corpus, (str, pathlib.PurePath)):
            source = read_corpus(corpus, resolve_format(corpus, format), data, max_documents,
                                 subset_seed, will_split=True)
        else:
            source = subset_documents(corpus, max_documents, subset_seed)
        parts = split_corpus(source, seed)
    data, notes = resolve_data_rules(data, len(parts["train"]))
    lm_vocab, topic_vocab = build_vocabularies(parts["train"], data)
    examples = {name: make_examples(model_name, part, lm_vocab, topic_vocab, data,
                                    protocol=train_protocol(model_name, data)
                                    if name == "train" else "preceding")
                for name, part in parts.items()}
    return RunData(model_name, source, parts, lm_vocab, topic_vocab, data, examples, notes)


# ------------------------------------------------------------------------------ NPMI
def npmi_reference(train, words, window_size=NPMI_WINDOW):
    """The NPMI reference counts of the package: the run's **training split**.

    The one reference-corpus rule for topic coherence, used by
    ``tfktopic train`` / ``evaluate``, the scripts and the benchmarks. Lau et
    al. (2014) count co-occurrences in an external corpus (Wikipedia) that is
    independent of the evaluated models. We have no such corpus for every
    dataset, so we take the text every model of a run was given and that no
    score is taken on: the training split. It is the same for every model and
    entry point (so coherence numbers are comparable), holds 80 % of the
    documents (stabler counts than the 10 % test split), is available for every
    corpus, and keeps the held-out documents for perplexity only. Values are
    not comparable with the papers' Wikipedia-based tables.

    Args:
        train: the training `Corpus` (documents of sentences of tokens).
        words: the words to count (the topics' words).
        window_size: Lau et al.'s sliding window (20).

    Returns:
        `tfktopic.evaluation.ReferenceCounts`.
    """
    from tfktopic.evaluation import ReferenceCounts

    documents = ([w for sentence in document for w in sentence] for document in train)
    return ReferenceCounts(documents, sorted(set(words)), window_size=window_size)


# --------------------------------------------------------------------------- scoring
def protocol_label(model_name, protocol, data=None):
    """The protocol label recorded with a perplexity (`Preprocessor.protocol_label`)."""
    return preprocessor(model_name).protocol_label(protocol, data or {})


def perplexity_message(model_name, result):
    """The line printed with a test perplexity, naming its protocol."""
    return preprocessor(model_name).perplexity_message(result)


def normalize_protocol(protocol):
    """"preceding", "all_other" (accepts "all-other") or "none"; ValueError naming
    ``--protocol``."""
    protocol = str(protocol).replace("-", "_")
    if protocol not in ("preceding", "all_other", "none"):
        raise ValueError(f"--protocol must be 'preceding', 'all-other' or 'none', got "
                         f"{protocol!r}")
    return protocol


def score_perplexity(model_name, model, part, lm_vocab, topic_vocab, data, protocol="preceding",
                     batch_size=64, whole_documents=None):
    """Perplexity of `model` on a corpus part (the one scoring used by train and evaluate).

    Validation during training is computed the same way (the same examples
    and model call), so early stopping selects on what is reported.

    Args:
        model_name, model: the model's name and its Keras model.
        part: the `Corpus` part to score.
        lm_vocab, topic_vocab, data: the run's vocabularies and data settings.
        protocol: "preceding" (leak-free), "all_other" (the papers') or "none" (no
            topic context: an ablation).
        batch_size: evaluation batch size (does not change the value; the
            streamed models use at most their ``max_streams``).
        whole_documents: the chunked document LSTM: one chunk per document
            (default True: it then carries its state over whole documents).

    Returns:
        (PerplexityResult with the per-document sums ``document_nll`` /
        ``document_tokens`` over the documents of `part`, examples).
    """
    return preprocessor(model_name).score_perplexity(
        model, part, lm_vocab, topic_vocab, data, protocol=protocol, batch_size=batch_size,
        whole_documents=whole_documents)
