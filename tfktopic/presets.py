"""The papers' setups as plain dicts, gathered from the modules that own them.

Each model module keeps its own ``PRESETS`` next to the code they configure;
this module only indexes them:

    >>> from tfktopic import presets
    >>> sorted(presets.available())            # doctest: +SKIP
    ['lda_lstm', 'rgbn_rnn', 'sgmcmc_char', 'sgmcmc_classifier', 'sgmcmc_ptb', 'tcnlm', 'topicrnn']
    >>> presets.get("tcnlm", "paper")["model"]["hidden_dim"]   # doctest: +SKIP
    600
"""

import copy
import importlib

__all__ = ["available", "get"]

_SOURCES = {
    "tcnlm": ("tfktopic.models.tcnlm", "PRESETS"),
    "topicrnn": ("tfktopic.models.topicrnn", "PRESETS"),
    "rgbn_rnn": ("tfktopic.models.rgbn.presets", "PRESETS"),
    "lda_lstm": ("tfktopic.models.lda_lstm", "PRESETS"),
    "sgmcmc_ptb": ("tfktopic.bayes.setups", "PTB_PRESETS"),
    "sgmcmc_char": ("tfktopic.bayes.setups", "CHAR_PRESETS"),
    "sgmcmc_classifier": ("tfktopic.bayes.setups", "CLASSIFIER_PRESETS"),
}


def _table(family):
    if family not in _SOURCES:
        raise ValueError(f"unknown model family {family!r}; choose from {', '.join(_SOURCES)}")
    module, name = _SOURCES[family]
    return getattr(importlib.import_module(module), name)


def available(family=None):
    """Preset names: a dict family -> names, or the names of one family."""
    if family is not None:
        return sorted(_table(family))
    return {name: sorted(_table(name)) for name in _SOURCES}


def get(family, name):
    """A deep copy of one preset (so callers can change it freely).

    Args:
        family: "tcnlm", "topicrnn", "rgbn_rnn", "lda_lstm", "sgmcmc_ptb",
            "sgmcmc_char" or "sgmcmc_classifier".
        name: the preset, e.g. "paper", "small", "reference_code".

    Returns:
        dict.
    """
    table = _table(family)
    if name not in table:
        raise ValueError(f"unknown preset {name!r} for {family}; choose from "
                         f"{', '.join(sorted(table))}")
    return copy.deepcopy(table[name])
