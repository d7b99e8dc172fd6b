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

from tfktopic.startup import quiet_command_line

quiet_command_line()  # the tfktopic command only: before TensorFlow is imported

from tfktopic import bayes, data, evaluation, models
from tfktopic.errors import CorpusFormatError, TfktopicError, VocabularyError
from tfktopic.version import __version__
