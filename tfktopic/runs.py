"""Run directories: train, load, evaluate and use a model trained by `tfktopic train`.

A **run directory** (``--out`` of ``tfktopic train``) holds everything needed to
use a trained model again, offline:

* ``model.keras`` -- the best checkpoint (lowest validation perplexity);
* ``lm_vocab.json``, ``topic_vocab.json`` -- the vocabularies (`Vocabulary`,
  `TopicVocabulary`, versioned JSON);
* ``run.json`` -- how the run was made: model name, preset, corpus, format,
  seed, ``max_documents``, the data settings (``max_len``, ``context_len``,
  ``min_count``, stop list, ``sentences_per_chunk`` ...), the model's
  constructor settings, the training settings, the tfktopic version, and the
  training progress (``status``, epochs done, best validation perplexity);
* ``results.json`` -- test perplexity, unigram baseline, topics, generated text;
* ``backup/`` -- the `keras.callbacks.BackupAndRestore` state: running the same
  ``tfktopic train`` command again resumes after the last finished epoch (and
  does nothing more once all epochs are done).

The data preparation of a run (reading, 80/10/10 split by document, the
vocabularies, sentence windows or document chunks, tf.data pipelines) lives in
one place (`read_corpus`, `split_corpus`, `build_vocabularies`,
`make_examples`, `make_dataset`), used by both `train_run` and `evaluate_run`,
so an evaluation recomputes exactly the run's test split from ``run.json``.

Example:

```python
from tfktopic import runs

runs.train_run("tcnlm", "runs/lee-tcnlm", corpus="lee", preset="small")
run = runs.load_run("runs/lee-tcnlm")
runs.evaluate_run(run)["perplexity"]["perplexity"]
runs.generate_text(run, topic=2, num=3)
```
"""

import dataclasses
import importlib
import json
import math
import os
import pathlib

import numpy as np

from tfktopic.errors import TfktopicError
from tfktopic.evaluation.perplexity import unigram_perplexity

__all__ = [
    "MODELS",
    "GENERATING_MODELS",
    "TOPIC_MODELS",
    "HIERARCHICAL_MODELS",
    "Run",
    "resolve_run_dir",
    "load_run",
    "preset_settings",
    "read_corpus",
    "split_corpus",
    "build_vocabularies",
    "make_examples",
    "make_dataset",
    "unigram_perplexity",
    "train_run",
    "evaluate_run",
    "run_topics",
    "document_bow",
    "generate_text",
    "export_run",
]

#: Every model `tfktopic train` knows.
MODELS = ("lstm", "doc_lstm", "lda_lstm", "topicrnn", "tcnlm", "rgbn_rnn", "gbn_rnn")
#: Models with a `generate(...)` method.
GENERATING_MODELS = ("topicrnn", "tcnlm", "rgbn_rnn", "gbn_rnn")
#: Models with `topics(...)`.
TOPIC_MODELS = ("lda_lstm", "topicrnn", "tcnlm", "rgbn_rnn", "gbn_rnn")
#: Models with a topic hierarchy (layers, Phi and Pi).
HIERARCHICAL_MODELS = ("rgbn_rnn", "gbn_rnn")
#: Models trained on document chunks [B, J, T] instead of sentence windows.
CHUNKED_MODELS = ("doc_lstm", "rgbn_rnn", "gbn_rnn")
#: The preset family (`tfktopic.presets`) of each model. The LSTM baselines
#: take the sizes and data settings of TopicRNN's presets (same-size baseline).
PRESET_FAMILY = {"lstm": "topicrnn", "doc_lstm": "topicrnn", "lda_lstm": "lda_lstm",
                 "topicrnn": "topicrnn", "tcnlm": "tcnlm", "rgbn_rnn": "rgbn_rnn",
                 "gbn_rnn": "rgbn_rnn"}
OPTIMIZERS = ("adam", "sgld", "psgld")
SPLIT = (0.8, 0.1, 0.1)
RUN_FORMAT_VERSION = 1

DATA_DEFAULTS = {"min_count": 3, "max_size": None, "stopwords": "gensim",
                 "max_freq_fraction": 0.001, "min_doc_freq": 1, "max_len": 30,
                 "context_len": 300, "sentences_per_chunk": 8, "sentences_per_document": 10}
TRAINING_DEFAULTS = {"optimizer": "adam", "learning_rate": 1e-3, "batch_size": 64,
                     "epochs": 10, "clipnorm": None}
_TRAINING_KEYS = ("optimizer", "learning_rate", "batch_size", "epochs", "clipnorm",
                  "clipvalue", "decay_steps", "decay_rate", "lda_passes", "temperature")
# Flat preset keys that are neither data, training nor model settings.
_IGNORED_KEYS = ("dataset", "early_stopping_patience", "classifier_units", "classifier_epochs",
                 "min_doc_freq_reference_docs", "train_protocol")
# Generation settings of `train`'s samples and `evaluate`'s BLEU.
GENERATION = {"method": "top_k", "top_k": 10, "temperature": 1.0}


# ----------------------------------------------------------------------------- helpers
def _jsonable(value):
    """Tuples -> lists, numpy scalars -> Python, recursively (JSON round trip)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item")
                                 else list(v) if isinstance(v, (tuple, set)) else str(v)))


def _write_json(path, payload):
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path, what):
    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such file ({what})")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise TfktopicError(f"{path}: not valid JSON ({what}): {error}") from None
    if not isinstance(payload, dict):
        raise TfktopicError(f"{path}: expected a JSON object ({what}), found "
                            f"{type(payload).__name__}")
    return payload


def _say(log, message=""):
    if log is not None:
        log(message)


# ----------------------------------------------------------------------------- presets
def preset_settings(model_name, preset="small"):
    """The settings of a preset, split into model, data and training parts.

    Args:
        model_name: one of `MODELS`.
        preset: a preset name of the model's family (`tfktopic.presets.available`).

    Returns:
        dict with ``model`` (constructor arguments), ``data`` (vocabulary and
        window settings, `DATA_DEFAULTS` filled in) and ``training`` (optimizer,
        learning rate, batch size, epochs, ...; `TRAINING_DEFAULTS` filled in).

    Raises:
        ValueError: unknown model or preset (message starts with ``--preset``).

    Example:
    >>> preset_settings("tcnlm", "small")["model"]["num_topics"]
    10
    """
    from tfktopic import presets

    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose from {', '.join(MODELS)}")
    family = PRESET_FAMILY[model_name]
    names = presets.available(family)
    if preset not in names:
        raise ValueError(f"--preset: unknown preset {preset!r} for {model_name}; "
                         f"choose from {', '.join(names)}")
    entry = presets.get(family, preset)
    data, training = dict(DATA_DEFAULTS), dict(TRAINING_DEFAULTS)
    if family == "tcnlm":
        model = dict(entry["model"])
        data.update({k: v for k, v in entry["data"].items() if k not in _IGNORED_KEYS})
        training.update(entry["training"])
    elif family == "rgbn_rnn":
        from tfktopic.models.rgbn_rnn import TRAINING_KEYS

        model = {k: v for k, v in entry.items() if k not in TRAINING_KEYS}
        model["recurrent"] = model_name == "rgbn_rnn"
        for key in TRAINING_KEYS:
            if key in entry:
                (data if key in DATA_DEFAULTS else training)[key] = entry[key]
    else:
        flat = {k: v for k, v in entry.items() if k not in _IGNORED_KEYS}
        data.update({k: flat.pop(k) for k in list(flat) if k in DATA_DEFAULTS})
        training.update({k: flat.pop(k) for k in list(flat) if k in _TRAINING_KEYS})
        model = flat
        if family == "lda_lstm":
            training.setdefault("lda_passes", 5)
            model.setdefault("lda_iterations", 50)
        if model_name in ("lstm", "doc_lstm"):
            model = {"embedding_dim": model.get("embedding_dim") or model["hidden_dim"],
                     "hidden_dim": model["hidden_dim"], "num_layers": model.get("num_layers", 1),
                     "dropout": model.get("dropout", 0.0)}
            if model_name == "doc_lstm":
                model["document_level"] = True
    return {"model": model, "data": data, "training": training}


def _parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_overrides(settings, overrides):
    """Apply ``KEY=VALUE`` overrides (``--set``) to `preset_settings` output in place.

    A key already in a part replaces it there; a new data or training key
    (`DATA_DEFAULTS`, training keys) goes to that part; anything else is a
    model constructor argument. Values are JSON (``32``, ``[64, 32]``,
    ``true``, ``null``) or plain strings.

    Args:
        settings: dict from `preset_settings`.
        overrides: iterable of ``"KEY=VALUE"`` strings or a dict.

    Returns:
        `settings`.
    """
    items = overrides.items() if isinstance(overrides, dict) else [
        _split_override(text) for text in overrides or ()]
    for key, value in items:
        for part in ("model", "data", "training"):
            if key in settings[part]:
                settings[part][key] = value
                break
        else:
            if key in DATA_DEFAULTS:
                settings["data"][key] = value
            elif key in _TRAINING_KEYS:
                settings["training"][key] = value
            else:
                settings["model"][key] = value
    return settings


def _split_override(text):
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set: expected KEY=VALUE, got {text!r}")
    return key.strip(), _parse_value(value.strip())


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


# ----------------------------------------------------------------------------- run dirs
@dataclasses.dataclass
class Run:
    """A trained run loaded from its directory (`load_run`).

    Attributes:
        model: the Keras model (best checkpoint, not compiled).
        lm_vocab: its `Vocabulary`.
        topic_vocab: its `TopicVocabulary`.
        config: the parsed ``run.json``.
        path: the run directory.
    """

    model: object
    lm_vocab: object
    topic_vocab: object
    config: dict
    path: pathlib.Path

    @property
    def name(self):
        """The model name (one of `MODELS`)."""
        return self.config["model"]


def resolve_run_dir(arg):
    """The run directory named by a command-line argument.

    ``pretrained:NAME`` is resolved by ``tfktopic.pretrained.resolve(NAME)``
    (which returns a run directory, offline); anything else is a path.

    Args:
        arg: a path or ``"pretrained:NAME"``.

    Returns:
        A `pathlib.Path` of an existing directory.

    Raises:
        TfktopicError: no such directory, or pretrained models unavailable.

    Example:
    >>> resolve_run_dir("runs/lee-tcnlm")            # doctest: +SKIP
    PosixPath('runs/lee-tcnlm')
    """
    text = os.fspath(arg) if not isinstance(arg, str) else arg
    if text.startswith("pretrained:"):
        name = text.split(":", 1)[1].strip()
        if not name:
            raise TfktopicError(f"{text}: give a pretrained model name, e.g. pretrained:NAME")
        try:
            pretrained = importlib.import_module("tfktopic.pretrained")
        except ModuleNotFoundError as error:
            if error.name != "tfktopic.pretrained":
                raise
            raise TfktopicError(f"{text}: pretrained models are not available in this "
                                "installation (no tfktopic.pretrained module)") from None
        path = pathlib.Path(pretrained.resolve(name))
    else:
        path = pathlib.Path(text)
    if not path.exists():
        raise TfktopicError(f"{path}: no such run directory")
    if not path.is_dir():
        raise TfktopicError(f"{path}: not a directory (expected a run directory written by "
                            "`tfktopic train`)")
    return path


def read_run_config(directory):
    """Parse and check ``DIR/run.json``; `TfktopicError` naming the file."""
    path = pathlib.Path(directory) / "run.json"
    config = _read_json(path, "tfktopic run settings")
    missing = [k for k in ("model", "data", "seed", "corpus") if k not in config]
    if missing:
        raise TfktopicError(f"{path}: not a tfktopic run file (missing {', '.join(missing)})")
    if config["model"] not in MODELS:
        raise TfktopicError(f"{path}: unknown model {config['model']!r}")
    return config


def _load_model(path):
    import keras

    import tfktopic  # noqa: F401  (registers every model class for deserialisation)

    import zipfile

    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such file (the run has no checkpoint yet: train it "
                            "for at least one epoch)")
    if not zipfile.is_zipfile(path):
        raise TfktopicError(f"{path}: not a Keras model file (a truncated or corrupt .keras "
                            "zip archive); retrain, or restore the file")
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:  # a truncated zip, a bad config, ...: name the file
        raise TfktopicError(f"{path}: not a readable Keras model file (corrupt or "
                            f"incomplete checkpoint? {type(error).__name__}: "
                            f"{str(error).splitlines()[0] if str(error) else ''})") from None


def load_run(directory):
    """Load a run directory: model, vocabularies and settings.

    Args:
        directory: a run directory (or ``pretrained:NAME``, see `resolve_run_dir`).

    Returns:
        A `Run`.

    Raises:
        TfktopicError: missing directory, missing or corrupt ``run.json`` /
            ``model.keras`` / vocabulary, or a vocabulary that does not match
            the model -- naming the file.

    Example:
    >>> run = load_run("runs/lee-tcnlm")                  # doctest: +SKIP
    >>> run.model.topics(10, run.topic_vocab)[0]           # doctest: +SKIP
    """
    from tfktopic.data import TopicVocabulary, Vocabulary

    path = resolve_run_dir(directory)
    config = read_run_config(path)
    lm_vocab = Vocabulary.load(path / "lm_vocab.json")
    topic_vocab = TopicVocabulary.load(path / "topic_vocab.json", lm_vocab)
    model = _load_model(path / "model.keras")
    vocab_size = getattr(model, "vocab_size", None)
    if vocab_size is not None and vocab_size != len(lm_vocab):
        raise TfktopicError(f"{path / 'lm_vocab.json'}: {len(lm_vocab)} words, but the model in "
                            f"model.keras has a vocabulary of {vocab_size}")
    topic_size = getattr(model, "topic_vocab_size", None)
    if topic_size is not None and topic_size != len(topic_vocab):
        raise TfktopicError(f"{path / 'topic_vocab.json'}: {len(topic_vocab)} words, but the "
                            f"model in model.keras has a topic vocabulary of {topic_size}")
    return Run(model, lm_vocab, topic_vocab, config, path)


# ----------------------------------------------------------------------------- training
def _check_stopwords(data, preset):
    stopwords = data["stopwords"]
    if stopwords not in ("gensim", "none") and not pathlib.Path(str(stopwords)).is_file():
        raise ValueError(f"--stopwords: preset {preset!r} uses the stop list {stopwords!r}, "
                         "which is not a file here; pass --stopwords PATH (e.g. Mallet's "
                         "en.txt) or --stopwords gensim")
    if stopwords not in ("gensim", "none"):
        data["stopwords"] = str(pathlib.Path(str(stopwords)).resolve())


def _load_vectors(path):
    from tfktopic.data.embeddings import load_keyed_vectors, load_word2vec

    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such word2vec file (--embeddings)")
    name = path.name.lower()
    if name.endswith((".bin", ".bin.gz", ".txt", ".txt.gz", ".vec", ".vec.gz")):
        return load_word2vec(path)
    try:
        return load_keyed_vectors(path)
    except TfktopicError:
        raise
    except Exception as error:
        raise TfktopicError(f"{path}: neither a word2vec file (.bin/.txt/.vec) nor gensim "
                            f"KeyedVectors saved by convert_word2vec ({type(error).__name__})"
                            ) from None


def _embedding_matrix(path, lm_vocab, settings, explicit_dim, seed, log):
    from tfktopic.data.embeddings import embedding_matrix

    matrix, coverage = embedding_matrix(lm_vocab, _load_vectors(path), seed=seed)
    dim = matrix.shape[1]
    if explicit_dim is not None and int(explicit_dim) != dim:
        raise ValueError(f"--embeddings: {path} holds {dim}-dimensional vectors, but "
                         f"--set embedding_dim={explicit_dim}; drop that override (the "
                         "embedding size follows the vectors) or use vectors of that size")
    previous = settings["model"].get("embedding_dim")
    settings["model"]["embedding_dim"] = dim
    _say(log, f"word2vec {path}: {coverage}; embedding size {dim}"
              + (f" (instead of the preset's {previous})" if previous not in (None, dim) else ""))
    return matrix, str(coverage)


def _build_model(name, settings, lm_vocab, topic_vocab, num_train_chunks, embeddings, seed,
                 train_corpus=None):
    """A new model of `name` with the run's settings (call inside the strategy scope)."""
    model_cfg = dict(settings["model"])
    try:
        if name in ("lstm", "doc_lstm"):
            from tfktopic.models import LSTMLanguageModel

            return LSTMLanguageModel(len(lm_vocab), embeddings=embeddings, **model_cfg)
        if name == "lda_lstm":
            from tfktopic.models.lda_lstm import LDALSTMLanguageModel, fit_lda

            lda = fit_lda(train_corpus, topic_vocab, num_topics=model_cfg.get("num_topics", 50),
                          passes=settings["training"].get("lda_passes", 5), seed=seed,
                          iterations=model_cfg.get("lda_iterations", 50))
            return LDALSTMLanguageModel(len(lm_vocab), len(topic_vocab), lda=lda,
                                        embeddings=embeddings, **model_cfg)
        if name == "topicrnn":
            from tfktopic.models.topicrnn import TopicRNN

            return TopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, embeddings=embeddings,
                            **model_cfg)
        if name == "tcnlm":
            from tfktopic.models.tcnlm import TCNLM

            return TCNLM(len(lm_vocab), len(topic_vocab), embeddings=embeddings, **model_cfg)
        from tfktopic.models.rgbn_rnn import RGBNRNN

        num_layers = model_cfg.pop("num_layers", 3)
        model_cfg.setdefault("seed", seed)
        return RGBNRNN.from_preset(model_cfg, len(lm_vocab), len(topic_vocab),
                                   num_documents=num_train_chunks, num_layers=num_layers,
                                   embeddings=embeddings)
    except TypeError as error:
        raise ValueError(f"--set: a setting is not an argument of {name} ({error})") from None


def _optimizer(name, training, num_train_tokens, seed):
    import keras

    kind = training["optimizer"]
    if kind in ("sgld", "psgld"):  # lstm / doc_lstm only (checked by train_run)
        from tfktopic.bayes.setups import optimizer

        return optimizer(kind, training["learning_rate"], num_examples=num_train_tokens,
                         clipnorm=training.get("clipnorm"), seed=seed)
    if kind != "adam":
        raise ValueError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {kind!r}")
    if name in HIERARCHICAL_MODELS:
        from tfktopic.models.rgbn_rnn import make_optimizer

        return make_optimizer(training)
    return keras.optimizers.Adam(training["learning_rate"], clipnorm=training.get("clipnorm"))


def _signature(config):
    keys = ("model", "preset", "corpus", "format", "max_documents", "seed", "data",
            "model_config", "embeddings_path")
    return _jsonable({k: config.get(k) for k in keys})


def _progress_callback(path, config):
    import keras

    class _Progress(keras.callbacks.Callback):
        """Records finished epochs and the best validation perplexity in run.json."""

        def on_epoch_end(self, epoch, logs=None):
            logs = {k: float(v) for k, v in (logs or {}).items()}
            progress = config.setdefault("progress", {"epochs_done": 0, "best_val_ppl": None,
                                                      "history": []})
            progress["history"] = progress["history"][:epoch] + [{"epoch": epoch + 1, **logs}]
            progress["epochs_done"] = epoch + 1
            val = logs.get("val_ppl")
            if val is not None and math.isfinite(val) and (
                    progress["best_val_ppl"] is None or val < progress["best_val_ppl"]):
                progress["best_val_ppl"] = val
            _write_json(path, config)

    return _Progress()


def train_run(model_name, out, corpus="lee", format=None, preset="small", epochs=None,
              batch_size=None, max_documents=None, stopwords=None, embeddings=None,
              optimizer="adam", learning_rate=None, strategy="none", seed=0, overrides=None,
              verbose=1, log=print):
    """Train a model into a run directory, then score it on the test split.

    Reads the corpus, splits it 80/10/10 by document (seeded), builds the
    vocabularies on the training part, trains with a validation pass every
    epoch (`BackupAndRestore` in ``out/backup``, the best ``val_ppl`` in
    ``out/model.keras``, `TerminateOnNaN`), then reports the test perplexity
    under the leak-free "preceding" protocol next to a unigram model, the
    topics and topic-conditioned sentences, and writes ``results.json``.
    Calling it again with the same arguments resumes an interrupted run (and
    only re-scores a finished one).

    Args:
        model_name: one of `MODELS`.
        out: the run directory.
        corpus: "lee" or a corpus path.
        format: corpus format (inferred for lee, ``*.jsonl.gz``, ``ptb.*``).
        preset: preset of the model's family (`preset_settings`).
        epochs, batch_size, learning_rate: override the preset's.
        max_documents: use only the first N documents.
        stopwords: "gensim", "none" or a stop-list file (default: the preset's).
        embeddings: a word2vec ``.bin`` / ``.txt`` file or converted
            KeyedVectors; the embedding size follows the vectors.
        optimizer: "adam", or "sgld" / "psgld" (lstm, doc_lstm; the step sizes
            of `tfktopic.bayes.setups`' PTB "small" preset).
        strategy: "none", "mirrored" or "multiworker" (`tfktopic.distribute`).
        seed: split, shuffling and initialisation seed.
        overrides: ``KEY=VALUE`` strings or a dict (`apply_overrides`).
        verbose: Keras `fit` verbosity (1: progress bar, 2: a line per epoch).
        log: callable receiving each output line (`None`: silent).

    Returns:
        The results dict written to ``out/results.json``.

    Example:
    >>> train_run("tcnlm", "runs/lee-tcnlm", epochs=2)          # doctest: +SKIP
    """
    import keras

    from tfktopic.distribute import distribute_dataset, get_strategy
    from tfktopic.version import __version__

    settings = preset_settings(model_name, preset)
    override_items = (list(overrides.items()) if isinstance(overrides, dict)
                      else [_split_override(o) for o in overrides or ()])
    apply_overrides(settings, dict(override_items))
    explicit_dim = dict(override_items).get("embedding_dim")
    training, data = settings["training"], settings["data"]
    if epochs is not None:
        training["epochs"] = int(epochs)
    if batch_size is not None:
        training["batch_size"] = int(batch_size)
    if stopwords is not None:
        data["stopwords"] = stopwords
    training["optimizer"] = optimizer
    if optimizer in ("sgld", "psgld"):
        from tfktopic import presets

        ptb = presets.get("sgmcmc_ptb", "small")
        training["learning_rate"] = ptb["sgd_lr"] if optimizer == "sgld" else ptb["rmsprop_lr"]
        training["clipnorm"] = ptb["clipnorm"]
    if learning_rate is not None:
        training["learning_rate"] = float(learning_rate)
    for key in ("epochs", "batch_size"):
        if int(training[key]) < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {training[key]}")
    if training["optimizer"] in ("sgld", "psgld") and model_name not in ("lstm", "doc_lstm"):
        raise ValueError(f"--optimizer {training['optimizer']}: SG-MCMC training is available "
                         f"for lstm and doc_lstm only, not {model_name}")
    _check_stopwords(data, preset)
    if embeddings is not None and not pathlib.Path(embeddings).exists():
        raise TfktopicError(f"{embeddings}: no such word2vec file (--embeddings)")
    format = resolve_format(corpus, format)
    distribution = get_strategy(strategy)

    out = pathlib.Path(out)
    config = {
        "format_version": RUN_FORMAT_VERSION, "tfktopic_version": __version__,
        "model": model_name, "preset": preset,
        "corpus": "lee" if str(corpus) == "lee" else str(pathlib.Path(corpus).resolve()),
        "format": format, "max_documents": max_documents, "seed": int(seed),
        "split": list(SPLIT), "data": data, "training": {**training, "strategy": strategy},
        "embeddings_path": None if embeddings is None else str(pathlib.Path(embeddings).resolve()),
    }
    run_json = out / "run.json"
    previous = None
    if run_json.exists():
        previous = read_run_config(out)

    source = read_corpus(corpus, format, data, max_documents)
    parts = split_corpus(source, seed)
    lm_vocab, topic_vocab = build_vocabularies(parts["train"], data)
    examples = {
        name: make_examples(model_name, part, lm_vocab, topic_vocab, data,
                            protocol="all_other" if name == "train" else "preceding")
        for name, part in parts.items()}
    unit = "chunks" if model_name in CHUNKED_MODELS else "windows"
    _say(log, f"{source.source or corpus}: {len(parts['train'])} / {len(parts['valid'])} / "
              f"{len(parts['test'])} documents (train / valid / test), LM vocabulary "
              f"{len(lm_vocab)}, topic vocabulary {len(topic_vocab)}, "
              f"{len(examples['train'])} training {unit}")
    matrix = None
    if embeddings is not None:
        matrix, coverage = _embedding_matrix(embeddings, lm_vocab, settings, explicit_dim, seed,
                                             log)
        config["embeddings_coverage"] = coverage
    config["model_config"] = _jsonable(settings["model"])
    if previous is not None and _signature(previous) != _signature(config):
        changed = [k for k, v in _signature(config).items() if _signature(previous).get(k) != v]
        raise TfktopicError(f"{run_json}: --out holds another run (different "
                            f"{', '.join(changed)}); use a new --out or delete {out}")
    out.mkdir(parents=True, exist_ok=True)
    lm_vocab.save(out / "lm_vocab.json")
    topic_vocab.save(out / "topic_vocab.json")
    backup = out / "backup"
    resumed = 0
    fresh = {"epochs_done": 0, "best_val_ppl": None, "history": []}
    if (backup / "training_metadata.json").exists():
        try:
            resumed = int(json.loads((backup / "training_metadata.json").read_text())["epoch"])
        except (ValueError, KeyError, TypeError):
            raise TfktopicError(f"{backup / 'training_metadata.json'}: corrupt backup; delete "
                                f"{backup} to train from scratch") from None
        config["progress"] = (previous or {}).get("progress") or fresh
    else:
        config["progress"] = fresh
    config["status"] = "training"
    _write_json(run_json, config)

    batch = int(training["batch_size"])
    datasets = {name: make_dataset(model_name, ex, batch, shuffle=name == "train", seed=seed)
                for name, ex in examples.items() if name != "test"}
    keras.utils.set_random_seed(int(seed))
    with distribution.scope():
        model = _build_model(model_name, settings, lm_vocab, topic_vocab, len(examples["train"]),
                             matrix, int(seed), train_corpus=parts["train"])
        model.compile(optimizer=_optimizer(model_name, training, examples["train"].num_targets,
                                           int(seed)))
        model(next(iter(datasets["valid"])))  # build, so BackupAndRestore can restore weights
    best = config["progress"].get("best_val_ppl") if resumed else None
    callbacks = [
        keras.callbacks.BackupAndRestore(str(backup), delete_checkpoint=False),
        keras.callbacks.ModelCheckpoint(str(out / "model.keras"), monitor="val_ppl",
                                        mode="min", save_best_only=True,
                                        initial_value_threshold=best),
        keras.callbacks.TerminateOnNaN(),
        _progress_callback(run_json, config),
    ]
    total = int(training["epochs"])
    if resumed >= total:
        _say(log, f"{out}: all {total} epochs are done (backup in {backup}); scoring the best "
                  "checkpoint")
    else:
        if resumed:
            _say(log, f"resuming from {backup} after epoch {resumed} of {total}")
        _say(log, f"training {model_name} (preset {preset}) for {total} epochs; checkpoints "
                  f"in {out}")
    model.fit(distribute_dataset(datasets["train"]),
              validation_data=distribute_dataset(datasets["valid"]), epochs=total,
              callbacks=callbacks, verbose=verbose)
    if (out / "model.keras").exists():
        model = _load_model(out / "model.keras")
    if not all(math.isfinite(h.get("loss", 0.0)) for h in config["progress"]["history"]):
        _say(log, "training stopped: the loss became NaN (TerminateOnNaN); the best checkpoint "
                  "before it is scored")

    result, test_examples = score_perplexity(model_name, model, parts["test"], lm_vocab,
                                            topic_vocab, data, "preceding", batch)
    unigram = unigram_perplexity(lm_vocab, test_examples)
    _say(log, "\n" + _perplexity_message(model_name, result))
    _say(log, f"unigram model on the same tokens: {unigram:.2f}")
    summary = {"model": model_name, "preset": preset, "corpus": config["corpus"],
               "test": result.as_dict(), "unigram_ppl": unigram}
    run = Run(model, lm_vocab, topic_vocab, config, out)
    if model_name in TOPIC_MODELS:
        summary["topics"] = _print_topics(run, 10, log)
    if model_name in GENERATING_MODELS:
        _say(log, "\ngenerated sentences (top-k sampling, conditioned on one topic):")
        summary["generated"] = {}
        topics = summary["topics"]
        for k in range(min(3, len(topics))):
            text = generate_text(run, num=1, max_len=25, topic=k, seed=int(seed) + k,
                                 **GENERATION)[0]
            summary["generated"][k] = text
            _say(log, f"  topic {k:>2} ({' '.join(topics[k][:3])}): {text}")
    _write_json(out / "results.json", _jsonable(summary))
    config["status"] = "finished"
    _write_json(run_json, config)
    _say(log, f"\nmodel, vocabularies and results.json written to {out}")
    return summary


# ---------------------------------------------------------------------- topics / evaluate
def _require(run, models, what):
    if run.name not in models:
        raise ValueError(f"{what} applies to {', '.join(models)}; {run.path} holds a "
                         f"{run.name} model")


def run_topics(run, top_n=10):
    """Top words of a run's topics.

    Returns:
        For `HIERARCHICAL_MODELS` a list over layers (bottom first) of lists of
        word lists; else a list of word lists.
    """
    _require(run, TOPIC_MODELS, "topics")
    top_n = min(int(top_n), len(run.topic_vocab))
    if top_n < 1:
        raise ValueError(f"--top-n must be >= 1, got {top_n}")
    if run.name in HIERARCHICAL_MODELS:
        return [run.model.topics(top_n, run.topic_vocab, layer=l)
                for l in range(run.model.num_layers)]
    return run.model.topics(top_n, run.topic_vocab)


def _print_topics(run, top_n, log):
    topics = run_topics(run, top_n)
    layers = topics if run.name in HIERARCHICAL_MODELS else [topics]
    for l, layer in enumerate(layers):
        title = (f"layer {l + 1} topics" if run.name in HIERARCHICAL_MODELS else "topics")
        _say(log, f"\n{title} (top {top_n} words):")
        for k, words in enumerate(layer):
            _say(log, f"  topic {k:>2}: {' '.join(words)}")
    return layers[0]


def topics_report(run, top_n=10, json_path=None, dot_path=None, svg_path=None, log=print):
    """Print the topics; write the JSON and (rGBN / GBN) the hierarchy's DOT / SVG.

    Returns:
        The JSON-ready dict (for rGBN / GBN the `topic_hierarchy` dict).
    """
    import shutil

    if (dot_path or svg_path) and run.name not in HIERARCHICAL_MODELS:
        raise ValueError(f"--dot/--svg draw the topic hierarchy of rgbn_rnn or gbn_rnn; "
                         f"{run.path} holds a {run.name} model")
    if svg_path and shutil.which("dot") is None:
        raise ValueError("--svg needs Graphviz's `dot` program, which is not on PATH; install "
                         "Graphviz or write --dot OUT.dot and render it elsewhere")
    _require(run, TOPIC_MODELS, "topics")
    _print_topics(run, top_n, log)
    if run.name in HIERARCHICAL_MODELS:
        from tfktopic.models.rgbn_rnn import hierarchy_to_dot, hierarchy_to_svg, topic_hierarchy

        payload = topic_hierarchy(run.model, run.topic_vocab, top_n=min(int(top_n),
                                                                       len(run.topic_vocab)))
        if dot_path or svg_path:
            dot = hierarchy_to_dot(payload)
            if dot_path:
                pathlib.Path(dot_path).write_text(dot, encoding="utf-8")
                _say(log, f"wrote {dot_path}")
            if svg_path:
                hierarchy_to_svg(dot, svg_path)
                _say(log, f"wrote {svg_path}")
    else:
        payload = {"model": run.name, "top_n": int(top_n), "topics": run_topics(run, top_n)}
    if json_path:
        _write_json(json_path, _jsonable(payload))
        _say(log, f"wrote {json_path}")
    return payload


def _evaluation_corpus(run, corpus, format, max_documents):
    """(corpus part to score, description): the run's test split or a whole corpus."""
    config = run.config
    if corpus is None:
        if max_documents is not None:
            raise ValueError("--max-documents applies with --corpus (the run's own test split "
                             "uses the run's documents)")
        source = read_corpus(config["corpus"], config.get("format"), config["data"],
                             config.get("max_documents"))
        test = split_corpus(source, config["seed"])["test"]
        return test, f"{config['corpus']} (the run's test split, {len(test)} documents)"
    if format is None:
        try:
            format = resolve_format(corpus)
        except ValueError:
            if config.get("format") in (None, "lee"):
                raise
            format = config["format"]  # e.g. another TDLM file than the run's
    source = read_corpus(corpus, format, config["data"], max_documents)
    return source, f"{source.source or corpus} (whole corpus, {len(source)} documents)"


def evaluate_run(run, corpus=None, format=None, protocol="preceding", max_documents=None,
                 num_generated=100, seed=0, log=print):
    """Perplexity, NPMI coherence and BLEU of a run on a corpus.

    Args:
        run: a `Run` (`load_run`).
        corpus: "lee" or a path scored whole; `None` scores the run's own test
            split (recomputed from ``run.json``: same corpus, seed, documents).
        format: the corpus format (inferred, else the run's).
        protocol: "preceding" (leak-free) or "all_other" / "all-other" (the
            papers' protocol, which lets future text into the context).
        max_documents: with `corpus`, score only its first N documents.
        num_generated: generating models: sentences generated for BLEU.
        seed: generation seed.
        log: output lines (`None`: silent).

    Returns:
        dict: ``perplexity`` (`PerplexityResult.as_dict`), ``unigram_ppl``,
        topic models ``npmi`` (top-10 words, reference = the evaluated
        corpus), generating models ``bleu`` (test-BLEU-3/4 against the corpus
        sentences and self-BLEU-3/4).
    """
    from tfktopic.evaluation import ReferenceCounts, bleu_report, npmi_coherence

    protocol = _normalize_protocol(protocol)
    part, description = _evaluation_corpus(run, corpus, format, max_documents)
    data = run.config["data"]
    batch = int(run.config.get("training", {}).get("batch_size", 64))
    result, examples = score_perplexity(run.name, run.model, part, run.lm_vocab, run.topic_vocab,
                                       data, protocol, batch)
    unigram = unigram_perplexity(run.lm_vocab, examples)
    report = {"run": str(run.path), "model": run.name, "corpus": description,
              "protocol": result.protocol, "perplexity": result.as_dict(), "unigram_ppl": unigram}
    _say(log, f"run {run.path}: {run.name} (preset {run.config.get('preset')})")
    _say(log, f"corpus: {description}")
    _say(log, _perplexity_message(run.name, result).replace("test perplexity", "perplexity"))
    _say(log, f"unigram model on the same tokens: {unigram:.2f}")
    if run.name in TOPIC_MODELS:
        topics = run_topics(run, 10)
        topics = topics[0] if run.name in HIERARCHICAL_MODELS else topics
        counts = ReferenceCounts(([w for sentence in doc for w in sentence] for doc in part),
                                 sorted({w for t in topics for w in t}))
        size = min(len(t) for t in topics)
        coherence = npmi_coherence(topics, counts=counts, cardinalities=(size,))
        report["npmi"] = {"mean": coherence.mean, "top_n": size,
                          "per_topic": coherence.per_topic,
                          "reference": "the evaluated corpus (window 20)",
                          "missing_words": coherence.missing_words}
        _say(log, f"NPMI coherence of the top-{size} topic words (reference: the evaluated "
                  f"corpus): {coherence.mean:.4f}")
    if run.name in GENERATING_MODELS and int(num_generated) > 0:
        lm = run.lm_vocab
        references = [lm.decode(lm.encode(s)) for s in part.sentences()]
        hypotheses = [h.split() for h in generate_text(run, num=int(num_generated),
                                                       seed=seed, **GENERATION)]
        empty = sum(1 for h in hypotheses if not h)
        hypotheses = [h for h in hypotheses if h]
        if len(hypotheses) >= 2 and references:
            bleu = bleu_report(hypotheses, references, orders=(3, 4))
            bleu.update({"empty_generated_dropped": empty,
                         "generation": {**GENERATION, "seed": seed, "conditioning": "prior"}})
            report["bleu"] = bleu
            _say(log, f"BLEU of {len(hypotheses)} generated sentences against the corpus "
                      f"sentences: test-BLEU-3 {bleu['test_bleu_3']:.4f}, test-BLEU-4 "
                      f"{bleu['test_bleu_4']:.4f}; self-BLEU-3 {bleu['self_bleu_3']:.4f}, "
                      f"self-BLEU-4 {bleu['self_bleu_4']:.4f}")
        else:
            _say(log, f"BLEU skipped: {empty} of {num_generated} generated sentences were empty")
    return _jsonable(report)


# ---------------------------------------------------------------------------- generation
def document_bow(run, path):
    """The topic bag of words [V_c] of a text file, tokenised as the run's corpus.

    The file is read as one document (`tfktopic.data.read_text`), encoded with
    the LM vocabulary, and its topic words (the first ``context_len``) counted.

    Raises:
        CorpusFormatError / TfktopicError: missing or unreadable file, or no
            topic word in it.
    """
    from tfktopic.data import read_text

    corpus = read_text(path, documents="file")
    ids = [i for sentence in corpus.sentences() for i in run.lm_vocab.encode(sentence)]
    topic_ids = run.topic_vocab.topic_ids(ids)[:int(run.config["data"].get("context_len", 300))]
    if topic_ids.size == 0:
        raise TfktopicError(f"{path}: none of its words is in the run's topic vocabulary; "
                            "nothing to condition on")
    return np.bincount(topic_ids, minlength=len(run.topic_vocab)).astype(np.float32)


def generate_text(run, num=None, max_len=30, topic=None, layer=None, document=None,
                  paragraph=None, method="top_k", temperature=1.0, top_k=10, seed=0):
    """Generate sentences with a run's model (`GENERATING_MODELS`).

    Args:
        run: a `Run`.
        num: sentences (default 3), or with `paragraph` paragraphs (default 1).
        max_len: maximum tokens per sentence.
        topic: condition on topic K (0-based) of `layer`.
        layer: rGBN / GBN: 1-based layer of `topic` (1 = word-level topics).
        document: a text file whose topic bag of words conditions the text.
        paragraph: rGBN / GBN: paragraphs of this many sentences whose topics
            evolve through Pi (GBN: independent sentences).
        method: "greedy", "temperature" (or "sample") or "top_k".
        temperature, top_k: sampling settings.
        seed: sampling seed.

    Returns:
        A list of strings (sentences; with `paragraph`, paragraphs with one
        sentence per line).

    Raises:
        ValueError: an option that does not apply to the model (message names it).
    """
    name, model = run.name, run.model
    if name not in GENERATING_MODELS:
        raise ValueError(f"{run.path} holds a {name} model, which cannot generate text; "
                         f"generation works with {', '.join(GENERATING_MODELS)}")
    hierarchical = name in HIERARCHICAL_MODELS
    if layer is not None and not hierarchical:
        raise ValueError(f"--layer applies to rgbn_rnn and gbn_rnn (topic layers); {name} has "
                         "one layer of topics")
    if paragraph is not None and not hierarchical:
        raise ValueError(f"--paragraph applies to rgbn_rnn and gbn_rnn (topics evolving from "
                         f"sentence to sentence); {name} generates single sentences")
    if layer is not None and topic is None:
        raise ValueError("--layer selects the layer of --topic; give --topic K as well")
    if topic is not None and document is not None:
        raise ValueError("give --topic or --document, not both")
    if paragraph is not None and document is not None and name != "rgbn_rnn":
        raise ValueError("--paragraph with --document continues the document through the topic "
                         "transitions Pi, which only rgbn_rnn has (gbn_rnn: drop --document)")
    if paragraph is not None and topic is not None:
        raise ValueError("--paragraph starts from the prior or from --document; it does not "
                         "take --topic")
    if method == "temperature":
        method = "sample"
    options = {"method": method, "temperature": float(temperature), "top_k": int(top_k)}
    for key, value in (("--max-len", max_len), ("--top-k", top_k), ("--num", num),
                       ("--paragraph", paragraph)):
        if value is not None and int(value) < 1:
            raise ValueError(f"{key} must be >= 1, got {value}")
    if not float(temperature) > 0:
        raise ValueError(f"--temperature must be > 0, got {temperature}")
    if topic is not None:
        level = 1 if layer is None else int(layer)
        num_layers = model.num_layers if hierarchical else 1
        if not 1 <= level <= num_layers:
            raise ValueError(f"--layer {level}: the model has {num_layers} layer"
                             f"{'s' if num_layers > 1 else ''} of topics (1-{num_layers})")
        size = model.topic_sizes[level - 1] if hierarchical else model.num_topics
        if not 0 <= int(topic) < size:
            raise ValueError(f"--topic {topic}: layer {level} has {size} topics (0-{size - 1})")
    bow = None if document is None else document_bow(run, document)
    decode = lambda rows: [" ".join(run.lm_vocab.decode(row, strip_special=True))
                           for row in rows]
    if paragraph is not None:
        texts = []
        for i in range(int(num or 1)):
            rows = model.generate_paragraph(int(paragraph), max_len=int(max_len),
                                            context_bow=None if bow is None else bow[None],
                                            seed=None if seed is None else int(seed) + i,
                                            **options)
            texts.append("\n".join(decode(rows)))
        return texts
    num = int(num or 3)
    kwargs = dict(options, seed=seed, max_len=int(max_len))
    if name == "tcnlm":
        kwargs["allow_unk"] = False
    if hierarchical:
        if topic is not None:
            kwargs.update(topic=int(topic), topic_layer=int(layer or 1) - 1)
        rows = model.generate(num, context_bow=None if bow is None else bow[None], **kwargs)
    else:
        rows = model.generate(num, topic=None if topic is None else int(topic),
                              context_bow=bow, **kwargs)
    return decode(rows)


def export_run(run, saved_model):
    """Export a run's model and vocabularies as a TensorFlow SavedModel.

    Calls `tfktopic.export.export_saved_model(model, saved_model, lm_vocab=...,
    topic_vocab=...)`.

    Returns:
        The SavedModel path.
    """
    try:
        export = importlib.import_module("tfktopic.export")
    except ModuleNotFoundError as error:
        if error.name != "tfktopic.export":
            raise
        raise TfktopicError("export is not available in this installation (no tfktopic.export "
                            "module)") from None
    export.export_saved_model(run.model, saved_model, lm_vocab=run.lm_vocab,
                              topic_vocab=run.topic_vocab)
    return pathlib.Path(saved_model)
