"""Perplexity: the masked token negative log-likelihood, written once.

PPL = exp( sum over predicted tokens of -log p(y_t | ...) / #predicted tokens )
with ``<eos>`` and ``<unk>`` counted as predicted tokens and padding masked
out (reference tcnlm_and_evaluation.md §2.6; DESIGN.md §5). Which context the
model saw (leak-free "preceding" or the papers' "all_other") is the protocol
that every reported number must carry.

The training and evaluation objectives apply the output softmax at the
predicted positions only (`gather_real_positions`, `gathered_token_nll`):
padding adds exactly 0 to the masked sums, so skipping it is the same
objective at a fraction of the softmax's cost.
"""

import collections
import dataclasses
import math
import weakref

import keras
import numpy as np
from keras import ops

from tfktopic import backend
from tfktopic.evaluation.cross_entropy import row_bucket, target_log_softmax
from tfktopic.xla import HALF_PRECISION, xla_loops

__all__ = ["log_probabilities", "masked_token_log_probs", "masked_token_nll", "RealPositions",
           "gather_real_positions", "gathered_token_nll", "Perplexity", "PerplexityResult",
           "evaluate_perplexity", "unigram_perplexity"]


def log_probabilities(predictions, from_logits=True):
    """Normalised next-token log-probabilities of a model's output.

    Args:
        predictions: float [..., V] logits (`from_logits=True`) or
            log-probabilities (`from_logits=False`).
        from_logits: whether `predictions` are unnormalised logits. The
            log-softmax leaves already normalised log-probabilities unchanged
            (up to rounding), so `True` is safe for every model.

    Returns:
        float32 [..., V] log-probabilities.

    Example:
    >>> log_p = log_probabilities([[0.0, 0.0]])
    >>> [round(float(v), 4) for v in log_p[0]]
    [-0.6931, -0.6931]
    """
    predictions = ops.cast(predictions, "float32")
    return ops.log_softmax(predictions, axis=-1) if from_logits else predictions


def masked_token_log_probs(targets, predictions, mask=None, from_logits=True, bias=None):
    """log p(target) of every token, weighted by the mask (0 on padding).

    Args:
        targets: int [..., T] target ids.
        predictions: float [..., T, V] logits or log-probabilities.
        mask: float [..., T], 1 on predicted tokens; `None` keeps all.
        from_logits: whether `predictions` are unnormalised logits.
        bias: optional float [V] added to the logits (in float32, inside the
            cross-entropy; `from_logits` only).

    Returns:
        float32 [..., T]: mask * log p(y_t), exactly 0 where the mask is 0.

    Example:
    >>> token_log_p = masked_token_log_probs([[1, 0]], [[[0.0, 0.0], [0.0, 0.0]]], [[1.0, 0.0]])
    >>> [round(float(v), 4) for v in token_log_p[0]]
    [-0.6931, 0.0]
    """
    targets = ops.cast(targets, "int32")
    if from_logits:
        # A fused softmax cross-entropy (XLA-compiled, or TensorFlow's kernel), instead of a
        # log-softmax, a gather and their gradients (the largest cost of a training step).
        token_log_prob = target_log_softmax(targets, predictions, bias=bias)
    else:
        if bias is not None:
            raise ValueError("bias is added to logits: it needs from_logits=True")
        token_log_prob = ops.squeeze(ops.take_along_axis(
            ops.cast(predictions, "float32"), ops.expand_dims(targets, -1), axis=-1), -1)
    if mask is None:
        return token_log_prob
    mask = ops.cast(mask, "float32")
    # Select rather than multiply: a padded position may hold log p = -inf.
    token_log_prob = ops.where(mask > 0, token_log_prob, ops.zeros_like(token_log_prob))
    return token_log_prob * mask


def masked_token_nll(targets, predictions, mask=None, from_logits=True, bias=None):
    """Sum of token negative log-likelihoods under a mask, and the token count.

    Args:
        targets: int [..., T] target ids.
        predictions: float [..., T, V] logits (`from_logits=True`) or
            log-probabilities (`from_logits=False`, e.g. a mixture's output).
        mask: float [..., T], 1 on predicted tokens; `None` counts all.
        from_logits: whether `predictions` are unnormalised logits.
        bias: optional float [V] added to the logits inside the cross-entropy.

    Returns:
        (nll_sum, num_tokens): float32 scalars.
    """
    token_log_prob = masked_token_log_probs(targets, predictions, mask, from_logits, bias)
    if mask is None:
        return -ops.sum(token_log_prob), ops.cast(ops.size(token_log_prob), "float32")
    return -ops.sum(token_log_prob), ops.sum(ops.cast(mask, "float32"))


#: The predicted positions of a padded batch (`gather_real_positions`).
RealPositions = collections.namedtuple(
    "RealPositions", ["index", "targets", "mask", "per_position", "per_row"])


def gather_real_positions(mask, targets, per_position=(), per_row=(), bucket=1):
    """The predicted (mask > 0) positions of a padded batch, gathered to a flat [N] axis.

    A training or evaluation objective that gathers the real positions before
    the output softmax skips its cost on padding (about 37 % of the positions
    of APNEWS sentence windows): the softmax, its cross-entropy and their
    gradients then run on [N, ...] instead of [..., T, ...]. Padded positions
    contribute exactly 0 to `masked_token_nll`, so the sums over the gathered
    positions are the same objective (up to float rounding).

    Args:
        mask: float [..., T], > 0 on predicted tokens (its values are kept as
            the gathered weights).
        targets: int [..., T] target ids.
        per_position: tensors [..., T, ...] with the mask's leading shape (the
            softmax input, e.g. hidden states [..., T, H]).
        per_row: tensors [..., ...] with the mask's leading shape without T,
            one entry per window (e.g. a topic vector [..., K]); each gathered
            position gets its window's entry.
        bucket: pad N up to a multiple of this with rows of zeros (index 0, target 0,
            mask 0), so that an XLA-compiled softmax sees a few row counts, not one per
            batch (`tfktopic.evaluation.cross_entropy.row_bucket`). Padded rows add
            exactly 0 to every masked sum.

    Returns:
        A `RealPositions` of ``index`` (int64 [N, rank(mask)], the positions in
        row-major order), ``targets`` [N], ``mask`` float32 [N], and the
        tuples ``per_position`` ([N, ...] each) and ``per_row`` ([N, ...] each).
        N may be 0 (a batch of padding only).

    Example:
    >>> real = gather_real_positions([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]],
    ...                              [[5, 6, 0], [0, 0, 0], [7, 0, 0]],
    ...                              per_row=([[10.0], [20.0], [30.0]],))
    >>> real.index.numpy().tolist(), real.targets.numpy().tolist()
    ([[0, 0], [0, 1], [2, 0]], [5, 6, 7])
    >>> real.per_row[0].numpy().ravel().tolist()
    [10.0, 10.0, 30.0]
    """
    mask = ops.cast(mask, "float32")
    if not backend.is_tensorflow():
        return _all_positions(mask, targets, per_position, per_row)
    import tensorflow as tf

    index = tf.where(mask > 0)
    rows = index[:, :-1]
    real = RealPositions(index, tf.gather_nd(targets, index), tf.gather_nd(mask, index),
                         tuple(tf.gather_nd(value, index) for value in per_position),
                         tuple(tf.gather_nd(value, rows) for value in per_row))
    if bucket <= 1:
        return real
    extra = -tf.shape(index)[0] % bucket

    def pad(value):
        return tf.pad(value, [[0, extra]] + [[0, 0]] * (len(value.shape) - 1))

    return RealPositions(pad(real.index), pad(real.targets), pad(real.mask),
                         tuple(pad(value) for value in real.per_position),
                         tuple(pad(value) for value in real.per_row))


def _all_positions(mask, targets, per_position, per_row):
    """`gather_real_positions` with static shapes (JAX's compiled steps need them): every
    position, row-major, padding kept with its mask weight 0 (it adds exactly 0 to every
    masked sum, so the objective is the same; only the softmax's saving on padding is lost)."""
    shape = tuple(mask.shape)
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(shape))), shape), axis=-1).astype(np.int32)

    def flat(value, axes):
        """`value` with its first `axes` axes (the mask's) flattened into one."""
        value = ops.convert_to_tensor(value)
        return ops.reshape(value, (-1,) + tuple(value.shape[axes:]))

    return RealPositions(ops.convert_to_tensor(grid), flat(targets, len(shape)),
                         flat(mask, len(shape)),
                         tuple(flat(value, len(shape)) for value in per_position),
                         tuple(ops.repeat(flat(value, len(shape) - 1), shape[-1], axis=0)
                               for value in per_row))


def gathered_token_nll(head, features, targets, mask):
    """`masked_token_nll` of ``head(features)``, the head applied at the predicted positions only.

    Args:
        head: the output layer, features [N, ...] -> logits [N, V] (e.g. a
            `keras.layers.Dense` softmax layer).
        features: the head's input at every position, [..., T, H].
        targets: int [..., T] target ids.
        mask: float [..., T], 1 on predicted tokens.

    Returns:
        (nll_sum, num_tokens): float32 scalars, equal to
        ``masked_token_nll(targets, head(features), mask)`` up to float rounding
        (`gather_real_positions`).

    A plain `keras.layers.Dense` head (linear, with a bias) under a 16-bit compute dtype
    hands its bias to the XLA cross-entropy instead of adding it itself
    (`tfktopic.evaluation.cross_entropy`: 10 % off a bfloat16 LSTM LM step on an AMX CPU);
    the sums are the same up to rounding, with the bias added in float32.

    Example:
    >>> head = lambda x: keras.ops.concatenate([x, -x], axis=-1)
    >>> nll, num = gathered_token_nll(head, [[[1.0], [2.0]]], [[0, 1]], [[1.0, 0.0]])
    >>> round(float(nll), 4), float(num)
    (0.1269, 1.0)
    """
    real = gather_real_positions(mask, targets, per_position=(features,), bucket=row_bucket())
    features = real.per_position[0]
    if not _bias_joins_cross_entropy(head, features):
        return masked_token_nll(real.targets, head(features), real.mask)
    if not head.built:
        head.build(features.shape)
    products = ops.matmul(features, ops.cast(head.kernel, features.dtype))
    return masked_token_nll(real.targets, products, real.mask, bias=head.bias)


def _bias_joins_cross_entropy(head, features):
    """Whether `gathered_token_nll` adds `head`'s bias inside the XLA cross-entropy: a plain
    linear Dense with a bias (no LoRA, no quantization, no activity regularizer), 16-bit
    features, XLA on."""
    return (type(head) is keras.layers.Dense and head.use_bias
            and head.activation is keras.activations.linear
            and not head.lora_enabled and head.quantization_mode is None
            and head.activity_regularizer is None
            and features.dtype.name in HALF_PRECISION and xla_loops())


@keras.saving.register_keras_serializable(package="tfktopic")
class Perplexity(keras.metrics.Metric):
    """Streaming perplexity over masked tokens, usable in `compile`/`fit`.

    Pass the mask as `sample_weight`. Sums (not means) are accumulated, so the
    result is exact over batches of different sizes and across replicas.

    Args:
        from_logits: whether predictions are logits or log-probabilities.
        name: metric name.

    ``_direction = "down"``: lower is better (Keras' monitor callbacks read it).

    Example:
    >>> metric = Perplexity()
    >>> metric.update_state([[1]], [[[0.0, 0.0]]])
    >>> round(float(metric.result()), 4)
    2.0
    """

    def __init__(self, from_logits=True, name="ppl", **kwargs):
        super().__init__(name=name, **kwargs)
        self._direction = "down"
        self.from_logits = from_logits
        self.nll_sum = self.add_variable(shape=(), initializer="zeros", name="nll_sum")
        self.num_tokens = self.add_variable(shape=(), initializer="zeros", name="num_tokens")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.update_from_sums(*masked_token_nll(y_true, y_pred, sample_weight, self.from_logits))

    def update_from_sums(self, nll_sum, num_tokens):
        """Add a batch's summed NLL and token count (for custom `train_step`s)."""
        self.nll_sum.assign_add(ops.cast(nll_sum, self.nll_sum.dtype))
        self.num_tokens.assign_add(ops.cast(num_tokens, self.num_tokens.dtype))

    def nll(self):
        """Mean negative log-likelihood per predicted token (nats)."""
        return ops.divide_no_nan(self.nll_sum, self.num_tokens)

    def result(self):
        return ops.exp(self.nll())

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits}


@dataclasses.dataclass
class PerplexityResult:
    """Perplexity of a model on a dataset, with the protocol it was measured under.

    Attributes:
        nll_sum: total negative log-likelihood (nats).
        num_tokens: number of predicted tokens.
        protocol: context protocol ("preceding", "all_other", "stream", ...).
        document_nll: `None`, or float64 [D] the NLL sum of each document
            (`evaluate_perplexity` with document ids; the unit of the
            paired bootstrap, `tfktopic.evaluation.comparison`).
        document_tokens: `None`, or int64 [D] the predicted tokens of each document.
    """

    nll_sum: float
    num_tokens: int
    protocol: str = ""
    document_nll: np.ndarray = None
    document_tokens: np.ndarray = None

    @property
    def nll(self):
        """Mean NLL per predicted token."""
        return self.nll_sum / self.num_tokens if self.num_tokens else float("nan")

    @property
    def perplexity(self):
        return math.exp(self.nll) if self.num_tokens else float("nan")

    def as_dict(self):
        return {"perplexity": self.perplexity, "nll": self.nll,
                "num_tokens": self.num_tokens, "protocol": self.protocol}


#: One traced scoring function per (model, from_logits), reused across calls, so that
#: evaluating a model every epoch or on several splits does not trace again.
_SCORERS = weakref.WeakKeyDictionary()


def _row_sums_function(predict, from_logits):
    """A compiled batch -> (nll [B], num_tokens [B]) per row (cached per model): a
    `tf.function` under TensorFlow, eager elsewhere (a `jax.jit` of a Keras model
    would bake its weights of the first call into the program)."""
    cache = _SCORERS.setdefault(predict, {}) if isinstance(predict, keras.Model) else {}
    if from_logits not in cache:
        if isinstance(predict, keras.Model):
            model = weakref.ref(predict)  # the cache must not keep the model alive
            call = lambda batch: model()(batch, training=False)
        else:
            call = predict

        def row_sums(batch):
            log_p = masked_token_log_probs(batch["targets"], call(batch), batch.get("mask"),
                                           from_logits)
            mask = batch.get("mask")
            mask = ops.ones_like(log_p) if mask is None else ops.cast(mask, "float32")
            rows = ops.shape(log_p)[0]
            return (-ops.sum(ops.reshape(log_p, (rows, -1)), axis=1),
                    ops.sum(ops.reshape(mask, (rows, -1)), axis=1))

        cache[from_logits] = _compiled(row_sums)
    return cache[from_logits]


def _compiled(function):
    """`function` compiled by the running backend (TensorFlow: `tf.function`)."""
    if backend.is_tensorflow():
        import tensorflow as tf

        return tf.function(function, reduce_retracing=True)
    return function


def evaluate_perplexity(predict, dataset, from_logits=True, protocol="", documents=None):
    """Perplexity of `predict` over every batch of `dataset`, optionally per document.

    Args:
        predict: a callable taking a batch dict and returning logits or
            log-probabilities [..., T, V] (a Keras model is called with
            ``training=False``).
        dataset: an iterable of batch dicts with ``targets`` and ``mask``.
        from_logits: whether `predict` returns logits.
        protocol: the context protocol, recorded in the result.
        documents: per-document sums too: the number D of documents, with
            each batch row's document id either in the batch (``document``
            int [B], -1 for an idle row: streamed batches) or given here as
            a pair ``(D, row_documents)``, the document of every row of the
            dataset in order (`SentenceExamples.document_index`).

    Returns:
        A `PerplexityResult` (sums accumulated in float64 on the host; with
        `documents`, its ``document_nll`` and ``document_tokens``).

    Example:
    >>> result = evaluate_perplexity(model, dataset, documents=(len(part), examples.document_index))  # doctest: +SKIP
    >>> result.document_nll.sum() / result.document_tokens.sum() == result.nll           # doctest: +SKIP
    """
    row_sums = _row_sums_function(predict, from_logits)
    total, count = 0.0, 0.0
    num_documents, row_documents = (documents if isinstance(documents, tuple)
                                    else (documents, None))
    if num_documents is not None:
        doc_nll = np.zeros(int(num_documents), np.float64)
        doc_tokens = np.zeros(int(num_documents), np.float64)
    offset = 0
    for batch in dataset:
        nll, num = (np.asarray(v, np.float64) for v in row_sums(batch))
        total += float(nll.sum())
        count += float(num.sum())
        if num_documents is None:
            continue
        if row_documents is not None:
            ids = np.asarray(row_documents[offset:offset + len(nll)], np.int64)
            if len(ids) != len(nll):
                raise ValueError(f"documents: {len(row_documents)} row ids for more rows")
        elif "document" in batch:
            ids = np.asarray(batch["document"], np.int64)
        else:
            raise ValueError("documents: the batches have no 'document' ids; pass "
                             "(D, row_documents)")
        offset += len(nll)
        real = ids >= 0
        np.add.at(doc_nll, ids[real], nll[real])
        np.add.at(doc_tokens, ids[real], num[real])
    if row_documents is not None and offset != len(row_documents):
        raise ValueError(f"documents: {len(row_documents)} row ids but the dataset has "
                         f"{offset} rows")
    result = PerplexityResult(total, int(round(count)), protocol)
    if num_documents is not None:
        result.document_nll = doc_nll
        result.document_tokens = np.rint(doc_tokens).astype(np.int64)
    return result


def unigram_perplexity(lm_vocab, examples):
    """Perplexity of the training text's unigram model (add-1/2) on `examples`.

    The simple baseline every language model must beat. The unigram counts are
    the LM vocabulary's training counts (``<eos>`` once per sentence, ``<unk>``
    for every rare type), which are exactly the training targets' counts;
    ``<pad>`` and ``<bos>`` are never targets and get no mass.

    Args:
        lm_vocab: a `tfktopic.data.Vocabulary` (with counts).
        examples: `SentenceExamples` or `DocumentSequences` to score (their
            ``targets`` within ``lengths``).

    Returns:
        float (nan when `examples` hold no target).

    Example:
    >>> unigram_perplexity(lm_vocab, test_examples)          # doctest: +SKIP
    """
    counts = np.array([lm_vocab.counts.get(t, 0) for t in lm_vocab.tokens], np.float64) + 0.5
    counts[[lm_vocab.pad_id, lm_vocab.bos_id]] = 0.0
    with np.errstate(divide="ignore"):
        log_p = np.log(counts / counts.sum())
    mask = np.arange(examples.tokens.shape[-1]) < np.asarray(examples.lengths)[..., None]
    targets = np.asarray(examples.targets)[mask]
    return float(np.exp(-log_p[targets].mean())) if targets.size else float("nan")
