"""tfktopic: topic-guided and Bayesian recurrent language models for Keras 3.

Subpackages:
    tfktopic.data        corpus readers, vocabularies, contexts, tf.data, word2vec
    tfktopic.evaluation  perplexity, NPMI coherence, BLEU
    tfktopic.models      language models (the LSTM baselines so far)
    tfktopic.bayes       SGLD and pSGLD optimizers
"""

from tfktopic.startup import quiet_command_line

quiet_command_line()  # the tfktopic command only: before TensorFlow is imported

from tfktopic import bayes, data, evaluation, models
from tfktopic.errors import CorpusFormatError, TfktopicError, VocabularyError
from tfktopic.version import __version__
