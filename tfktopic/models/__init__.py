"""Models following the contract of DESIGN.md §3 (dict batch in, logits out)."""

from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel, ResetStates
from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel, LDATopicInference, fit_lda
from tfktopic.models.rgbn import RGBNRNN, hierarchy_to_dot, topic_hierarchy
from tfktopic.models.topicrnn.model import TopicRNN, build_sentiment_classifier
from tfktopic.models.tcnlm.model import TCNLM
from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel, score_stream_perplexity
from tfktopic.models.topicrnn.document import DocumentTopicRNN
