"""Custom Keras layers of the topic-guided language models (one file per layer)."""

from tfktopic.layers.topic_encoders import GaussianTopicEncoder
from tfktopic.layers.weibull import WeibullSampler, weibull_gamma_kl, weibull_mean
