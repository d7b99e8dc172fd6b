"""TopicRNN's output layer: a topic bias switched off by a stop-word indicator.

Dieng, Wang, Gao & Paisley, *TopicRNN* (ICLR 2017), §3: with h_t the RNN
state and theta the document's topic vector,

    l_t ~ Bernoulli(sigmoid(Gamma^T h_t))                      (stop-word indicator)
    p(y_t = i | h_t, theta, l_t) ∝ exp(v_i^T h_t + (1 - l_t) b_i^T theta)

so the logits are ``V h_t + (1 - l_t) B^T theta``. B is restricted to the
content (topic-vocabulary) words: a K x V_c weight whose columns are scattered
into the LM vocabulary, with zeros on stop-word columns (reference
sgmcmc_and_topicrnn.md §B5 "Keras wiring").

Two output distributions (reference §B5 "Two variants"):

* ``"paper"`` (default) -- both branches are softmaxes over the full
  vocabulary. Training with the observed l_t maximises log p(y_t, l_t), a bound
  below the marginal log-likelihood; evaluation must marginalise l_t.
* ``"disjoint"`` -- the support is split as in Zheng, Vafa & Blei (TMLR 2023):
  p(y | l = 1) is a softmax of V h over stop words only and p(y | l = 0) a
  softmax of V h + B^T theta over content words only, so l_t is a function of
  y_t and log p(y_t, l_t) equals the marginal log-likelihood.

The marginal over the unknown l_t (§3 "we marginalise", reference §B6) is
computed in log space for both variants:

    log p(y_t = i) = logaddexp(log sigmoid(s_t) + log softmax_1(V h_t)_i,
                               log sigmoid(-s_t) + log softmax_0(V h_t + B^T theta)_i)

with s_t = Gamma^T h_t (for ``"disjoint"`` each softmax is restricted to its
support, the other entries being masked out).
"""

import keras
import numpy as np
from keras import ops

from tfktopic.layers.initialization import check_initialization, softmax_initializers

__all__ = ["StopwordGate", "VARIANTS", "check_lm_to_topic"]

VARIANTS = ("paper", "disjoint")
# Finite "minus infinity" of the disjoint supports: exp() underflows to 0 while
# gradients and logaddexp stay NaN-free.
_MASKED = -1e9


def check_lm_to_topic(lm_to_topic, vocab_size=None):
    """Validate an LM-id -> topic-id map and return it as an int32 array.

    Args:
        lm_to_topic: sequence of ints (`TopicVocabulary.lm_to_topic`): the
            topic id of each LM id, or -1 for stop words and special tokens.
        vocab_size: the expected length (the LM vocabulary size), or `None`.

    Returns:
        An int32 numpy array.

    Raises:
        ValueError: naming ``lm_to_topic`` when the length is wrong, the
            non-negative entries are not each topic id 0..V_c-1 exactly once,
            or there is no content word.
    """
    array = np.asarray(lm_to_topic)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"lm_to_topic must be a 1-D sequence of ints, got shape {array.shape} "
                         f"and dtype {array.dtype}")
    if vocab_size is not None and len(array) != int(vocab_size):
        raise ValueError(f"lm_to_topic must have vocab_size={vocab_size} entries, got {len(array)}")
    content = np.sort(array[array >= 0])
    if len(content) == 0:
        raise ValueError("lm_to_topic maps no LM id to a topic id: there is no content word")
    if np.any(array < -1) or not np.array_equal(content, np.arange(len(content))):
        raise ValueError("lm_to_topic must map LM ids to -1 or to each topic id 0..V_c-1 exactly "
                         "once (use TopicVocabulary.lm_to_topic)")
    return array.astype(np.int32)


@keras.saving.register_keras_serializable(package="tfktopic")
class StopwordGate(keras.layers.Layer):
    """Vocabulary logits with a topic bias gated by the stop-word indicator.

    Args:
        vocab_size: C, the LM vocabulary size.
        lm_to_topic: int sequence of length C: topic id of each LM id, -1 for
            stop words (and special tokens); a token is a stop word for l_t
            exactly when its entry is -1.
        num_topics: K, the size of theta.
        variant: "paper" (full-vocabulary softmaxes; default) or "disjoint"
            (stop-word / content-word supports, see the module docstring).
        topic_initializer: initializer of B (K x V_c).
        initialization: of the vocabulary softmax V: "keras" (Dense's defaults)
            or "torch" (Zheng et al.'s U(±0.1), bias U(±1/sqrt(H));
            `tfktopic.layers.initialization`).

    Call args:
        hidden: float [..., T, H] RNN states h_t.
        theta: float [..., K] topic vector, one per sequence (broadcast over T).
        stop_indicator: float [..., T] observed l_t (1 = stop word), or `None`.
        marginal: also return the marginal log-probabilities; defaults to
            ``stop_indicator is None``.
        bias: instead of `theta`, its `topic_bias` already broadcast to every
            position, float [..., T, C] (e.g. gathered to the predicted
            positions of a batch: `hidden` [N, H] with `bias` [N, C]).

    Returns:
        A dict with ``stop_logits`` [..., T] (s_t = Gamma^T h_t + bias),
        ``logits`` [..., T, C] (V h_t + (1 - l_t) B^T theta, masked to the
        support of l_t for "disjoint"; only when `stop_indicator` is given) and
        ``log_probs`` [..., T, C] (the normalised marginal over l_t; when
        `marginal`).

    Example:
    >>> gate = StopwordGate(vocab_size=6, lm_to_topic=[-1, -1, 0, -1, 1, 2], num_topics=2)
    >>> out = gate(keras.ops.ones((1, 3, 4)), keras.ops.ones((1, 2)))
    >>> tuple(out["log_probs"].shape), tuple(out["stop_logits"].shape)
    ((1, 3, 6), (1, 3))
    """

    def __init__(self, vocab_size, lm_to_topic, num_topics, variant="paper",
                 topic_initializer="glorot_uniform", initialization="keras", **kwargs):
        super().__init__(**kwargs)
        self.initialization = check_initialization(initialization)
        if int(vocab_size) < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        if int(num_topics) < 1:
            raise ValueError(f"num_topics must be >= 1, got {num_topics}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.vocab_size = int(vocab_size)
        self.lm_to_topic = check_lm_to_topic(lm_to_topic, self.vocab_size)
        self.num_topics = int(num_topics)
        self.variant = variant
        self.topic_initializer = keras.initializers.get(topic_initializer)
        self.num_content = int((self.lm_to_topic >= 0).sum())
        if variant == "disjoint" and self.num_content == self.vocab_size:
            raise ValueError("variant='disjoint' needs at least one stop word in lm_to_topic")
        # Column c of the scattered bias reads column content_index[c] of
        # [B^T theta, 0]: its topic id, or the trailing zero for stop words.
        self._content_index = np.where(self.lm_to_topic >= 0, self.lm_to_topic,
                                       self.num_content).astype(np.int32)
        self._is_stop = (self.lm_to_topic < 0).astype(np.float32)
        # V; made here, before B's and Gamma's initializers draw their seeds (the order fixes
        # every seeded model's initial weights); a "torch" bias range needs H (`build`).
        self.projection = keras.layers.Dense(self.vocab_size, name="vocab_projection",
                                             dtype=self.dtype_policy)
        self.stop_projection = keras.layers.Dense(1, name="stop_projection",
                                                  dtype=self.dtype_policy)  # Gamma

    def build(self, hidden_shape, theta_shape=None, stop_indicator_shape=None, bias_shape=None):
        for name, initializer in softmax_initializers(self.initialization,
                                                      int(hidden_shape[-1])).items():
            setattr(self.projection, name, initializer)       # "torch": U(±0.1), U(±1/sqrt(H))
        self.projection.build(hidden_shape)
        self.stop_projection.build(hidden_shape)
        self.topic_word = self.add_weight(
            shape=(self.num_topics, self.num_content), initializer=self.topic_initializer,
            name="topic_word")  # B restricted to content words

    def stop_indicator(self, targets):
        """l_t of target ids: float [...] with 1 where the target is a stop word."""
        return ops.take(ops.convert_to_tensor(self._is_stop), ops.cast(targets, "int32"))

    def topic_bias(self, theta):
        """B^T theta scattered into the LM vocabulary: float [..., C], 0 on stop words."""
        theta = ops.cast(theta, self.compute_dtype)
        content = ops.matmul(theta, ops.cast(self.topic_word, self.compute_dtype))
        padded = ops.concatenate([content, ops.zeros_like(content[..., :1])], axis=-1)
        return ops.take(padded, ops.convert_to_tensor(self._content_index), axis=-1)

    def _support(self, stop):
        """Additive mask of the disjoint support of branch l (float [..., C] or [C])."""
        is_stop = ops.convert_to_tensor(self._is_stop)
        same = ops.equal(is_stop, ops.cast(stop, is_stop.dtype))
        return ops.where(same, 0.0, _MASKED)

    def call(self, hidden, theta=None, stop_indicator=None, marginal=None, bias=None):
        if marginal is None:
            marginal = stop_indicator is None
        if (theta is None) == (bias is None):
            raise ValueError("StopwordGate takes one of theta (the topic vector [..., K]) and "
                             "bias (its topic_bias at every position [..., T, C])")
        vh = ops.cast(self.projection(hidden), "float32")
        stop_logits = ops.cast(ops.squeeze(self.stop_projection(hidden), -1), "float32")
        if bias is None:
            bias = ops.expand_dims(self.topic_bias(theta), -2)
        bias = ops.cast(bias, "float32")
        outputs = {"stop_logits": stop_logits}
        if stop_indicator is not None:
            gate = ops.expand_dims(1.0 - ops.cast(stop_indicator, "float32"), -1)
            logits = vh + gate * bias
            if self.variant == "disjoint":
                logits = logits + self._support(1.0 - gate)
            outputs["logits"] = logits
        if marginal:
            stop_branch, content_branch = vh, vh + bias
            if self.variant == "disjoint":
                stop_branch = stop_branch + self._support(1.0)
                content_branch = content_branch + self._support(0.0)
            s = ops.expand_dims(stop_logits, -1)
            outputs["log_probs"] = ops.logaddexp(
                ops.log_sigmoid(s) + ops.log_softmax(stop_branch, axis=-1),
                ops.log_sigmoid(-s) + ops.log_softmax(content_branch, axis=-1))
        return outputs

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "lm_to_topic": self.lm_to_topic.tolist(), "num_topics": self.num_topics,
                "variant": self.variant,
                "topic_initializer": keras.initializers.serialize(self.topic_initializer),
                "initialization": self.initialization}
