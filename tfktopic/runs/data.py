"""A run's data: reading, split, data rules, vocabularies, examples, pipelines and scoring.

`prepare_data` is the one data path of the package: ``tfktopic train``, the
scripts and the benchmarks all call it, so a benchmark number is computed on
exactly the data a user gets from ``tfktopic train`` with the same settings.
The pieces it composes (`read_corpus`, `split_corpus`, `resolve_data_rules`,
`build_vocabularies`, `make_examples`, `make_dataset`, `score_perplexity`)
are public for `evaluate_run`, which recomputes a run's test split from
``run.json``.
"""

import dataclasses
import pathlib

import numpy as np

from tfktopic.errors import TfktopicError
from tfktopic.presets import resolve_data_rules  # noqa: F401  (re-exported)
from tfktopic.runs.settings import CHUNKED_MODELS, SPLIT, STREAMED_MODELS, TOPIC_MODELS

__all__ = ["RunData", "StreamExamples", "prepare_data", "resolve_format", "read_corpus",
           "given_split", "split_corpus",
           "resolve_data_rules", "build_vocabularies", "make_examples", "make_dataset",
           "score_perplexity", "npmi_reference", "NPMI_REFERENCE", "NPMI_WINDOW",
           "perplexity_message", "protocol_label", "normalize_protocol"]

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


def subset_documents(corpus, max_documents=None, subset_seed=None):
    """The first `max_documents` documents, or a seeded random subset in file order."""
    if not max_documents or int(max_documents) >= len(corpus):
        return corpus
    n = int(max_documents)
    if subset_seed is None:
        return corpus.subset(range(n))
    order = np.random.default_rng(int(subset_seed)).permutation(len(corpus))
    return corpus.subset(sorted(order[:n].tolist()))


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
def _windows_per_document(corpus, max_len):
    """Sentence windows of each document (as `sentence_windows` cuts them)."""
    return [sum(-(-(len(sentence) + 1) // max_len) for sentence in document)
            for document in corpus]


@dataclasses.dataclass
class StreamExamples:
    """A corpus part as document streams, with how they are cut (streamed models).

    Attributes:
        streams: `tfktopic.data.streams.DocumentStreams` (one per document).
        bptt: targets per window.
        context: topic context of each window (`None` for the LSTM; one of
            `tfktopic.data.streams.CONTEXTS` for the streamed TopicRNN).
        context_len: topic words kept per context.
    """

    streams: object
    bptt: int = 30
    context: str = None
    context_len: int = None

    def __len__(self):
        return len(self.streams)

    @property
    def num_targets(self):
        return self.streams.num_targets


#: The training contexts of the sentence-window and chunk models (`train_protocol`).
WINDOW_TRAIN_CONTEXTS = ("all_other", "preceding")


def train_protocol(model_name, data):
    """The training context of a model, the data setting ``train_context``.

    "all_other" (the default: every other sentence of the document, as the papers
    trained) or "preceding" (the preceding sentences only, as every model is scored:
    training then sees the contexts it is evaluated with); the streamed models also
    take Zheng et al.'s "whole_document" (`tfktopic.data.streams.CONTEXTS`).

    Raises:
        ValueError: a context the model's examples cannot be built with (named).
    """
    context = str(data.get("train_context", "all_other"))
    if model_name in STREAMED_MODELS:
        return context
    if model_name not in TOPIC_MODELS:      # no topic context is built
        return "all_other"
    if context not in WINDOW_TRAIN_CONTEXTS:
        raise ValueError(f"train_context: {model_name} trains with one of "
                         f"{', '.join(WINDOW_TRAIN_CONTEXTS)} (got {context!r}; "
                         "\"whole_document\" is for the streamed models)")
    return context


def make_examples(model_name, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                  whole_documents=False):
    """Sentence windows, document chunks or document streams of a corpus part for a model.

    Args:
        model_name: one of `MODELS`; `CHUNKED_MODELS` get document chunks,
            `STREAMED_MODELS` document streams (`StreamExamples`).
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
    from tfktopic.data import document_sequences, sentence_examples

    max_len, context_len = int(data["max_len"]), int(data["context_len"])
    if model_name in STREAMED_MODELS:
        from tfktopic.data.streams import CONTEXTS, document_streams

        topical = model_name in TOPIC_MODELS
        if topical and protocol not in CONTEXTS:
            raise ValueError(f"{model_name}: the context must be one of {CONTEXTS}, got "
                             f"{protocol!r}")
        streams = document_streams(corpus, lm_vocab, topic_vocab if topical else None)
        return StreamExamples(streams, int(data.get("bptt", 30)),
                              protocol if topical else None, context_len if topical else None)
    if model_name in CHUNKED_MODELS:
        J = int(data["sentences_per_chunk"])
        if whole_documents:
            J = max(_windows_per_document(corpus, max_len) + [1])
        return document_sequences(corpus, lm_vocab, topic_vocab, J, max_len, context_len,
                                  protocol=protocol)
    return sentence_examples(corpus, lm_vocab, topic_vocab, max_len=max_len,
                             context_len=context_len, protocol=protocol)


def make_dataset(model_name, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                 initial_epoch=0):
    """The tf.data pipeline of `examples` for a model.

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
    from tfktopic import backend

    if backend.is_tensorflow():
        from tfktopic.data.pipeline import document_dataset, sentence_dataset
    else:  # numpy batches (keras.utils.PyDataset): no tf.data outside TensorFlow
        from tfktopic.data.batches import DocumentBatches as document_dataset
        from tfktopic.data.batches import SentenceBatches as sentence_dataset

    if model_name in STREAMED_MODELS:
        from tfktopic.data.streams import document_stream_dataset

        return document_stream_dataset(examples.streams, int(batch_size), examples.bptt,
                                       shuffle=shuffle, seed=seed, initial_epoch=initial_epoch,
                                       context=examples.context,
                                       context_len=examples.context_len)
    if model_name in CHUNKED_MODELS:
        if model_name == "doc_lstm_chunked":
            # batch_size counts sentence windows, as for the sentence-level LSTM.
            batch_size = max(1, int(batch_size) // examples.tokens.shape[1])
        return document_dataset(examples, batch_size=int(batch_size), shuffle=shuffle,
                                seed=seed, drop_remainder=drop_remainder)
    return sentence_dataset(examples, batch_size=int(batch_size), shuffle=shuffle, seed=seed,
                            drop_remainder=drop_remainder,
                            document_targets=model_name == "topicrnn")


# -------------------------------------------------------------------------- RunData
@dataclasses.dataclass
class RunData:
    """The prepared data of a run (`prepare_data`).

    Attributes:
        model_name: the model the examples are cut for (one of `MODELS`).
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
    def unit(self):
        """"documents" (streamed), "chunks" (document-chunked models) or "windows"."""
        if self.model_name in STREAMED_MODELS:
            return "documents"
        return "chunks" if self.model_name in CHUNKED_MODELS else "windows"

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
        examples = self.examples[split]
        if self.model_name in STREAMED_MODELS:
            from tfktopic.data.streams import num_batches, steps_per_epoch

            if split == "train":
                return steps_per_epoch(examples.streams, int(batch_size), examples.bptt)
            return num_batches(examples.streams, int(batch_size), examples.bptt)
        rows = len(examples)
        if self.model_name == "doc_lstm_chunked":
            batch_size = max(1, int(batch_size) // examples.tokens.shape[1])
        return rows // int(batch_size) if drop_remainder else -(-rows // int(batch_size))

    def for_model(self, model_name):
        """The same split, vocabularies and data settings, with the examples of another model.

        E.g. the sentence windows of an LSTM baseline beside an rGBN-RNN's
        document chunks.
        """
        if model_name == self.model_name:
            return self
        if ((model_name in CHUNKED_MODELS) == (self.model_name in CHUNKED_MODELS)
                and model_name not in STREAMED_MODELS and self.model_name not in STREAMED_MODELS):
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
def _streamed_label(data):
    return (f"document-level, streamed: state carried through each document, truncated BPTT "
            f"of {int(data.get('bptt', 30))} targets")


def protocol_label(model_name, protocol, data=None):
    """The protocol label recorded with a perplexity (LSTMs: no topic context)."""
    data = data or {}
    if model_name == "lstm":
        return "sentence-level, no topic context"
    if model_name == "doc_lstm":
        return _streamed_label(data)
    if model_name == "doc_lstm_chunked":
        return ("document-level, chunked: trained on 8-sentence chunks from a zero state, "
                "scored with the state carried across each whole document")
    if model_name in STREAMED_MODELS:
        return f"{_streamed_label(data)}; topic context {protocol}"
    return protocol


def perplexity_message(model_name, result):
    """The line printed with a test perplexity, naming its protocol."""
    if model_name == "lstm":
        how = "sentence-level, zero state per sentence window"
    elif model_name in STREAMED_MODELS:
        how = result.protocol
    elif model_name == "doc_lstm_chunked":
        how = ("document-level, chunked in training (zero state per 8-sentence chunk), state "
               "carried across each whole test document")
    elif result.protocol == "preceding":
        how = "leak-free: topic context from preceding sentences only"
    elif result.protocol == "none":
        how = "no topic context: every sentence scored with an empty context (an ablation)"
    else:
        how = ("all_other: the papers' protocol, context = all other sentences; lets future "
               "text in")
    return f"test perplexity ({how}): {result.perplexity:.2f} over {result.num_tokens} tokens"


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
        model_name, model: the model (one of `MODELS`) and its Keras model.
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
    from tfktopic.evaluation import evaluate_perplexity

    if whole_documents is None:
        whole_documents = model_name == "doc_lstm_chunked"
    examples = make_examples(model_name, part, lm_vocab, topic_vocab, data, protocol=protocol,
                             whole_documents=whole_documents)
    if model_name in STREAMED_MODELS:
        batch_size = min(int(batch_size), int(model.max_streams))
        documents = len(part)
    else:
        documents = (len(part), examples.document_index)
    dataset = make_dataset(model_name, examples, batch_size, shuffle=False)
    # The streamed TopicRNN returns normalised log-probabilities (l_t marginalised); the
    # log-softmax of `from_logits` leaves them unchanged, so every model is scored alike.
    result = evaluate_perplexity(model, dataset, documents=documents,
                                 protocol=protocol_label(model_name, protocol, data))
    return result, examples
