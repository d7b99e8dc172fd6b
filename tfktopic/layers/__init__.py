"""Custom Keras layers of the topic-guided language models (one file per layer)."""

from tfktopic.layers.hoisted_lstm import HoistedLSTM, run_lstm, use_keras_lstm
from tfktopic.layers.topic_encoders import GaussianTopicEncoder
from tfktopic.layers.weibull import WeibullSampler, weibull_gamma_kl, weibull_mean
from tfktopic.layers.topic_encoders import RecurrentWeibullEncoder
from tfktopic.layers.topic_gated_lstm import TopicGate, TopicGatedLSTMCell, TopicGatedLSTMStack
from tfktopic.layers.stopword_gate import StopwordGate
from tfktopic.layers.factorized_lstm import FactorizedTopicLSTM, FactorizedTopicLSTMCell, TopicExpertsLSTM
from tfktopic.layers.topic_decoder import NeuralTopicModel, TopicDecoder
