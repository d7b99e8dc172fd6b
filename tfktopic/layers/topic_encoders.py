"""Inference networks q(theta | context bag of words) of the topic models.

* `GaussianTopicEncoder` -- TopicRNN (Dieng et al. 2017, §3) and the neural
  topic model of TCNLM (Wang et al. 2018, §3.1): a ReLU MLP over the
  bag of words gives the mean and log standard deviation of a diagonal
  Gaussian q(theta | d); theta is drawn by reparameterisation and the KL to
  the standard normal prior is closed form.

rGBN-RNN's recurrent Weibull encoder is rGBN-only and lives in its family folder
(`tfktopic.models.rgbn.encoder.RecurrentWeibullEncoder`); it shares `normalize_bow`.
"""

import keras
from keras import ops

from tfktopic.distributions import gaussian_standard_kl

__all__ = ["GaussianTopicEncoder", "normalize_bow"]

BOW_NORMALIZATIONS = ("none", "total", "log1p")


def normalize_bow(bow, normalization="total"):
    """Scale a bag-of-words batch before the inference network.

    Args:
        bow: float [..., V] counts.
        normalization: "none" (raw counts), "total" (relative frequencies;
            an empty context stays all-zero) or "log1p" (log(1 + counts)).

    Returns:
        float [..., V].
    """
    if normalization == "none":
        return bow
    if normalization == "total":
        return ops.divide_no_nan(bow, ops.sum(bow, axis=-1, keepdims=True))
    if normalization == "log1p":
        return ops.log1p(bow)
    raise ValueError(f"bow normalization must be one of {BOW_NORMALIZATIONS}, got {normalization!r}")


@keras.saving.register_keras_serializable(package="tfktopic")
class GaussianTopicEncoder(keras.layers.Layer):
    """q(theta | d) = N(mu(d), diag sigma(d)^2) with a reparameterised sample.

    The MLP is g = ReLU(...ReLU(W d)); mu = W1 g + a1 and log sigma = W2 g + a2
    (TopicRNN §3 "inference network"; TCNLM eqs. (8)-(9)). The sample is
    theta = mu + sigma * eps with eps ~ N(0, I) when ``training`` (or when
    ``sample=True``); otherwise theta is the mean mu (TopicRNN §3: "we use the
    mean of q at test time").

    Args:
        num_topics: K, the size of theta.
        hidden_units: widths of the ReLU layers (TopicRNN PTB: (200, 200);
            TCNLM: (256, 256)).
        normalization: how the BoW is scaled first, see `normalize_bow`.
        dropout: dropout on the last hidden layer (training only).
        log_std_clip: log sigma is clipped to [-clip, clip] so exp() cannot
            overflow early in training.
        seed: seed of the reparameterisation noise.

    Call args:
        bow: float [B, V] bag of words of the context.
        training: draw a sample (True) or return the mean (False).
        sample: override: force a sample (True) or the mean (False).

    Returns:
        (theta, mean, log_std), each float [B, K].

    Example:
    >>> encoder = GaussianTopicEncoder(num_topics=4, hidden_units=(8,))
    >>> theta, mean, log_std = encoder(keras.ops.ones((2, 10)))
    >>> tuple(theta.shape), tuple(encoder.kl(mean, log_std).shape)
    ((2, 4), (2,))
    """

    def __init__(self, num_topics, hidden_units=(256, 256), normalization="total", dropout=0.0,
                 log_std_clip=10.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if int(num_topics) < 1:
            raise ValueError(f"num_topics must be >= 1, got {num_topics}")
        if normalization not in BOW_NORMALIZATIONS:
            raise ValueError(
                f"normalization must be one of {BOW_NORMALIZATIONS}, got {normalization!r}")
        self.num_topics = int(num_topics)
        self.hidden_units = tuple(int(u) for u in hidden_units)
        self.normalization = normalization
        self.dropout = float(dropout)
        self.log_std_clip = float(log_std_clip)
        self.seed = seed
        self.hidden = [keras.layers.Dense(u, activation="relu", name=f"hidden_{i}",
                                          dtype=self.dtype_policy)
                       for i, u in enumerate(self.hidden_units)]
        self.dropout_layer = keras.layers.Dropout(self.dropout, seed=seed, dtype=self.dtype_policy)
        self.mean_head = keras.layers.Dense(self.num_topics, name="mean", dtype=self.dtype_policy)
        self.log_std_head = keras.layers.Dense(self.num_topics, name="log_std",
                                               dtype=self.dtype_policy)
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.hidden:
            layer.build(shape)
            shape = shape[:-1] + (layer.units,)
        self.mean_head.build(shape)
        self.log_std_head.build(shape)

    def call(self, bow, training=False, sample=None):
        x = normalize_bow(ops.cast(bow, self.compute_dtype), self.normalization)
        for layer in self.hidden:
            x = layer(x)
        x = self.dropout_layer(x, training=training)
        mean = self.mean_head(x)
        log_std = ops.clip(self.log_std_head(x), -self.log_std_clip, self.log_std_clip)
        draw = training if sample is None else sample
        if draw:
            eps = keras.random.normal(ops.shape(mean), dtype=mean.dtype, seed=self.seed_generator)
            theta = mean + ops.exp(log_std) * eps
        else:
            theta = mean
        return theta, mean, log_std

    def kl(self, mean, log_std):
        """KL(q(theta | d) || N(0, I)) per example, float [B].

        Closed form 1/2 sum_k (mu_k^2 + sigma_k^2 - 2 log sigma_k - 1)
        (TopicRNN §3; TCNLM eq. (17)): `tfktopic.distributions.gaussian_standard_kl`.
        """
        return gaussian_standard_kl(mean, log_std)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)[:-1] + (self.num_topics,)
        return shape, shape, shape

    def get_config(self):
        return {**super().get_config(), "num_topics": self.num_topics,
                "hidden_units": list(self.hidden_units), "normalization": self.normalization,
                "dropout": self.dropout, "log_std_clip": self.log_std_clip, "seed": self.seed}
