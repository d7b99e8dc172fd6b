"""A run's data preparation: reading, split, vocabularies, examples, pipelines and scoring."""

import pathlib

from tfktopic.errors import TfktopicError
from tfktopic.runs.settings import CHUNKED_MODELS, SPLIT

# -------------------------------------------------------------------- data preparation
def resolve_format(corpus, format=None):
    """The corpus format: `format`, or inferred ("lee", ``*.jsonl.gz``, ``ptb.*``).

    Raises:
        ValueError: when it cannot be inferred (message names ``--format``).
    """
    from tfktopic.data.corpora import FORMATS, _infer_format

    if format is not None:
        return format
    if str(corpus) == "lee":
        return "lee"
    try:
        return _infer_format(pathlib.Path(str(corpus)))
    except ValueError:
        raise ValueError(f"--format: cannot tell the format of {str(corpus)!r}; pass --format "
                         f"{'|'.join(FORMATS)}") from None


def read_corpus(source, format, data, max_documents=None):
    """Read a run's corpus with its data settings.

    Args:
        source: "lee" or a path.
        format: one of `tfktopic.data.FORMATS`.
        data: the run's data settings (``sentences_per_document`` for PTB).
        max_documents: keep only the first N documents (IMDB: read only N).

    Returns:
        A `Corpus`.
    """
    from tfktopic.data import load_corpus

    kwargs = {}
    if format == "ptb":
        kwargs["sentences_per_document"] = int(data.get("sentences_per_document", 10))
    if format == "imdb" and max_documents:
        kwargs["limit"] = int(max_documents)
    corpus = load_corpus(source, format=format, **kwargs)
    if max_documents:
        if int(max_documents) < 1:
            raise ValueError(f"--max-documents must be >= 1, got {max_documents}")
        corpus = corpus.subset(range(min(int(max_documents), len(corpus))))
    return corpus


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


def _windows_per_document(corpus, max_len):
    """Sentence windows of each document (as `sentence_windows` cuts them)."""
    return [sum(-(-(len(sentence) + 1) // max_len) for sentence in document)
            for document in corpus]


def make_examples(model_name, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                  whole_documents=False):
    """Sentence windows or document chunks of a corpus part for a model.

    Args:
        model_name: one of `MODELS`; `CHUNKED_MODELS` get document chunks.
        corpus: a `Corpus` (part).
        lm_vocab, topic_vocab: the run's vocabularies.
        data: data settings (``max_len``, ``context_len``, ``sentences_per_chunk``).
        protocol: "preceding" (leak-free) or "all_other" (training; the papers'
            evaluation protocol).
        whole_documents: chunked models: one chunk per document (J = the
            longest document's window count), so the document-level LSTM
            carries its state over whole documents.

    Returns:
        `SentenceExamples` or `DocumentSequences`.
    """
    from tfktopic.data import document_sequences, sentence_examples

    max_len, context_len = int(data["max_len"]), int(data["context_len"])
    if model_name in CHUNKED_MODELS:
        J = int(data["sentences_per_chunk"])
        if whole_documents:
            J = max(_windows_per_document(corpus, max_len) + [1])
        return document_sequences(corpus, lm_vocab, topic_vocab, J, max_len, context_len,
                                  protocol=protocol)
    return sentence_examples(corpus, lm_vocab, topic_vocab, max_len=max_len,
                             context_len=context_len, protocol=protocol)


def make_dataset(model_name, examples, batch_size, shuffle=False, seed=0):
    """The tf.data pipeline of `examples` for a model.

    Sentence models get ``sentence_dataset`` batches of `batch_size` windows
    (TopicRNN with ``doc_targets``); rGBN / GBN ``document_dataset`` batches of
    `batch_size` chunks (the papers' B documents); the document-level LSTM
    batches of about `batch_size` windows (``batch_size // J`` chunks, at least 1).
    """
    from tfktopic.data.pipeline import document_dataset, sentence_dataset

    if model_name in CHUNKED_MODELS:
        if model_name == "doc_lstm":
            # batch_size counts sentence windows, as for the sentence-level LSTM.
            batch_size = max(1, int(batch_size) // examples.tokens.shape[1])
        return document_dataset(examples, batch_size=int(batch_size), shuffle=shuffle,
                                seed=seed)
    return sentence_dataset(examples, batch_size=int(batch_size), shuffle=shuffle, seed=seed,
                            document_targets=model_name == "topicrnn")


def _protocol_label(model_name, protocol):
    if model_name == "lstm":
        return "sentence-level, no topic context"
    if model_name == "doc_lstm":
        return "document-level: state carried across each document's sentences"
    return protocol


def _perplexity_message(model_name, result):
    if model_name == "lstm":
        how = "sentence-level, zero state per sentence window"
    elif model_name == "doc_lstm":
        how = "document-level, state carried across each document's sentences"
    elif result.protocol == "preceding":
        how = "leak-free: topic context from preceding sentences only"
    else:
        how = ("all_other: the papers' protocol, context = all other sentences; lets future "
               "text in")
    return f"test perplexity ({how}): {result.perplexity:.2f} over {result.num_tokens} tokens"


def _normalize_protocol(protocol):
    protocol = str(protocol).replace("-", "_")
    if protocol not in ("preceding", "all_other"):
        raise ValueError(f"--protocol must be 'preceding' or 'all-other', got {protocol!r}")
    return protocol


def score_perplexity(model_name, model, part, lm_vocab, topic_vocab, data, protocol="preceding",
                    batch_size=64):
    """Perplexity of `model` on a corpus part (the one scoring used by train and evaluate).

    Returns:
        (PerplexityResult, examples).
    """
    from tfktopic.evaluation import evaluate_perplexity

    examples = make_examples(model_name, part, lm_vocab, topic_vocab, data, protocol=protocol,
                             whole_documents=model_name == "doc_lstm")
    dataset = make_dataset(model_name, examples, batch_size, shuffle=False)
    result = evaluate_perplexity(model, dataset, protocol=_protocol_label(model_name, protocol))
    return result, examples
