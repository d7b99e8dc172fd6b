"""Custom Keras layers shared by two or more model families (one file per layer).

A layer only one family uses lives in that family's folder under
`tfktopic.models` (e.g. `tfktopic.models.tcnlm.factorized_lstm`,
`tfktopic.models.rgbn.weibull`).
"""

from tfktopic.layers.hoisted_lstm import HoistedLSTM, run_lstm, use_keras_lstm
from tfktopic.layers.topic_encoders import GaussianTopicEncoder
from tfktopic.layers.topic_decoder import NeuralTopicModel, TopicDecoder
