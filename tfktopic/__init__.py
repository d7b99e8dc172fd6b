"""tfktopic: topic-guided and Bayesian recurrent language models for Keras 3.

Subpackages:
    tfktopic.data        corpus readers, vocabularies, contexts, tf.data, word2vec
    tfktopic.evaluation  perplexity, NPMI coherence, BLEU
    tfktopic.models      language models (the LSTM baselines so far)
    tfktopic.bayes       SGLD and pSGLD optimizers
"""

from tfktopic import bayes, data, evaluation, models
from tfktopic.errors import CorpusFormatError, TfktopicError, VocabularyError
from tfktopic.version import __version__
