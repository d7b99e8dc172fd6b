"""Model name -> model class, presets and construction: the one table of the models.

Adding a model = one model file (a `TopicLanguageModel` subclass), one preset
module (``tfktopic/models/<family>_presets.py``) and one line in `MODELS` here
(plus one in `tfktopic.presets` for its presets). The entry states what the
model is fed (``data_kind``: "windows", "chunks" or "streams", with the flags of
its examples) and `ModelEntry.preprocessor` returns the
`tfktopic.data.preprocessors` object that builds it: `tfktopic.runs` never
tests a model's name.

Example:
>>> from tfktopic.models import registry
>>> registry.names()
('lstm', 'doc_lstm', 'doc_lstm_chunked', 'lda_lstm', 'topicrnn', 'doc_topicrnn', 'tcnlm', 'rgbn_rnn', 'gbn_rnn')
>>> registry.get("tcnlm").has_topics, registry.get("doc_lstm").streamed
(True, True)
>>> registry.get("rgbn_rnn").data_kind, registry.get("topicrnn").preprocessor().kind
('chunks', 'windows')
>>> model = registry.build_model("tcnlm", {"num_topics": 5, "hidden_dim": 16},
...                              lm_vocab=lm_vocab, topic_vocab=topic_vocab)  # doctest: +SKIP
"""

import dataclasses
import typing

from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel
from tfktopic.models.topicrnn.document import DocumentTopicRNN
from tfktopic.lda import LDA_PASSES, fit_lda
from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel
from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
from tfktopic.models.rgbn import RGBNRNN
from tfktopic.models.tcnlm.model import TCNLM
from tfktopic.models.topicrnn.model import TopicRNN

__all__ = ["ModelEntry", "MODELS", "DATA_KINDS", "names", "get", "build_model",
           "recorded_name"]

#: What a model is fed (`tfktopic.data.preprocessors.KINDS`).
DATA_KINDS = ("windows", "chunks", "streams")


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One model name of the command line.

    Attributes:
        name: the model's name ("lstm", "tcnlm", ...).
        model_class: its class.
        construct: ``(settings, context) -> model``: the constructor call with the
            run's vocabularies and data (``context`` is a dict with ``lm_vocab``,
            ``topic_vocab``, ``num_documents``, ``embeddings``, ``seed``,
            ``train_corpus`` and ``training``).
        fixed: constructor arguments the name implies (e.g. ``document_level``).
        description: one line for the command line's help.
        data_kind: what the model is fed (`DATA_KINDS`): sentence "windows" with
            leak-free topic contexts, document "chunks" ``[B, J, T]`` or
            document "streams" (state carried; `tfktopic.data.preprocessors`).
        document_targets: windows: the batches carry the context's bag of
            words as targets too (TopicRNN's ``doc_targets``).
        whole_documents: chunks: the batch size counts windows and scoring
            uses one chunk per whole document (the chunked document LSTM).
        defaults: settings the model adds to its presets when they lack them,
            ``{"model": {...}, "training": {...}}`` (e.g. LDA+LSTM's
            ``lda_iterations``); ``fixed`` arguments are recorded too.
        extra_settings: ``--set`` keys `construct` reads that are not
            constructor arguments (e.g. ``lda_iterations``).
        allow_unk: whether its generated text may contain ``<unk>`` by
            default (TCNLM never, as Wang et al.'s samples).
        topic_transitions: its topics evolve from sentence to sentence
            (rGBN-RNN's Pi: ``--paragraph`` with ``--document``).
    """

    name: str
    model_class: type
    construct: typing.Callable
    fixed: typing.Mapping = dataclasses.field(default_factory=dict)
    description: str = ""
    data_kind: str = "windows"
    document_targets: bool = False
    whole_documents: bool = False
    defaults: typing.Mapping = dataclasses.field(default_factory=dict)
    extra_settings: tuple = ()
    allow_unk: bool = True
    topic_transitions: bool = False

    def __post_init__(self):
        if self.data_kind not in DATA_KINDS:
            raise ValueError(f"{self.name}: unknown data kind {self.data_kind!r}; choose "
                             f"from {', '.join(DATA_KINDS)}")

    def _trait(self, trait):
        return getattr(self.model_class, trait)

    def preprocessor(self):
        """The `tfktopic.data.preprocessors.Preprocessor` of the model's data kind.

        Returns:
            A `WindowPreprocessor`, `ChunkPreprocessor` or `StreamPreprocessor`
            with the model's flags (topic context, document targets, whole
            documents).

        Example:
        >>> get("doc_lstm_chunked").preprocessor()
        ChunkPreprocessor(topical=False, name='doc_lstm_chunked')
        """
        from tfktopic.data import preprocessors

        flags = {"topical": self.has_topics, "name": self.name}
        if self.data_kind == "windows":
            flags["document_targets"] = self.document_targets
        if self.data_kind == "chunks":
            flags["whole_documents"] = self.whole_documents
        return preprocessors.for_kind(self.data_kind, **flags)

    @property
    def has_topics(self):
        return self._trait("has_topics")

    @property
    def simplex_topics(self):
        return self._trait("simplex_topics")

    @property
    def chunked(self):
        """Trained on document chunks ``[B, J, T]`` (``data_kind == "chunks"``)."""
        return self.data_kind == "chunks"

    @property
    def streamed(self):
        """Trained on document streams (``data_kind == "streams"``)."""
        return self.data_kind == "streams"

    @property
    def hierarchical(self):
        return self._trait("hierarchical")

    @property
    def generates(self):
        return self._trait("generates")


def _lstm(settings, context):
    return LSTMLanguageModel(len(context["lm_vocab"]), embeddings=context["embeddings"],
                             **settings)


def _streams(settings, context):
    """The streamed models' ``max_streams``: the run's batch size (parallel streams)."""
    settings = dict(settings)
    batch = (context.get("training") or {}).get("batch_size")
    if "max_streams" not in settings and batch is not None:
        settings["max_streams"] = int(batch)
    return settings


def _doc_lstm(settings, context):
    return DocumentLSTMLanguageModel(len(context["lm_vocab"]), embeddings=context["embeddings"],
                                     **_streams(settings, context))


def _doc_topicrnn(settings, context):
    return DocumentTopicRNN(len(context["lm_vocab"]), context["topic_vocab"].lm_to_topic,
                            embeddings=context["embeddings"],
                            **_streams(_lda_start(settings, context), context))


def _lda_lstm(settings, context):
    if context.get("lda") is not None:  # an LDA fitted already (e.g. shared by a benchmark)
        return LDALSTMLanguageModel(len(context["lm_vocab"]), len(context["topic_vocab"]),
                                    lda=context["lda"], embeddings=context["embeddings"],
                                    **settings)
    if context["train_corpus"] is None:
        raise ValueError("lda_lstm: the LDA is fitted on the training corpus; pass train_corpus")
    lda = fit_lda(context["train_corpus"], context["topic_vocab"],
                  num_topics=settings.get("num_topics", 50),
                  passes=context["training"].get("lda_passes", LDA_PASSES), seed=context["seed"],
                  iterations=settings.get("lda_iterations", 50))
    return LDALSTMLanguageModel(len(context["lm_vocab"]), len(context["topic_vocab"]), lda=lda,
                                embeddings=context["embeddings"], **settings)


def _lda_start(settings, context, num_topics=None):
    """``decoder_init="lda"``: add the topic-word matrix of an LDA of the training split
    (`TCNLM` / `TopicRNN` / `DocumentTopicRNN` / `RGBNRNN` ``topic_word_init``; the context's LDA if one is
    given) with `num_topics` topics (default: the settings' ``num_topics``)."""
    settings = dict(settings)
    if settings.get("decoder_init") == "lda" and settings.get("topic_word_init") is None:
        lda = context.get("lda")
        if lda is None:
            if context["train_corpus"] is None:
                raise ValueError("decoder_init='lda': the LDA is fitted on the training "
                                 "corpus; pass train_corpus")
            lda = fit_lda(context["train_corpus"], context["topic_vocab"],
                          num_topics=num_topics or settings.get("num_topics", 50),
                          passes=context["training"].get("lda_passes", LDA_PASSES),
                          seed=context["seed"])
        settings["topic_word_init"] = lda.get_topics()
    return settings


def _topicrnn(settings, context):
    return TopicRNN(len(context["lm_vocab"]), context["topic_vocab"].lm_to_topic,
                    embeddings=context["embeddings"], **_lda_start(settings, context))


def _tcnlm(settings, context):
    return TCNLM(len(context["lm_vocab"]), len(context["topic_vocab"]),
                 embeddings=context["embeddings"], **_lda_start(settings, context))


def _rgbn(settings, context):
    if context["num_documents"] is None:
        raise ValueError("rgbn_rnn / gbn_rnn: pass num_documents (training document chunks)")
    settings = dict(settings)
    num_layers = settings.pop("num_layers", 3)
    settings.setdefault("seed", context["seed"])
    # K_1: the first of the (uncut) topic sizes, the paper's 100 for every L by default.
    settings = _lda_start(settings, context, (settings.get("topic_sizes") or (100,))[0])
    return RGBNRNN.from_preset(settings, len(context["lm_vocab"]), len(context["topic_vocab"]),
                               num_documents=context["num_documents"], num_layers=num_layers,
                               embeddings=context["embeddings"])


#: Every model of the package, in the command line's order.
MODELS = {entry.name: entry for entry in (
    ModelEntry("lstm", LSTMLanguageModel, _lstm,
               description="sentence-level LSTM baseline"),
    ModelEntry("doc_lstm", DocumentLSTMLanguageModel, _doc_lstm,
               description=("document-level LSTM, streamed (Zheng et al.'s baseline): state "
                            "carried through each document, truncated BPTT of 30"),
               data_kind="streams"),
    ModelEntry("doc_lstm_chunked", LSTMLanguageModel, _lstm, {"document_level": True},
               description=("document-level LSTM, chunked: state carried within 8-sentence "
                            "chunks in training (not the streamed baseline)"),
               data_kind="chunks", whole_documents=True,
               defaults={"model": {"document_level": True}}),
    ModelEntry("lda_lstm", LDALSTMLanguageModel, _lda_lstm,
               description="LSTM with LDA topic proportions before the softmax",
               defaults={"model": {"lda_iterations": 50}}, extra_settings=("lda_iterations",)),
    ModelEntry("topicrnn", TopicRNN, _topicrnn, description="TopicRNN (Dieng et al. 2017)",
               document_targets=True),
    ModelEntry("doc_topicrnn", DocumentTopicRNN, _doc_topicrnn,
               description="TopicRNN on the streamed document LSTM (as Zheng et al.)",
               data_kind="streams"),
    ModelEntry("tcnlm", TCNLM, _tcnlm, description="TCNLM (Wang et al. 2018)",
               allow_unk=False),
    ModelEntry("rgbn_rnn", RGBNRNN, _rgbn, {"recurrent": True},
               description="rGBN-RNN (Guo et al. 2020)", data_kind="chunks",
               topic_transitions=True),
    ModelEntry("gbn_rnn", RGBNRNN, _rgbn, {"recurrent": False},
               description="GBN-RNN: rGBN-RNN without the topic transitions",
               data_kind="chunks"),
)}


def names(trait=None):
    """The model names, in order; with `trait` (e.g. "has_topics"), those that have it.

    Example:
    >>> names("hierarchical")
    ('rgbn_rnn', 'gbn_rnn')
    """
    if trait is None:
        return tuple(MODELS)
    return tuple(name for name, entry in MODELS.items() if getattr(entry, trait))


def get(name):
    """The `ModelEntry` of a model name (ValueError naming the choices if unknown)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return MODELS[name]


def recorded_name(name, model_config=None):
    """The model name of a recorded run (``run.json``'s ``model``), renamed if it changed.

    Runs written before 0.2 called the chunked document LSTM "doc_lstm" (the
    streamed one took the name); their ``model_config`` has ``document_level``.

    Args:
        name: the recorded name.
        model_config: the recorded constructor settings.

    Returns:
        The current name.
    """
    if name == "doc_lstm" and (model_config or {}).get("document_level"):
        return "doc_lstm_chunked"
    return name


def build_model(name, settings, *, lm_vocab, topic_vocab=None, num_documents=None,
                embeddings=None, seed=0, train_corpus=None, training=None, lda=None):
    """A new model of `name` from its constructor settings (call inside a strategy scope).

    Args:
        name: a model name (`names`).
        settings: constructor arguments, e.g. ``tfktopic.presets.preset(name,
            "small").model`` with overrides; the arguments the name implies
            (``document_level``, ``recurrent``) are added.
        lm_vocab, topic_vocab: the run's vocabularies.
        num_documents: training document chunks (rGBN-RNN's TLASGR scale).
        embeddings: optional ``[len(lm_vocab), embedding_dim]`` initial embeddings.
        seed: seed of the LDA fit and rGBN's sampler.
        train_corpus: the training documents (LDA+LSTM fits its LDA on them).
        training: training settings (LDA+LSTM and ``decoder_init="lda"`` read
            ``lda_passes``).
        lda: LDA+LSTM, and TCNLM / TopicRNN with ``decoder_init="lda"``: an
            already fitted gensim `LdaModel` (default: fit one on `train_corpus`).

    Returns:
        The model (not compiled).

    Raises:
        ValueError: an unknown model, or a setting that is not a constructor
            argument (the message names the model).
    """
    entry = get(name)
    context = {"lm_vocab": lm_vocab, "topic_vocab": topic_vocab, "num_documents": num_documents,
               "embeddings": embeddings, "seed": seed, "train_corpus": train_corpus,
               "training": dict(training or {}), "lda": lda}
    try:
        return entry.construct({**dict(settings), **dict(entry.fixed)}, context)
    except TypeError as error:
        raise ValueError(f"--set: a setting is not an argument of {name} ({error})") from None
    except ValueError as error:  # Keras' check of the keyword arguments of a Model
        if not str(error).startswith("Unrecognized keyword arguments"):
            raise
        raise ValueError(f"--set: a setting is not an argument of {name} ({error})") from None
