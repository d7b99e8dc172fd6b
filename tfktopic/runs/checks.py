"""Input checks of a run: learning rate, model class, vocabularies, unknown-word rate.

Each check raises a one-line `TfktopicError` naming the argument or file, so
that the command line reports it without a traceback::

    check_learning_rate(-1.0)   # TfktopicError: --learning-rate must be > 0, got -1.0
"""

import math
import pathlib

import numpy as np

from tfktopic.errors import TfktopicError

__all__ = ["OOV_WARNING_RATE", "check_learning_rate", "check_model_class",
           "check_setting_keys",
           "check_finite_weights", "check_vocabularies", "oov_rate", "vocabulary_record"]

# `evaluate` warns when more of the scored targets than this are <unk> (a small run's own
# test split can reach 40 %; text of unknown words is above 70 %).
OOV_WARNING_RATE = 0.5


def check_learning_rate(value, name="--learning-rate"):
    """Refuse a learning rate that is not a finite number > 0.

    Args:
        value: the learning rate (or `None`: the optimizer's own schedule).
        name: the argument named in the error.

    Raises:
        TfktopicError: ``value <= 0``, NaN or infinite.
    """
    if value is None:
        return
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TfktopicError(f"{name} must be a number > 0, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise TfktopicError(f"{name} must be a finite number > 0, got {value!r}")


def check_model_class(config_path, model_name, model, model_path):
    """The model in ``model.keras`` must be the one ``run.json`` names.

    Raises:
        TfktopicError: naming ``run.json`` and what ``model.keras`` holds.
    """
    from tfktopic.models import registry

    entry = registry.get(model_name)
    # The class, and the constructor arguments the name implies (doc_lstm's
    # document_level, rGBN's recurrent), must be what run.json says.
    implied = {key: getattr(model, key, None) for key in entry.fixed}
    if (type(model) is not entry.model_class
            or any(bool(implied[k]) != bool(v) for k, v in entry.fixed.items())):
        holds = type(model).__name__ + "".join(f"({k}={v})" for k, v in implied.items())
        raise TfktopicError(f"{config_path}: names a {model_name} model, but {model_path} holds "
                            f"a {holds}; the run directory is inconsistent (restore run.json)")


def check_finite_weights(model, model_path):
    """Refuse a model with NaN or infinite weights (a diverged run).

    Raises:
        TfktopicError: naming the file and the first bad variable.
    """
    for variable in model.weights:
        if not np.all(np.isfinite(np.asarray(variable.numpy(), dtype=np.float64))):
            raise TfktopicError(f"{model_path}: the weights are not finite (NaN or inf in "
                                f"{variable.path}); the run diverged: train again with a lower "
                                "--learning-rate")


def vocabulary_record(lm_vocab, topic_vocab):
    """What ``run.json`` stores to recognise the run's vocabularies later."""
    return {"lm_vocab.json": {"size": len(lm_vocab), "sha256": lm_vocab.checksum},
            "topic_vocab.json": {"size": len(topic_vocab), "sha256": topic_vocab.checksum}}


def check_vocabularies(directory, config, lm_vocab=None, topic_vocab=None):
    """Compare vocabularies with the sizes and checksums stored in ``run.json``.

    Runs written before the checksums existed carry none: nothing to check.

    Args:
        directory: the run directory.
        config: its parsed ``run.json``.
        lm_vocab, topic_vocab: the loaded vocabularies (either may be `None`).

    Raises:
        TfktopicError: naming the vocabulary file that does not match.
    """
    stored = config.get("vocabularies") or {}
    for name, vocab in (("lm_vocab.json", lm_vocab), ("topic_vocab.json", topic_vocab)):
        record = stored.get(name)
        if vocab is None or not record:
            continue
        path = pathlib.Path(directory) / name
        if record.get("size") != len(vocab):
            raise TfktopicError(f"{path}: {len(vocab)} words, but the run was trained with "
                                f"{record.get('size')} (a vocabulary of another run?)")
        if record.get("sha256") != vocab.checksum:
            raise TfktopicError(f"{path}: not the vocabulary the run was trained with (same "
                                "size, different words or order; checksum in run.json)")


def oov_rate(examples, unk_id):
    """Fraction of the scored targets of `examples` that are ``<unk>``.

    Args:
        examples: `SentenceExamples` or `DocumentSequences`.
        unk_id: the vocabulary's ``<unk>`` id.

    Returns:
        A float in [0, 1] (0 when there are no targets).
    """
    targets = np.asarray(examples.targets)
    lengths = np.asarray(examples.lengths)
    mask = np.arange(targets.shape[-1]) < lengths[..., None]
    total = int(mask.sum())
    return float(((targets == unk_id) & mask).sum() / total) if total else 0.0


def _entry(model_name):
    from tfktopic.models import registry

    return registry.get(model_name)


def check_setting_keys(model_name, keys, settings):
    """Refuse ``--set KEY`` that is neither a data / training setting nor a model argument.

    Args:
        model_name: a registered model name (`tfktopic.models.registry`).
        keys: the keys the user gave with ``--set``.
        settings: the run's settings after the overrides (``model``, ``data``,
            ``training`` parts; unknown keys land in ``model``).

    Raises:
        TfktopicError: ``--set KEY: not a setting of MODEL; valid keys: ...``.
    """
    import inspect

    entry = _entry(model_name)
    parameters = inspect.signature(entry.model_class.__init__).parameters
    arguments = {name for name, p in parameters.items()
                 if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self"}
    arguments |= {"num_layers"} | set(entry.extra_settings)
    arguments -= {"vocab_size", "topic_vocab_size", "lm_to_topic", "num_documents", "lda",
                  "embeddings"}  # set by the run itself
    valid = sorted(arguments | set(settings["data"]) | set(settings["training"]))
    for key in keys:
        if key in settings["model"] and key not in arguments:
            raise TfktopicError(f"--set {key}: not a setting of {model_name}; valid keys: "
                                f"{', '.join(valid)}")
