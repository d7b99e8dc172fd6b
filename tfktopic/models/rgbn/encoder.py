"""rGBN-RNN's recurrent Weibull inference network q(theta^l_j | d_{1:j}) (Guo et al. 2020, eq. 9).

`RecurrentWeibullEncoder`: per layer a sentence-level RNN over the J sentence
contexts of a document chunk, softplus Weibull shape and scale heads, and a
reparameterised Weibull draw (`tfktopic.models.rgbn.weibull.WeibullSampler`);
the equations are in its docstring. The bag-of-words scaling `normalize_bow` is
shared with the Gaussian encoders (`tfktopic.layers.topic_encoders`). The
registered Keras name ``tfktopic>RecurrentWeibullEncoder`` is unchanged by the
move from ``tfktopic.layers.topic_encoders``.
"""

import keras
from keras import ops

from tfktopic.distributions import LOG_FLOOR
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS, normalize_bow
from tfktopic.models.rgbn.weibull import WeibullSampler

__all__ = ["RecurrentWeibullEncoder"]


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
            lam = ops.maximum(lam_head(h), LOG_FLOOR)  # the code's real_min
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
