"""Small pretrained models shipped with tfktopic (offline; no download).

This module only resolves names to run directories (it imports nothing from
`tfktopic.runs`); load one with ``tfktopic.runs.load_run("pretrained:NAME")``.
Each model is a run directory (see `tfktopic.runs`) trained on a real corpus by the
``tfktopic train`` command recorded in its index entry, with its vocabularies and its
measured test perplexity (leak-free protocol). `tools/make_pretrained.py` produced
them; ``tests/library/test_pretrained.py`` checks that each loads and reproduces its recorded
perplexity on a slice of the corpus.

Example:
>>> from tfktopic import pretrained
>>> sorted(pretrained.available())                                  # doctest: +SKIP
['doc-topicrnn-apnews', 'gbn-rnn-apnews', 'psgld-lstm-ptb', 'tcnlm-apnews']
>>> pretrained.resolve("tcnlm-apnews")                              # doctest: +SKIP
PosixPath('.../pretrained/tcnlm-apnews')
>>> from tfktopic.runs import load_run
>>> run = load_run("pretrained:tcnlm-apnews")                       # doctest: +SKIP
>>> run.model.topics(top_n=5, vocabulary=run.topic_vocab)[:2]       # doctest: +SKIP
>>> from tfktopic.models.base import TopicLanguageModel
>>> model = TopicLanguageModel.from_preset("pretrained:tcnlm-apnews")  # doctest: +SKIP
>>> model.generate(topic=42, max_length=30)       # text: tokenizer attached  # doctest: +SKIP

On the command line: ``tfktopic generate pretrained:tcnlm-apnews --topic 42`` (one of the
topics it uses: ``tfktopic topics pretrained:tcnlm-apnews`` marks the unused ones).
"""

import importlib.resources
import json
import pathlib

from tfktopic.errors import TfktopicError

__all__ = ["REPLACED", "available", "directory", "info", "resolve"]

#: Names shipped by earlier versions -> the model that replaced each (an error names it).
REPLACED = {
    # the sentence-level TopicRNN with Keras' initialisation (test 71.26)
    "topicrnn-apnews": "doc-topicrnn-apnews",
    # a 2-layer `small` rGBN-RNN trained for 2 epochs (test 116.71)
    "rgbn-apnews": "gbn-rnn-apnews",
}

_SOURCE_TREE = pathlib.Path(__file__).resolve().parent.parent / "pretrained"


def directory():
    """The folder holding the pretrained run directories and ``index.json``.

    Returns:
        `pathlib.Path`: the installed package data (``tfktopic.pretrained_models``,
        mapped from the repository's ``pretrained/`` by pyproject.toml) or, in a source
        checkout, the repository's ``pretrained/`` folder.
    """
    installed = pathlib.Path(str(importlib.resources.files("tfktopic"))) / "pretrained_models"
    if (installed / "index.json").is_file():
        return installed
    return _SOURCE_TREE


def available():
    """Index of the pretrained models.

    Returns:
        dict: name -> its entry (``description``, ``model``, ``command``,
        ``test_perplexity``, ``check`` slice and perplexity, ``size_mb``, ...).
    """
    path = directory() / "index.json"
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def info(name):
    """The index entry of one pretrained model (see `available`)."""
    models = available()
    if name not in models and REPLACED.get(name) in models:
        raise TfktopicError(f"pretrained:{name}: replaced by pretrained:{REPLACED[name]} "
                            "(a model trained to convergence; README, Pretrained models)")
    if name not in models:
        choices = ", ".join(sorted(models)) or "none are installed"
        raise TfktopicError(f"pretrained:{name}: no such pretrained model (available: "
                            f"{choices})")
    return models[name]


def resolve(name):
    """The run directory of a pretrained model.

    Args:
        name: a name listed by `available`.

    Returns:
        `pathlib.Path` of the run directory.

    Raises:
        TfktopicError: unknown name, or its files are missing.
    """
    info(name)
    path = directory() / name
    if not (path / "model.keras").is_file():
        raise TfktopicError(f"pretrained:{name}: {path / 'model.keras'} is missing (the "
                            "installation is incomplete)")
    return path

