"""The run directory: `Run`, resolving ``pretrained:NAME`` and loading a run."""

import dataclasses
import os
import pathlib

from tfktopic import pretrained
from tfktopic.errors import TfktopicError
from tfktopic.models import registry
from tfktopic.runs.checkpoints import BACKUP_DIR, BEST_WEIGHTS, intact_keras_file
from tfktopic.runs.checks import check_finite_weights, check_model_class, check_vocabularies
from tfktopic.runs.files import read_json
from tfktopic.runs.settings import MODELS

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

    @property
    def tokenizer(self):
        """The run's `tfktopic.tokenizer.Tokenizer` (its two vocabularies)."""
        from tfktopic.tokenizer import Tokenizer

        return Tokenizer(self.lm_vocab, self.topic_vocab)


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
    config = read_json(path, "tfktopic run settings")
    missing = [k for k in ("model", "data", "seed", "corpus") if k not in config]
    if missing:
        raise TfktopicError(f"{path}: not a tfktopic run file (missing {', '.join(missing)})")
    # A run written under a model's former name (`registry.recorded_name`).
    config["model"] = registry.recorded_name(config["model"], config.get("model_config"))
    if config["model"] not in MODELS:
        raise TfktopicError(f"{path}: unknown model {config['model']!r}")
    return config


def resolve_recorded_paths(config, directory):
    """``run.json``'s relative paths made absolute, independent of the working directory.

    `tfktopic train` records absolute paths; the shipped pretrained runs record
    theirs relative to the repository root (``../shared/data/...``, as
    `tools/make_pretrained.py` runs the commands), the folder two levels above
    ``pretrained/NAME``. A relative ``corpus``, ``data.stopwords`` (a file, not
    ``gensim`` / ``none``) or ``embeddings_path`` is taken relative to the run
    directory's grandparent, so that ``tfktopic evaluate pretrained:NAME`` works
    from any directory.

    Args:
        config: the parsed ``run.json`` (changed in place).
        directory: the run directory.

    Returns:
        `config`.
    """
    anchor = pathlib.Path(directory).resolve().parent.parent

    def absolute(text):
        if text is None or str(text) in ("lee", "gensim", "none"):
            return text
        return str(text) if pathlib.Path(text).is_absolute() else str((anchor / text).resolve())

    config["corpus"] = absolute(config.get("corpus"))
    if isinstance(config.get("data"), dict) and "stopwords" in config["data"]:
        config["data"]["stopwords"] = absolute(config["data"]["stopwords"])
    if config.get("embeddings_path"):
        config["embeddings_path"] = absolute(config["embeddings_path"])
    return config


def load_model(path):
    """Load a ``.keras`` model file of a run (not compiled); `TfktopicError` naming the file."""
    import keras

    import tfktopic  # noqa: F401  (registers every model class for deserialisation)

    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such file (the run has no checkpoint yet: train it "
                            "for at least one epoch)")
    if not intact_keras_file(path):
        raise TfktopicError(f"{path}: not a Keras model file (damaged: an incomplete .keras "
                            f"archive); run the same "
                            f"`tfktopic train` command again to rebuild it from "
                            f"{path.parent / BACKUP_DIR / BEST_WEIGHTS}, or delete "
                            f"{path.parent} and retrain")
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
        A `Run`; ``run.model.tokenizer`` is the run's tokenizer (`Run.tokenizer`), so
        ``run.model.generate`` returns text and ``run.model.topics`` words.

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
    config = resolve_recorded_paths(read_run_config(path), path)
    lm_vocab = Vocabulary.load(path / "lm_vocab.json")
    check_vocabularies(path, config, lm_vocab=lm_vocab)
    model = load_model(path / "model.keras")
    check_model_class(path / "run.json", config["model"], model, path / "model.keras")
    vocab_size = getattr(model, "vocab_size", None)
    if vocab_size is not None and vocab_size != len(lm_vocab):
        raise TfktopicError(f"{path / 'lm_vocab.json'}: {len(lm_vocab)} words, but the model in "
                            f"model.keras has a vocabulary of {vocab_size}")
    topic_vocab = TopicVocabulary.load(path / "topic_vocab.json", lm_vocab)
    check_vocabularies(path, config, topic_vocab=topic_vocab)
    check_finite_weights(model, path / "model.keras")
    topic_size = getattr(model, "topic_vocab_size", None)
    if topic_size is not None and topic_size != len(topic_vocab):
        raise TfktopicError(f"{path / 'topic_vocab.json'}: {len(topic_vocab)} words, but the "
                            f"model in model.keras has a topic vocabulary of {topic_size}")
    run = Run(model, lm_vocab, topic_vocab, config, path)
    model.tokenizer = run.tokenizer       # generate() gives text, topics() words
    return run
