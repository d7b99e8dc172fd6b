"""Inference networks q(theta | context bag of words) of the topic models.

* `GaussianTopicEncoder` -- TopicRNN (Dieng et al. 2017, §3) and the neural
  topic model of TCNLM (Wang et al. 2018, §3.1): a ReLU MLP over the
  bag of words gives the mean and log standard deviation of a diagonal
  Gaussian q(theta | d); theta is drawn by reparameterisation and the KL to
  the standard normal prior is closed form.
* `RecurrentWeibullEncoder` -- rGBN-RNN (Guo et al. 2020, eq. 9): per layer a
  sentence-level RNN over the J sentence contexts of a document chunk, with
  softplus Weibull shape and scale heads and a reparameterised Weibull sample.
"""

import keras
from keras import ops

from tfktopic.distributions import gaussian_standard_kl
from tfktopic.layers.weibull import WeibullSampler

__all__ = ["GaussianTopicEncoder", "RecurrentWeibullEncoder", "normalize_bow"]

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


# The floor the released rGBN-RNN code applies everywhere (`real_min`).
_REAL_MIN = 2.2e-20


@keras.saving.register_keras_serializable(package="tfktopic")
class RecurrentWeibullEncoder(keras.layers.Layer):
    """rGBN-RNN's Weibull inference network q(theta^l_j | d_{1:j}) (eq. 9).

    Upward over layers and forward over the J sentences of a document chunk:

        h^l_j = sigmoid(h^{l-1}_j W^l + h^l_{j-1} U^l),   h^0_j = d_j,  h^l_0 = 0,

    a bias-free basic RNN per layer (U^l initialised to the identity) when
    ``recurrent=True`` (the paper's eq. 9); ``recurrent=False`` drops the
    h^l_{j-1} term, which is what the released joint code computes
    (h^l_j = sigmoid(h^{l-1}_j W^l); reference rgbn_rnn.md §2.2). Then

        k^l_j = softplus(h^l_j w_k + b_k),   lambda^l_j = softplus(h^l_j W_lambda + b_lambda),
        theta^l_j ~ Weibull(k^l_j, lambda^l_j)   (reparameterised, `WeibullSampler`).

    k is one scalar per (document, sentence, layer) tiled over the topics
    (``scalar_k=True``, the released code) or a K_l-vector (the paper). k is
    clipped to `k_range` (the code only floors it at 2.2e-20; a small k makes
    lambda (-log u)^(1/k) overflow, reference §8.6). Initialisation as in the
    code: truncated normal (stddev 0.01) weights, head biases 0.1.

    Args:
        topic_sizes: K_l per layer, bottom first (paper: 100, 80, 50).
        hidden_units: H_l per layer; `None` uses `topic_sizes` (as the paper).
        recurrent: sentence-level recurrence (paper, eq. 9) or not (code).
        scalar_k: one shape parameter per (document, sentence, layer) (code)
            instead of one per topic (paper).
        k_range: (min, max) clip of the Weibull shape k.
        normalization: BoW scaling before the network, see `normalize_bow`
            (rGBN-RNN uses raw counts: "none").
        seed: initializer and sampling seed.

    Call args:
        bow: float [B, J, V] per-sentence context bags of words d_j.
        training: sample theta (True) or use the Weibull mean (False).
        sample: override `training` for theta only (e.g. sampled evaluation
            without dropout elsewhere).

    Returns:
        (thetas, ks, lams): three lists over layers of float [B, J, K_l]
        (k tiled over topics when scalar).

    Example:
    >>> encoder = RecurrentWeibullEncoder(topic_sizes=(6, 4))
    >>> thetas, ks, lams = encoder(keras.ops.ones((2, 3, 10)))
    >>> [tuple(t.shape) for t in thetas]
    [(2, 3, 6), (2, 3, 4)]
    """

    def __init__(self, topic_sizes=(100, 80, 50), hidden_units=None, recurrent=True,
                 scalar_k=False, k_range=(0.1, 100.0), normalization="none", seed=None, **kwargs):
        super().__init__(**kwargs)
        self.topic_sizes = tuple(int(k) for k in topic_sizes)
        if not self.topic_sizes or min(self.topic_sizes) < 1:
            raise ValueError(f"topic_sizes must be a non-empty list of positive sizes, "
                             f"got {topic_sizes}")
        units = self.topic_sizes if hidden_units is None else tuple(int(h) for h in hidden_units)
        if len(units) != len(self.topic_sizes) or min(units) < 1:
            raise ValueError(f"hidden_units must give one positive size per layer "
                             f"({len(self.topic_sizes)}), got {hidden_units}")
        k_range = tuple(float(v) for v in k_range)
        if len(k_range) != 2 or not 0.0 < k_range[0] < k_range[1]:
            raise ValueError(f"k_range must be (min, max) with 0 < min < max, got {k_range}")
        if normalization not in BOW_NORMALIZATIONS:
            raise ValueError(
                f"normalization must be one of {BOW_NORMALIZATIONS}, got {normalization!r}")
        self.hidden_units = None if hidden_units is None else units
        self.recurrent = bool(recurrent)
        self.scalar_k = bool(scalar_k)
        self.k_range = k_range
        self.normalization = normalization
        self.seed = seed
        init = lambda i: keras.initializers.TruncatedNormal(
            stddev=0.01, seed=None if seed is None else seed + i)
        head_bias = keras.initializers.Constant(0.1)
        self.hidden = []
        for l, h in enumerate(units):
            if self.recurrent:
                layer = keras.layers.SimpleRNN(
                    h, activation="sigmoid", use_bias=False, return_sequences=True,
                    kernel_initializer=init(3 * l), recurrent_initializer="identity",
                    name=f"rnn_{l}", dtype=self.dtype_policy)
            else:
                layer = keras.layers.Dense(h, activation="sigmoid", use_bias=False,
                                           kernel_initializer=init(3 * l), name=f"hidden_{l}",
                                           dtype=self.dtype_policy)
            self.hidden.append(layer)
        self.k_heads = [keras.layers.Dense(1 if self.scalar_k else k, activation="softplus",
                                           kernel_initializer=init(3 * l + 1),
                                           bias_initializer=head_bias, name=f"k_{l}",
                                           dtype=self.dtype_policy)
                        for l, k in enumerate(self.topic_sizes)]
        self.lam_heads = [keras.layers.Dense(k, activation="softplus",
                                             kernel_initializer=init(3 * l + 2),
                                             bias_initializer=head_bias, name=f"lambda_{l}",
                                             dtype=self.dtype_policy)
                          for l, k in enumerate(self.topic_sizes)]
        self.sampler = WeibullSampler(seed=seed, name="sampler", dtype=self.dtype_policy)

    @property
    def num_layers(self):
        return len(self.topic_sizes)

    def build(self, bow_shape):
        shape = tuple(bow_shape)
        for hidden, k_head, lam_head in zip(self.hidden, self.k_heads, self.lam_heads):
            hidden.build(shape)
            shape = shape[:-1] + (hidden.units,)
            k_head.build(shape)
            lam_head.build(shape)

    def call(self, bow, training=False, sample=None):
        h = normalize_bow(ops.cast(bow, self.compute_dtype), self.normalization)
        draw = training if sample is None else sample
        thetas, ks, lams = [], [], []
        for hidden, k_head, lam_head, K in zip(self.hidden, self.k_heads, self.lam_heads,
                                               self.topic_sizes):
            h = hidden(h)
            k = ops.clip(k_head(h), self.k_range[0], self.k_range[1])
            if self.scalar_k:
                k = ops.repeat(k, K, axis=-1)
            lam = ops.maximum(lam_head(h), _REAL_MIN)
            thetas.append(self.sampler(k, lam, training=draw))
            ks.append(k)
            lams.append(lam)
        return thetas, ks, lams

    def compute_output_shape(self, bow_shape):
        shapes = [tuple(bow_shape)[:-1] + (k,) for k in self.topic_sizes]
        return shapes, shapes, shapes

    def get_config(self):
        return {**super().get_config(), "topic_sizes": list(self.topic_sizes),
                "hidden_units": None if self.hidden_units is None else list(self.hidden_units),
                "recurrent": self.recurrent, "scalar_k": self.scalar_k,
                "k_range": list(self.k_range), "normalization": self.normalization,
                "seed": self.seed}
