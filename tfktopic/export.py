"""SavedModel export with serving signatures (DESIGN.md §2-§3).

`export_saved_model` writes a TensorFlow SavedModel that a server (TF Serving,
or any Python process with only TensorFlow installed) loads with
`tf.saved_model.load` -- tfktopic, Keras and TFP are not needed to run it.
Every signature has explicit input specs (int32 token ids, float32 bags of
words and masks, dynamic batch and length): Keras' own `model.export` would
infer ``tokens`` as float32. The signatures are ``next_token_log_probs`` (also
``serving_default``), ``score_sentences``, ``topic_proportions`` (topic models)
and ``vocabulary`` (when vocabularies are given); see `export_saved_model`.
"""

import contextlib
import os
import pathlib

import keras
from keras import ops

from tfktopic import backend
from tfktopic.atomic import atomic_directory
from tfktopic.errors import VocabularyError
from tfktopic.evaluation.perplexity import log_probabilities, masked_token_log_probs
from tfktopic.models.base import TopicLanguageModel

__all__ = ["export_saved_model", "SIGNATURES"]

#: Every signature name an export can have (``serving_default`` aliases the first).
SIGNATURES = ("next_token_log_probs", "score_sentences", "topic_proportions", "vocabulary")

_SUPPORTED = ("LSTMLanguageModel, DocumentLSTMLanguageModel, LDALSTMLanguageModel, TopicRNN, "
              "DocumentTopicRNN, TCNLM, RGBNRNN (TopicLanguageModel)")


class _Family:
    """What export needs to know about one model family.

    Attributes:
        chunked: inputs carry the J axis ([B, J, T] tokens, [B, J, V_c] BoW).
        context_width: V_c, or `None` when the context is ignored (any width).
        predict: (tokens, context_bow) -> next-token logits or log-probabilities.
        topics: bow -> dict of outputs of ``topic_proportions``, or `None`.
    """

    def __init__(self, chunked, context_width, predict, topics=None):
        self.chunked = chunked
        self.context_width = context_width
        self.predict = predict
        self.topics = topics


def _family(model):
    """The `_Family` of a model, from its class traits (`TopicLanguageModel`)."""
    if not isinstance(model, TopicLanguageModel):
        raise TypeError(f"export_saved_model supports {_SUPPORTED}; got {type(model).__name__}")
    # A streamed model serves every request as a new document (zero state, nothing carried).
    fresh = {"carry": False} if model.streamed else {}
    if model.has_topics:
        return _Family(model.chunked, model.topic_vocab_size,
                       lambda tokens, context_bow: model(
                           {"tokens": tokens, "context_bow": context_bow}, training=False,
                           **fresh),
                       model.topic_outputs)
    return _Family(model.chunked, None,
                   lambda tokens, context_bow: model({"tokens": tokens}, training=False, **fresh))


def _stateless_copy(model):
    """A `stateful=True` LSTM LM rebuilt without carried state, same weights.

    A served model must not carry its state from one request to the next, and
    a stateful layer fixes the batch size.
    """
    import tensorflow as tf
    copy = type(model).from_config({**model.get_config(), "stateful": False})
    copy({"tokens": tf.zeros((1, 1), tf.int32), "context_bow": tf.zeros(
        (1, getattr(model, "topic_vocab_size", 1)), tf.float32)})
    for source, target in zip(model.layers, copy.layers):
        if isinstance(source, keras.layers.RNN):
            source, target = source.cell, target.cell
        target.set_weights(source.get_weights())
    return copy


def _words(vocabulary, expected, name):
    """The word list of a vocabulary (object or list), checked against the model."""
    if hasattr(vocabulary, "tokens"):
        words = list(vocabulary.tokens)       # Vocabulary
    elif hasattr(vocabulary, "words"):
        words = list(vocabulary.words)        # TopicVocabulary
    else:
        words = list(vocabulary)
    if not all(isinstance(w, str) for w in words):
        raise VocabularyError(f"{name} must be a Vocabulary, a TopicVocabulary or a list of "
                              f"strings")
    if expected is not None and len(words) != expected:
        raise VocabularyError(f"{name} has {len(words)} words but the model expects {expected}: "
                              f"pass the vocabulary the model was trained with")
    return words


def _check_path(path):
    path = pathlib.Path(os.fspath(path))
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"export path {path} is an existing file; give a directory")
    if path.is_dir() and any(path.iterdir()) and not (path / "saved_model.pb").exists():
        raise FileExistsError(f"export path {path} is a non-empty directory that is not a "
                              f"SavedModel; give a new or empty directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"cannot export to {path}: {parent} is a file")
            break
    return path


def _save_context(options):
    """The context `tf.saved_model.save` traces in, or a no-op if TF moves it.

    A `tf.function`'s trace cache is keyed on whether it is traced inside a
    save (`tensorflow.python.eager.polymorphic_function.function_context`:
    the save options' variable policy). Tracing the signatures inside that
    context gives `save` the traces it looks up, so each is traced once instead
    of twice (measured under cProfile: 13 of the 50 s of the six exports of
    tests/library/test_export.py).
    The module is TensorFlow-internal; without it the export is the same, only
    slower.
    """
    try:
        from tensorflow.python.saved_model import save_context
    except ImportError:  # pragma: no cover - a TensorFlow that moved it
        return contextlib.nullcontext()
    if save_context.in_save_context():
        return contextlib.nullcontext()
    return save_context.save_context(options)


def export_saved_model(model, path, *, lm_vocab=None, topic_vocab=None):
    """Write `model` as a TensorFlow SavedModel with serving signatures.

    The SavedModel is a `tf.Module` whose `tf.function`s have explicit input
    signatures (int32 ``tokens`` / ``targets``, float32 ``mask`` / BoW, dynamic
    batch and length). Evaluation mode throughout: no dropout, topics at the
    posterior mean (TopicRNN and TCNLM: the mean of q(theta | d); rGBN-RNN:
    theta at its Weibull mean; LDA+LSTM: the LDA E-step). A ``stateful=True``
    LSTM is exported as its stateless copy (every request starts from a zero
    state). The export is for serving: the gradient functions of the fused
    layers (`tf.custom_gradient` in the hoisted LSTM and TCNLM's factorised
    recurrence) are not saved, so a loaded export gives no gradients through
    those layers.

    Signatures:

    * ``next_token_log_probs(tokens, context_bow)`` (also ``serving_default``)
      -> ``{"log_probs": [B, T, V]}``, normalised log p(y_t | y_<t, context).
      Models without topics (`LSTMLanguageModel`) accept ``context_bow`` of any
      width and ignore it, so every export has the same interface.
    * ``score_sentences(tokens, targets, mask, context_bow)`` ->
      ``{"log_likelihood": [B], "num_tokens": [B]}``: sum over the mask of
      log p(target), and the mask's sum (perplexity = exp(-sum ll / sum n)).
    * ``topic_proportions(bow)`` (topic models only) -> ``{"proportions":
      [B, K]}``: LDA+LSTM theta (E-step); TCNLM t = softmax(W mu + b) at the
      mean; TopicRNN the mean of q(theta | X_c), a real-valued Gaussian vector
      (not on the simplex) -- the theta its softmax uses; rGBN-RNN the layer-1
      theta at the Weibull mean normalised to sum to one, plus the raw Weibull
      means ``theta_1`` ... ``theta_L`` of every layer.
    * ``vocabulary()`` (when `lm_vocab` or `topic_vocab` is given) ->
      ``{"lm_words": string [V]}`` and/or ``{"topic_words": string [V_c]}``,
      so a server can map ids to words without tfktopic.

    Document-chunk models (`RGBNRNN`, ``LSTMLanguageModel(document_level=True)``)
    take ``tokens`` / ``targets`` / ``mask`` [B, J, T] and ``context_bow`` /
    ``bow`` [B, J, V_c]; their outputs gain the J axis (``log_probs``
    [B, J, T, V], ``log_likelihood`` and ``num_tokens`` [B, J],
    ``proportions`` [B, J, K]).

    Args:
        model: a built `LSTMLanguageModel`, `LDALSTMLanguageModel`, `TopicRNN`,
            `TCNLM` or `RGBNRNN`.
        path: a new or empty directory, or an earlier export to overwrite.
        lm_vocab: optional `Vocabulary` (or list of words) of the model's LM
            ids; its size must equal the model's vocabulary size.
        topic_vocab: optional `TopicVocabulary` (or list of words) of the
            ``context_bow`` columns; its size must equal the model's context
            width (any size for models that ignore the context).

    Returns:
        `path` (as given).

    Raises:
        TypeError: for an unsupported model.
        ValueError: for a model that has no weights yet (never built).
        VocabularyError: for a vocabulary whose size does not match the model.
        FileExistsError, NotADirectoryError: for a path that is a file, or a
            non-empty directory that is not a SavedModel.

    Example:
    >>> export_saved_model(model, "export/tcnlm", lm_vocab=lm_vocab,
    ...                    topic_vocab=topic_vocab)                     # doctest: +SKIP
    >>> import tensorflow as tf                                         # doctest: +SKIP
    >>> serving = tf.saved_model.load("export/tcnlm")                   # doctest: +SKIP
    >>> out = serving.signatures["next_token_log_probs"](
    ...     tokens=tf.constant([[1, 57, 12]], tf.int32),
    ...     context_bow=tf.zeros([1, len(topic_vocab)]))                # doctest: +SKIP
    >>> out["log_probs"].shape                                          # doctest: +SKIP
    TensorShape([1, 3, 10000])
    >>> words = serving.signatures["vocabulary"]()["lm_words"]          # doctest: +SKIP
    """
    backend.require_tensorflow("SavedModel export")
    import tensorflow as tf
    family = _family(model)
    if not model.built or not model.weights:
        raise ValueError(f"cannot export {type(model).__name__}: it has no weights yet. Train "
                         f"it, load its weights or call it on a batch first")
    export_path = _check_path(path)
    if getattr(model, "stateful", False):
        model = _stateless_copy(model)
        family = _family(model)
    topic_models = family.topics is not None
    lm_words = None if lm_vocab is None else _words(lm_vocab, model.vocab_size, "lm_vocab")
    topic_words = None if topic_vocab is None else _words(topic_vocab, family.context_width,
                                                          "topic_vocab")

    lead = (None, None) if family.chunked else (None,)
    ids_spec = lambda name: tf.TensorSpec(lead + (None,), tf.int32, name=name)
    bow_spec = lambda name: tf.TensorSpec(lead + (family.context_width,), tf.float32, name=name)

    def next_token_log_probs(tokens, context_bow):
        return {"log_probs": log_probabilities(family.predict(tokens, context_bow))}

    def score_sentences(tokens, targets, mask, context_bow):
        log_probs = log_probabilities(family.predict(tokens, context_bow))
        token_log_probs = masked_token_log_probs(targets, log_probs, mask, from_logits=False)
        return {"log_likelihood": ops.sum(token_log_probs, axis=-1),
                "num_tokens": ops.sum(ops.cast(mask, "float32"), axis=-1)}

    functions = {
        "next_token_log_probs": tf.function(
            next_token_log_probs, autograph=False,
            input_signature=[ids_spec("tokens"), bow_spec("context_bow")]),
        "score_sentences": tf.function(
            score_sentences, autograph=False,
            input_signature=[ids_spec("tokens"), ids_spec("targets"),
                             tf.TensorSpec(lead + (None,), tf.float32, name="mask"),
                             bow_spec("context_bow")]),
    }
    if topic_models:
        def topic_proportions(bow):
            return {key: ops.cast(value, "float32") for key, value in family.topics(bow).items()}

        functions["topic_proportions"] = tf.function(
            topic_proportions, autograph=False, input_signature=[bow_spec("bow")])
    words = {key: value for key, value in (("lm_words", lm_words), ("topic_words", topic_words))
             if value is not None}
    if words:
        functions["vocabulary"] = tf.function(
            lambda: {key: tf.constant(value, tf.string) for key, value in words.items()},
            autograph=False, input_signature=[])

    serving = tf.Module(name="tfktopic_serving")
    # The export serves (evaluation mode, no training): the gradient functions of the
    # fused layers' `tf.custom_gradient`s are not traced or saved. Tracing them took a
    # quarter of an export's time (under cProfile, 12 of 50 s for the six families of
    # tests/library/test_export.py).
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    with _save_context(options):   # traced once: the trace `save` itself uses
        concrete = {name: fn.get_concrete_function() for name, fn in functions.items()}
    variables, seen = [], set()
    for function in concrete.values():
        for variable in function.variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                variables.append(variable)
    for name, fn in functions.items():
        setattr(serving, name, fn)
    # Only the variables the signatures read (rGBN's MCMC state, metrics and
    # optimizer slots stay behind); tracking them saves them with the graph.
    serving.model_variables = variables
    signatures = dict(concrete, serving_default=concrete["next_token_log_probs"])
    # Written into a temporary sibling and renamed at the end: a full disk or an error
    # midway leaves no partial SavedModel (and an earlier export untouched).
    with atomic_directory(export_path) as tmp:
        tf.saved_model.save(serving, str(tmp), signatures=signatures, options=options)
    return path
