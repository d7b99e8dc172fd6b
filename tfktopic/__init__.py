"""tfktopic: topic-guided and Bayesian recurrent language models for Keras 3.

Subpackages:
    tfktopic.data        corpus readers, vocabularies, contexts, document streams, tf.data,
                         word2vec
    tfktopic.evaluation  perplexity, NPMI coherence and topic diversity, BLEU, paired
                         bootstrap comparisons
    tfktopic.models      the model base class, registry and every language model
    tfktopic.bayes       SGLD / pSGLD, sample collection, TLASGR-MCMC
    tfktopic.runs        the one run path (prepare_data, build_model, train_run, ...)
"""

from tfktopic.startup import quiet_command_line, reuse_cpu_memory

quiet_command_line()  # the tfktopic command only: before TensorFlow is imported
reuse_cpu_memory()    # before TensorFlow's first CPU tensor (tfktopic/startup.py)

import importlib

from tfktopic.errors import CorpusFormatError, TfktopicError, VocabularyError
from tfktopic.version import __version__

# Imported on first use (``tfktopic.models``): ``import tfktopic`` and ``tfktopic --help``
# import no TensorFlow / Keras (measured: ``--help`` took 4.5 s with them imported eagerly).
_SUBPACKAGES = ("bayes", "data", "evaluation", "models", "runs")


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"tfktopic.{name}")
    raise AttributeError(f"module 'tfktopic' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBPACKAGES})
