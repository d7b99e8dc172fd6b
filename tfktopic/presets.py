"""One preset schema for every model: `Preset` (model, data and training settings).

Each model family keeps its presets as pure data in its own module
``tfktopic/models/<family>/presets.py`` (LDA-LSTM:
``tfktopic/models/lstm/lda_presets.py``; Gan et al.'s SG-MCMC setups, families
``sgmcmc_ptb`` / ``sgmcmc_char`` / ``sgmcmc_classifier`` / ``sgmcmc_ablation``:
``tfktopic/bayes/sgmcmc_presets.py``), a dict name -> ``{"model", "data",
"training", "description", "reference_documents"}``; the modules import
nothing. This module indexes them statically and turns an entry into a
frozen `Preset`:

    >>> from tfktopic import presets
    >>> presets.names("tcnlm")[:3]                                     # doctest: +SKIP
    ['demo', 'medium', 'paper']
    >>> paper = presets.preset("tcnlm", "paper")
    >>> paper.model["hidden_dim"], paper.data["min_doc_freq"]
    (600, 100)
    >>> paper.resolve_data(num_documents=1600)["min_doc_freq"]   # the rule, scaled
    3

``small`` and ``medium`` name the same LM size in every family (the
the benchmarks' ``quick`` and ``medium`` sizes: 32-d embeddings and 1 x 64
units; 128-d and 1 x 256; rGBN-RNN's first layer), so ``--preset small``
compares like with like;
``paper`` (and ``paper_*``) are each paper's own setups.

**Data rules** given for a paper's corpus size (TCNLM: topic words must occur in
>= 100 of the 50K APNEWS training documents) are stated with the
``reference_documents`` they were given for, and resolved in one place,
`resolve_data_rules` (which `Preset.resolve_data` and
``tfktopic train`` both call): on a smaller corpus the ``min_doc_freq``
threshold scales with the number of training documents (never below 1, never
above the stated value).
"""

import copy
import dataclasses
import types
import typing

from tfktopic.bayes import sgmcmc_presets
from tfktopic.models.lstm import lda_presets as lda_lstm_presets, presets as lstm_presets
from tfktopic.models.tcnlm import presets as tcnlm_presets
from tfktopic.models.topicrnn import presets as topicrnn_presets
from tfktopic.models.rgbn import presets as rgbn_presets

__all__ = ["Preset", "RELATIVE_DATA_KEYS", "REFERENCE_DATA_KEY", "preset", "names",
           "resolve_data_rules"]

#: Data settings given for a corpus of `Preset.reference_documents` documents.
RELATIVE_DATA_KEYS = ("min_doc_freq",)
#: The data key that carries `Preset.reference_documents` to
#: `resolve_data_rules` (`Preset.run_data`).
REFERENCE_DATA_KEY = "min_doc_freq_reference_docs"
_PARTS = ("model", "data", "training")
_ENTRY_KEYS = set(_PARTS) | {"description", "reference_documents"}


@dataclasses.dataclass(frozen=True)
class Preset:
    """One named setup of a model family.

    Attributes:
        name: the preset's name (e.g. "small", "paper").
        model: constructor arguments of the model class (read-only mapping).
        data: vocabulary and window settings (``min_count``, ``stopwords``,
            ``max_len``, ``min_doc_freq``, ...).
        training: optimizer settings (``optimizer``, ``learning_rate``,
            ``batch_size``, ``epochs``, ``clipnorm``, ...).
        description: one line on where the setup comes from.
        reference_documents: the number of training documents the data rules
            (`RELATIVE_DATA_KEYS`) were given for, or `None` (absolute values).

    Example:
    >>> Preset.from_entry("tiny", {"model": {"hidden_dim": 8}}).model["hidden_dim"]
    8
    """

    name: str
    model: typing.Mapping
    data: typing.Mapping
    training: typing.Mapping
    description: str = ""
    reference_documents: typing.Optional[int] = None

    def __post_init__(self):
        for part in _PARTS:
            object.__setattr__(self, part,
                               types.MappingProxyType(copy.deepcopy(dict(getattr(self, part)))))
        if self.reference_documents is not None and int(self.reference_documents) < 1:
            raise ValueError(f"preset {self.name!r}: reference_documents must be >= 1 or None, "
                             f"got {self.reference_documents!r}")

    @classmethod
    def from_entry(cls, name, entry):
        """A `Preset` from a preset module's entry (a dict of the schema's keys).

        Raises:
            ValueError: an entry with unknown keys.
        """
        unknown = set(entry) - _ENTRY_KEYS
        if unknown:
            raise ValueError(f"preset {name!r}: unknown keys {sorted(unknown)}; a preset has "
                             f"{sorted(_ENTRY_KEYS)}")
        return cls(name, entry.get("model", {}), entry.get("data", {}),
                   entry.get("training", {}), entry.get("description", ""),
                   entry.get("reference_documents"))

    def settings(self):
        """``{"model", "data", "training"}`` as new (deep-copied) dicts."""
        return {part: copy.deepcopy(dict(getattr(self, part))) for part in _PARTS}

    def run_data(self):
        """The data settings as the run code reads them (a new dict).

        With `reference_documents`, a data rule of `RELATIVE_DATA_KEYS`
        carries its corpus size as ``data[REFERENCE_DATA_KEY]``, for
        `resolve_data_rules`.

        Returns:
            dict of data settings.
        """
        data = copy.deepcopy(dict(self.data))
        if self.reference_documents and any(key in data for key in RELATIVE_DATA_KEYS):
            data[REFERENCE_DATA_KEY] = int(self.reference_documents)
        return data

    def resolve_data(self, num_documents):
        """The data settings for a training corpus of `num_documents` documents.

        `resolve_data_rules` (the one implementation of the
        data rules) applied to `run_data`: ``min_doc_freq`` given for
        `reference_documents` documents is scaled by ``num_documents /
        reference_documents`` when the corpus is smaller (rounded, at least 1);
        other settings are returned unchanged.

        Args:
            num_documents: training documents of the corpus (int >= 1).

        Returns:
            dict of data settings (the preset's keys, no rule bookkeeping).
        """
        if isinstance(num_documents, bool) or int(num_documents) < 1:
            raise ValueError(f"num_documents must be >= 1, got {num_documents!r}")
        data, _ = resolve_data_rules(self.run_data(), int(num_documents))
        return {key: data[key] for key in self.data}


def resolve_data_rules(data, num_train_documents):
    """Resolve the data rules given for another corpus size (the one place they are resolved).

    A document-frequency threshold of the topic vocabulary given with its
    reference corpus size (``min_doc_freq`` with ``min_doc_freq_reference_docs``;
    TCNLM §4: "words in fewer than 100 documents" of 50K APNEWS training
    documents) keeps its *share* of the training documents:
    ``max(1, round(min_doc_freq * N_train / reference_docs))`` when the
    training split is smaller than the reference (never scaled up). An
    explicit ``--set min_doc_freq=N`` is absolute (`apply_overrides` drops the
    reference). `Preset.resolve_data` and `tfktopic.runs` call this function.

    Args:
        data: data settings (not changed).
        num_train_documents: documents of the training split.

    Returns:
        (resolved data settings, list of note strings). The resolved settings
        hold the value used in ``min_doc_freq`` and, when a rule applied,
        ``min_doc_freq_rule`` = {given, reference_docs, train_documents}; the
        reference key is removed, so resolving again changes nothing.
    """
    data = dict(data)
    notes = []
    reference = data.pop("min_doc_freq_reference_docs", None)
    if reference:
        given = int(data["min_doc_freq"])
        value = given
        if num_train_documents < int(reference):
            value = max(1, round(given * num_train_documents / int(reference)))
        data["min_doc_freq"] = value
        data["min_doc_freq_rule"] = {"given": given, "reference_docs": int(reference),
                                     "train_documents": int(num_train_documents)}
        if value != given:
            notes.append(f"topic-vocabulary min_doc_freq {given} (given for {reference} "
                         f"training documents) scaled to {value} for {num_train_documents}")
    return data, notes


#: model name -> its preset module's entries (static: adding a family = one line).
_FAMILIES = {
    "lstm": lstm_presets.PRESETS,
    "doc_lstm": lstm_presets.PRESETS,
    "doc_lstm_chunked": lstm_presets.PRESETS,
    "lda_lstm": lda_lstm_presets.PRESETS,
    "topicrnn": topicrnn_presets.PRESETS,
    "doc_topicrnn": topicrnn_presets.STREAMED_PRESETS,
    "tcnlm": tcnlm_presets.PRESETS,
    "rgbn_rnn": rgbn_presets.PRESETS,
    "gbn_rnn": rgbn_presets.GBN_PRESETS,
    # Gan et al.'s SG-MCMC setups (not models of the registry; `tfktopic.bayes.setups`).
    "sgmcmc_ptb": sgmcmc_presets.PTB_PRESETS,
    "sgmcmc_char": sgmcmc_presets.CHAR_PRESETS,
    "sgmcmc_classifier": sgmcmc_presets.CLASSIFIER_PRESETS,
    "sgmcmc_ablation": sgmcmc_presets.ABLATION_PRESETS,
}


def names(model_name):
    """The preset names of a model or preset family (e.g. ``names("tcnlm")``,
    ``names("sgmcmc_ptb")``), sorted."""
    if model_name not in _FAMILIES:
        raise ValueError(f"unknown model {model_name!r}; choose from {', '.join(_FAMILIES)}")
    return sorted(_FAMILIES[model_name])


def preset(model_name, name):
    """The `Preset` `name` of a model.

    Args:
        model_name: a model name of `tfktopic.models.registry` ("lstm",
            "doc_lstm", "tcnlm", ...) or an SG-MCMC family ("sgmcmc_ptb", ...).
        name: a preset name (`names`).

    Returns:
        `Preset`.

    Raises:
        ValueError: an unknown model or preset (the message lists the choices).
    """
    table = _FAMILIES.get(model_name)
    if table is None:
        raise ValueError(f"unknown model {model_name!r}; choose from {', '.join(_FAMILIES)}")
    if name not in table:
        raise ValueError(f"unknown preset {name!r} for {model_name}; choose from "
                         f"{', '.join(sorted(table))}")
    return Preset.from_entry(name, table[name])
