"""Model names, presets, data/training defaults and ``--set`` overrides of a run."""

import json

from tfktopic.models import registry

#: The model names of the command line (`tfktopic.models.registry`; what a model is,
#: has and is fed: its `registry.ModelEntry` traits, e.g. ``registry.get(name).has_topics``).
MODELS = registry.names()
OPTIMIZERS = ("adam", "sgld", "psgld")
SPLIT = (0.8, 0.1, 0.1)
RUN_FORMAT_VERSION = 1

DATA_DEFAULTS = {"min_count": 3, "max_size": None, "stopwords": "gensim",
                 "max_freq_fraction": 0.001, "min_doc_freq": 1, "max_len": 30,
                 "context_len": 300, "sentences_per_chunk": 8, "sentences_per_document": 10,
                 "bptt": 30, "train_context": "all_other"}
#: ``patience``: stop after that many epochs without a better validation
#: perplexity (`None`: train all ``epochs``; `tfktopic.runs.stopping`).
TRAINING_DEFAULTS = {"optimizer": "adam", "learning_rate": 1e-3, "batch_size": 64,
                     "epochs": 10, "clipnorm": None, "patience": None}
_TRAINING_KEYS = ("optimizer", "learning_rate", "batch_size", "epochs", "clipnorm",
                  "global_clipnorm", "clipvalue", "decay_steps", "decay_rate", "lda_passes", "temperature",
                  "patience")
# Flat preset keys that are neither data, training nor model settings.
_IGNORED_KEYS = ("dataset", "classifier_units", "classifier_epochs",
                 "train_protocol")
#: Data keys a preset may add to `DATA_DEFAULTS`: the corpus size a threshold was
#: given for (resolved by `tfktopic.runs.data.resolve_data_rules`).
DATA_RULE_KEYS = ("min_doc_freq_reference_docs",)
# Generation settings of `train`'s samples and `evaluate`'s BLEU.
GENERATION = {"method": "top_k", "top_k": 10, "temperature": 1.0}


# ----------------------------------------------------------------------------- presets
def preset_settings(model_name, preset="small"):
    """The settings of a preset, split into model, data and training parts.

    Reads `tfktopic.presets.preset` (the one preset table of every model) and
    fills in `DATA_DEFAULTS` and `TRAINING_DEFAULTS`; a data rule given for a
    corpus size (the preset's ``reference_documents``) is kept as
    ``data["min_doc_freq_reference_docs"]`` (`Preset.run_data`) for
    `tfktopic.runs.data.resolve_data_rules`.

    Args:
        model_name: one of `MODELS`.
        preset: a preset name of the model (`tfktopic.presets.names`).

    Returns:
        dict with ``name`` (`model_name`), ``model`` (constructor arguments),
        ``data`` (vocabulary and window settings, `DATA_DEFAULTS` filled in)
        and ``training`` (optimizer, learning rate, batch size, epochs, ...;
        `TRAINING_DEFAULTS` filled in).

    Raises:
        ValueError: unknown model or preset (message starts with ``--preset``).

    Example:
    >>> preset_settings("tcnlm", "small")["model"]["num_topics"]
    10
    """
    from tfktopic import presets

    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose from {', '.join(MODELS)}")
    names = presets.names(model_name)
    if preset not in names:
        raise ValueError(f"--preset: unknown preset {preset!r} for {model_name}; "
                         f"choose from {', '.join(names)}")
    entry = presets.preset(model_name, preset)
    parts = entry.settings()
    data = {**DATA_DEFAULTS,
            **{k: v for k, v in entry.run_data().items() if k not in _IGNORED_KEYS}}
    training = {**TRAINING_DEFAULTS,
                **{k: v for k, v in parts["training"].items() if k not in _IGNORED_KEYS}}
    model = parts["model"]
    defaults = registry.get(model_name).defaults
    for key, value in defaults.get("model", {}).items():
        model.setdefault(key, value)
    for key, value in defaults.get("training", {}).items():
        training.setdefault(key, value)
    return {"name": model_name, "model": model, "data": data, "training": training}


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
    ``true``, ``null``) or plain strings. An explicit ``min_doc_freq`` is
    absolute: it drops the preset's reference corpus size (unless
    ``min_doc_freq_reference_docs`` is given too), so it is not rescaled.

    Args:
        settings: dict from `preset_settings`.
        overrides: iterable of ``"KEY=VALUE"`` strings or a dict.

    Returns:
        `settings`.
    """
    items = list(overrides.items()) if isinstance(overrides, dict) else [
        parse_override(text) for text in overrides or ()]
    keys = {key for key, _ in items}
    if "min_doc_freq" in keys and "min_doc_freq_reference_docs" not in keys:
        settings["data"].pop("min_doc_freq_reference_docs", None)
    for key, value in items:
        for part in ("model", "data", "training"):
            if key in settings[part]:
                settings[part][key] = value
                break
        else:
            if key in DATA_DEFAULTS or key in DATA_RULE_KEYS:
                settings["data"][key] = value
            elif key in _TRAINING_KEYS:
                settings["training"][key] = value
            else:
                settings["model"][key] = value
    return settings


def parse_override(text):
    """``"KEY=VALUE"`` -> (key, JSON-parsed value); ValueError naming ``--set``."""
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set: expected KEY=VALUE, got {text!r}")
    return key.strip(), _parse_value(value.strip())
