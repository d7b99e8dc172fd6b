"""The neural topic model of TCNLM: Gaussian softmax, topic decoder, diversity regulariser.

TCNLM (Wang et al., *Topic Compositional Neural Language Model*, AISTATS 2018,
§3.1) models the bag of words d of a sentence's document context with a
Gaussian-softmax neural topic model (Miao et al. 2017):

    theta ~ N(mu(d), sigma(d)^2)  (q, from `GaussianTopicEncoder`)     (8)
    t = g(theta) = softmax(W theta + b)                                 (9)
    p(w | beta, t) = sum_k t_k beta_{k, w} = (beta^T t)_w               (6)

with topic rows beta_k on the simplex (a *probability* mixture, not a mixture
of logits), so log p(d | t) = sum_v d_v log (beta^T t)_v. The diversity
regulariser (eq. 16, after Xie et al. 2015) pushes the topic rows apart:

    a_ij = arccos(|beta_i . beta_j| / (|beta_i| |beta_j|))
    R = mean_ij a_ij - var_ij a_ij

* `TopicDecoder` -- beta and log p(w | t) (eq. 6).
* `bow_log_likelihood` -- log p(d | t) of a bag of words.
* `topic_diversity` -- R, with the diagonal masked (arccos has an infinite
  derivative at 1, so an unmasked diagonal would give NaN gradients).
* `NeuralTopicModel` -- encoder + Gaussian softmax + decoder: d -> (t, KL, log p(d|t)).
"""

import keras
import numpy as np
from keras import ops

from tfktopic.layers.topic_encoders import GaussianTopicEncoder

__all__ = ["TopicDecoder", "NeuralTopicModel", "bow_log_likelihood", "topic_diversity",
           "check_lda_scale",
           "lda_logits", "DECODER_INITS", "check_decoder_init"]

# log() floor of a mixture probability that underflowed (never hit in practice).
_TINY = 1e-30


def bow_log_likelihood(bow, log_word_probs):
    """log p(d | t) = sum_v d_v log p(v | t) per example (TCNLM eq. 6).

    Args:
        bow: float [B, D] word counts of the context.
        log_word_probs: float [B, D] log p(v | t), e.g. `TopicDecoder`'s output.

    Returns:
        float [B]; 0 for an empty context.
    """
    return ops.sum(ops.cast(bow, log_word_probs.dtype) * log_word_probs, axis=-1)


def topic_diversity(beta, include_diagonal=True, epsilon=1e-6):
    """The topic diversity regulariser R = mean angle - variance of angles (TCNLM eq. 16).

    Args:
        beta: float [K, D] topic-word weights (rows on the simplex, or any
            nonnegative rows).
        include_diagonal: True (the paper's 1/K^2 sums over all i, j) counts
            the diagonal as angle 0 exactly; False averages over the
            K (K - 1) pairs i != j only.
        epsilon: off-diagonal cosines are clipped to [0, 1 - epsilon] so that
            identical topics give a finite (zero) gradient instead of NaN.

    Returns:
        A float scalar (radians); 0 for a single topic.

    Example:
    >>> beta = keras.ops.convert_to_tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> round(float(topic_diversity(beta)), 4)   # angles 0, pi/2, pi/2, 0: pi/4 - pi^2/16
    0.1685
    """
    beta = ops.convert_to_tensor(beta)
    num_topics = beta.shape[0]
    if num_topics is not None and num_topics < 2:
        return ops.zeros((), beta.dtype)
    unit = beta / ops.maximum(ops.norm(beta, axis=-1, keepdims=True), _TINY)
    cosine = ops.clip(ops.abs(ops.matmul(unit, ops.transpose(unit))), 0.0, 1.0 - epsilon)
    off_diagonal = 1.0 - ops.eye(ops.shape(beta)[0], dtype=beta.dtype)
    # Multiplying by the mask makes the diagonal exactly 0 with a 0 gradient.
    angles = ops.arccos(cosine) * off_diagonal
    k = ops.cast(ops.shape(beta)[0], beta.dtype)
    if include_diagonal:
        count = k * k
        mean = ops.sum(angles) / count
        variance = ops.sum(ops.square(angles - mean)) / count
    else:
        count = k * (k - 1.0)
        mean = ops.sum(angles) / count
        variance = ops.sum(ops.square(angles - mean) * off_diagonal) / count
    return mean - variance


#: Starts of a model's topic-word weights (``decoder_init``): random, or an LDA's topics.
DECODER_INITS = ("random", "lda")


def check_lda_scale(lda_scale):
    """TopicRNN's ``lda_scale`` (the LDA start of B is ``lda_scale`` x the centred log beta).

    Args:
        lda_scale: a finite number > 0.

    Returns:
        it as a float.

    Raises:
        ValueError: anything else (named).
    """
    if isinstance(lda_scale, bool) or not (isinstance(lda_scale, (int, float))
                                           and np.isfinite(lda_scale) and lda_scale > 0):
        raise ValueError(f"lda_scale must be a number > 0, got {lda_scale!r}")
    return float(lda_scale)


def check_decoder_init(decoder_init, topic_word_init):
    """``decoder_init`` of TCNLM, TopicRNN and rGBN-RNN, checked against ``topic_word_init``.

    Args:
        decoder_init: one of `DECODER_INITS`.
        topic_word_init: the LDA's [num_topics, topic_vocab_size] topic-word
            matrix with "lda" (`tfktopic.runs.build_model` fits it on the
            training split), else `None`.

    Returns:
        `decoder_init`.

    Raises:
        ValueError: an unknown start, "lda" without a matrix or a matrix
            without "lda" (named).
    """
    if decoder_init not in DECODER_INITS:
        raise ValueError(f"decoder_init must be one of {DECODER_INITS}, got {decoder_init!r}")
    if (decoder_init == "lda") != (topic_word_init is not None):
        raise ValueError("decoder_init='lda' needs topic_word_init (an LDA's [num_topics, "
                         "topic_vocab_size] topic-word matrix; tfktopic.runs.build_model fits "
                         "it on the training split), and topic_word_init needs "
                         "decoder_init='lda'")
    return decoder_init


def lda_logits(topic_word, num_topics, vocab_size, floor=1e-10):
    """Topic-word logits phi = log beta of a given topic-word matrix (``decoder_init="lda"``).

    The start of TCNLM's decoder logits (softmax(phi_k) = beta_k) and of
    TopicRNN's topic bias B from an LDA.

    Args:
        topic_word: [num_topics, vocab_size] nonnegative rows (e.g. gensim's
            ``LdaModel.get_topics()``); each row is normalised to sum to 1.
        num_topics, vocab_size: the expected shape.
        floor: probabilities are floored here before the log.

    Returns:
        float32 numpy [num_topics, vocab_size], each row centred: softmax(phi_k)
        = beta_k (up to the floor).
    """
    beta = np.asarray(topic_word, np.float64)
    if beta.shape != (num_topics, vocab_size) or not np.all(np.isfinite(beta)) or \
            np.any(beta < 0) or np.any(beta.sum(axis=1) <= 0):
        raise ValueError(f"topic_word_init must be a nonnegative [num_topics, topic_vocab_size]"
                         f" = {(num_topics, vocab_size)} matrix with nonzero rows, got shape "
                         f"{beta.shape}")
    logits = np.log(np.maximum(beta / beta.sum(axis=1, keepdims=True), floor))
    return (logits - logits.mean(axis=1, keepdims=True)).astype(np.float32)


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicDecoder(keras.layers.Layer):
    """Topic-word distributions beta and the mixture log p(w | t) (TCNLM eq. 6).

    beta_k = softmax(phi_k) over the topic vocabulary for a free K x D matrix
    phi ("option A" of the reference notes: every row is on the simplex, so
    eq. (6) is exact). The mixture log (beta^T t)_v is computed stably as
    m_v + log sum_k t_k exp(log beta_kv - m_v) with m_v = max_k log beta_kv.

    Args:
        num_topics: K.
        vocab_size: D, the topic-vocabulary size.
        initializer: initializer of phi (the beta logits).

    Call args:
        topic_proportions: float [B, K], rows on the simplex.

    Returns:
        float [B, D] log p(w | t).

    Example:
    >>> decoder = TopicDecoder(num_topics=3, vocab_size=10)
    >>> log_probs = decoder(keras.ops.full((2, 3), 1 / 3))
    >>> tuple(log_probs.shape), tuple(decoder.beta().shape)
    ((2, 10), (3, 10))
    """

    def __init__(self, num_topics, vocab_size, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_topics", num_topics), ("vocab_size", vocab_size)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.num_topics = int(num_topics)
        self.vocab_size = int(vocab_size)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape=None):
        self.logits = self.add_weight(name="topic_word_logits",
                                      shape=(self.num_topics, self.vocab_size),
                                      initializer=self.initializer)

    def log_beta(self):
        """log beta, float [K, D] (each row a log-distribution)."""
        return ops.log_softmax(self.logits, axis=-1)

    def beta(self):
        """beta, float [K, D]: topic-word distributions (rows sum to 1)."""
        return ops.softmax(self.logits, axis=-1)

    def call(self, topic_proportions):
        log_beta = self.log_beta()
        shift = ops.stop_gradient(ops.max(log_beta, axis=0))                # [D]
        mixture = ops.matmul(ops.cast(topic_proportions, log_beta.dtype),
                             ops.exp(log_beta - shift))                      # [B, D]
        return shift + ops.log(ops.maximum(mixture, _TINY))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (self.vocab_size,)

    def get_config(self):
        return {**super().get_config(), "num_topics": self.num_topics,
                "vocab_size": self.vocab_size,
                "initializer": keras.initializers.serialize(self.initializer)}


@keras.saving.register_keras_serializable(package="tfktopic")
class NeuralTopicModel(keras.layers.Layer):
    """TCNLM's neural topic model: q(theta | d), t = softmax(W theta + b), beta.

    Args:
        num_topics: K (also the size of theta, with prior N(0, I)).
        vocab_size: D, the topic-vocabulary size (width of the bag of words).
        hidden_units: ReLU layers of the inference network ((256, 256) in TCNLM).
        normalization: scaling of the bag of words before the encoder (see
            `tfktopic.layers.topic_encoders.normalize_bow`); the likelihood
            always uses the raw counts.
        dropout: dropout on the encoder's last hidden layer.
        seed: seed of the reparameterisation noise.

    Call args:
        bow: float [B, D] context counts.
        training: sample theta (True) or use the posterior mean (False).
        sample: override of the sampling choice.

    Returns:
        (t, kl, log_likelihood): t float [B, K] topic proportions; kl float
        [B] KL(q(theta|d) || N(0, I)); log_likelihood float [B] log p(d | t).

    Example:
    >>> ntm = NeuralTopicModel(num_topics=4, vocab_size=20, hidden_units=(8,))
    >>> t, kl, log_lik = ntm(keras.ops.ones((2, 20)))
    >>> tuple(t.shape), tuple(kl.shape), tuple(log_lik.shape)
    ((2, 4), (2,), (2,))
    """

    def __init__(self, num_topics, vocab_size, hidden_units=(256, 256), normalization="total",
                 dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.encoder = GaussianTopicEncoder(num_topics, hidden_units=hidden_units,
                                            normalization=normalization, dropout=dropout,
                                            seed=seed, name="encoder", dtype=self.dtype_policy)
        self.gaussian_softmax = keras.layers.Dense(num_topics, name="gaussian_softmax",
                                                   dtype=self.dtype_policy)
        self.decoder = TopicDecoder(num_topics, vocab_size, name="decoder",
                                    dtype=self.dtype_policy)
        self.num_topics = self.encoder.num_topics
        self.vocab_size = self.decoder.vocab_size

    def build(self, bow_shape):
        self.encoder.build(bow_shape)
        self.gaussian_softmax.build(tuple(bow_shape)[:-1] + (self.num_topics,))
        self.decoder.build()

    def topic_proportions(self, theta):
        """t = softmax(W theta + b), float [B, K] (eq. 9)."""
        return ops.softmax(self.gaussian_softmax(theta), axis=-1)

    def prior_topic_proportions(self, num_samples, seed=None):
        """t = softmax(W theta + b) for theta drawn from the prior N(0, I)."""
        theta = keras.random.normal((num_samples, self.num_topics), seed=seed)
        return self.topic_proportions(theta)

    def call(self, bow, training=False, sample=None):
        bow = ops.cast(bow, self.compute_dtype)
        theta, mean, log_std = self.encoder(bow, training=training, sample=sample)
        t = self.topic_proportions(theta)
        kl = self.encoder.kl(mean, log_std)
        return t, kl, bow_log_likelihood(bow, self.decoder(t))

    def compute_output_shape(self, bow_shape):
        batch = tuple(bow_shape)[:-1]
        return batch + (self.num_topics,), batch, batch

    def get_config(self):
        encoder = self.encoder
        return {**super().get_config(), "num_topics": self.num_topics,
                "vocab_size": self.vocab_size, "hidden_units": list(encoder.hidden_units),
                "normalization": encoder.normalization, "dropout": encoder.dropout,
                "seed": encoder.seed}
