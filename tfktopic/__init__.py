"""tfktopic: topic-guided and Bayesian recurrent language models for Keras 3.

Subpackages:
    tfktopic.data        corpus readers, vocabularies, contexts, tf.data, word2vec
    tfktopic.evaluation  perplexity, NPMI coherence, BLEU
"""

from tfktopic import data, evaluation
from tfktopic.errors import CorpusFormatError, TfktopicError, VocabularyError
from tfktopic.version import __version__
