"""Speed and quality of the topic-guided LMs against the LSTM baselines (DESIGN.md §7).

Models (DESIGN §7 names): ``lstm`` (sentence-level `LSTMLanguageModel`, the papers'
"basic-LSTM"), ``doc_lstm`` (document-level, state carried across sentences; Zheng,
Vafa & Blei 2023), ``lda_lstm`` (`LDALSTMLanguageModel`), ``topicrnn`` (TopicRNN),
``tcnlm`` (TCNLM, factorised mixture of topic experts) and ``tcnlm_moe`` (TCNLM's
naive mixture of experts, eq. 7). Every model has the same embedding size, hidden
size, vocabulary and batch size.

**Speed** (``SPEED``): training tokens per second (real predicted tokens, padding
excluded) of each model against a plain `LSTMLanguageModel` of the same size, measured
in the same process, interleaved over a few rounds (the fastest round of each counts,
so the ratio is robust to other processes on the machine); `ratio` = model / lstm.
Peak resident memory is measured per model by resetting the kernel's high-water mark
(``/proc/self/clear_refs``) before it trains; it includes the TF runtime and the data.

**Quality** (``QUALITY``) on APNEWS (``../shared/data/apnews/apnews.txt``: 2,000
documents of the official APNEWS validation split, the only part available), split by
document 80/10/10 with seed 0:

* Vocabularies from the training documents: LM vocabulary with `min_count`; topic
  vocabulary without Mallet's stop words, the top 0.1 % frequent types, symbols and
  words in fewer than `min_doc_freq` documents (TDLM / TCNLM, §2.2 of the reference).
* Sentence windows of 30 targets, contexts of at most 300 topic words. Training
  contexts follow the papers (``all_other``: the rest of the document); validation
  (early stopping) and the headline test perplexity are **leak-free** (``preceding``:
  earlier sentences only). The papers' ``all_other`` test numbers are recorded too,
  labelled as such: they let the sentence's future text into its context.
* Same epoch budget for every model, Adam with global-norm clipping 5, early stopping
  on validation perplexity with the best weights restored.
* ``doc_lstm`` trains on chunks of 8 windows (`document_dataset`) and is tested with
  each test document as one sequence (state carried over the whole document). It
  predicts exactly the same test tokens as the sentence-level models.
* Perplexity records of every model have baseline ``lstm``; extra records compare the
  context models with ``doc_lstm`` (the stronger baseline of Zheng et al.).
* Topic coherence: NPMI (Lau et al.: windows of 20, pairs that never co-occur count 0,
  mean over top-5/10/15/20) of the TopicRNN and TCNLM topics and of gensim's LDA on
  the same training documents, topic vocabulary and number of topics. The reference
  corpus is the **whole APNEWS file** (all 2,000 documents, every token, windows
  running across the sentences of a document) -- not Wikipedia as in the papers, so
  the numbers are not comparable with TCNLM's Table 4.

``--quick`` uses a 300-document subset and tiny models (a few minutes); the full mode
uses paper-like sizes (embedding 300, 1 x 600 LSTM, 50 topics, dropout 0.4, batch 64,
10 epochs; TCNLM Table 2 "small") on all 2,000 documents, which takes many hours on a
2-core CPU.
"""

import functools
import importlib
import sys
import time

import numpy as np

from benchmarks.common import (MissingData, record, reset_peak_rss, shared_file, status_mb,
                               time_train_steps)

PROTOCOLS = {
    "preceding": "sentence-level, zero state per sentence; leak-free context: the preceding "
                 "sentences of the document only",
    "all_other": "sentence-level, zero state per sentence; the papers' context: all other "
                 "sentences of the document (future text leaks into the context)",
    "document": "document-level: the LSTM state is carried across the sentences of a test "
                "document (only preceding text is seen)",
}

#: Sizes of the three modes. "full" is TCNLM's Table 2 "small" setup (reference
#: tcnlm_and_evaluation.md §1.6-1.7, §2.8) scaled to the 2,000 available documents.
SETTINGS = {
    "quick": {
        "num_documents": 300, "min_count": 3, "min_doc_freq": 3, "max_len": 30,
        "context_len": 300, "embedding_dim": 32, "hidden_dim": 64, "num_topics": 8,
        "encoder_units": (64, 64), "dropout": 0.0, "batch_size": 64, "epochs": 3,
        "patience": 1, "learning_rate": 3e-3, "clipnorm": 5.0, "lda_passes": 5,
        "doc_chunk": 8, "speed_steps": 8, "speed_rounds": 3,
    },
    "medium": {  # all 2,000 documents at a size a 2-core CPU trains in about an hour
        "num_documents": None, "min_count": 10, "min_doc_freq": 5, "max_len": 30,
        "context_len": 300, "embedding_dim": 128, "hidden_dim": 256, "num_topics": 50,
        "encoder_units": None,  # each paper's own: TopicRNN (200, 200), TCNLM (256, 256)
        "dropout": 0.3, "batch_size": 64, "epochs": 6, "patience": 2,
        "learning_rate": 2e-3, "clipnorm": 5.0, "lda_passes": 10,
        "doc_chunk": 8, "speed_steps": 20, "speed_rounds": 3,
    },
    "full": {
        "num_documents": None, "min_count": 10, "min_doc_freq": 5, "max_len": 30,
        "context_len": 300, "embedding_dim": 300, "hidden_dim": 600, "num_topics": 50,
        "encoder_units": None,  # each paper's own: TopicRNN (200, 200), TCNLM (256, 256)
        "dropout": 0.4, "batch_size": 64, "epochs": 10, "patience": 2,
        "learning_rate": 1e-3, "clipnorm": 5.0, "lda_passes": 20,
        "doc_chunk": 8, "speed_steps": 20, "speed_rounds": 3,
    },
}
SPLIT_SEED = 0
TRAIN_PROTOCOL = "all_other"
MODELS = ("lstm", "doc_lstm", "lda_lstm", "topicrnn", "tcnlm", "tcnlm_moe")
TOPIC_MODELS = ("topicrnn", "tcnlm", "tcnlm_moe")


class ModelUnavailable(MissingData):
    """A model's module is not in this checkout yet; the runner reports and skips it."""


def _log(message):
    print(f"[topic_models] {message}", file=sys.stderr, flush=True)


def _require(module_name, class_name):
    """The model class, or a clear `ModelUnavailable` when its module is absent."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise ModelUnavailable(
            f"{module_name} is not available in this checkout (the {class_name} model has "
            "not been merged yet), so this benchmark entry cannot run") from None
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ModelUnavailable(f"{module_name} has no {class_name} (agreed API)") from None


# --------------------------------------------------------------------------- data


@functools.lru_cache(maxsize=None)
def _data(mode):
    """Corpus split, vocabularies and sentence/document examples (cached per mode)."""
    from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, read_tdlm,
                               sentence_examples)

    cfg = SETTINGS[mode]
    path = shared_file("apnews/apnews.txt")
    stopwords = shared_file("stopwords/mallet_en.txt")
    corpus = read_tdlm(path)
    if cfg["num_documents"] is not None:
        order = np.random.default_rng(SPLIT_SEED).permutation(len(corpus))
        corpus = corpus.subset(sorted(order[:cfg["num_documents"]].tolist()))
    train, valid, test = corpus.split((0.8, 0.1, 0.1), seed=SPLIT_SEED)
    lm = Vocabulary.build(train, min_count=cfg["min_count"])
    topic = TopicVocabulary.build(train, lm, stopwords=str(stopwords), max_freq_fraction=0.001,
                                  min_doc_freq=cfg["min_doc_freq"])
    common = {"max_len": cfg["max_len"], "context_len": cfg["context_len"]}
    data = {
        "path": path, "train": train, "valid": valid, "test": test, "lm": lm, "topic": topic,
        "train_examples": sentence_examples(train, lm, topic, protocol=TRAIN_PROTOCOL, **common),
        "valid_examples": sentence_examples(valid, lm, topic, protocol="preceding", **common),
        "test_examples": {p: sentence_examples(test, lm, topic, protocol=p, **common)
                          for p in ("preceding", "all_other")},
        "train_documents": document_sequences(train, lm, topic, cfg["doc_chunk"], **common),
        "valid_documents": document_sequences(valid, lm, topic, cfg["doc_chunk"], **common),
    }
    windows_per_doc = np.bincount(data["test_examples"]["preceding"].document_index)
    data["test_documents"] = document_sequences(test, lm, topic, int(windows_per_doc.max()),
                                                **common)
    data["description"] = {
        "corpus": str(path), "documents": {"train": len(train), "valid": len(valid),
                                           "test": len(test)},
        "split": f"by document 80/10/10, seed {SPLIT_SEED}",
        "train_tokens": int(data["train_examples"].num_targets),
        "test_targets": int(data["test_examples"]["preceding"].num_targets),
        "lm_vocab": len(lm), "topic_vocab": len(topic),
        "train_context_protocol": TRAIN_PROTOCOL,
    }
    _log(f"data ({mode}): {data['description']}")
    return data


@functools.lru_cache(maxsize=None)
def _lda(mode):
    """gensim LDA on the training documents' topic-vocabulary BoW (cached per mode)."""
    from tfktopic.models.lda_lstm import fit_lda

    cfg, data = SETTINGS[mode], _data(mode)
    start = time.perf_counter()
    lda = fit_lda(data["train"], data["topic"], num_topics=cfg["num_topics"],
                  passes=cfg["lda_passes"], seed=0)
    _log(f"gensim LDA: {cfg['num_topics']} topics, {cfg['lda_passes']} passes, "
         f"{time.perf_counter() - start:.1f} s")
    return lda


@functools.lru_cache(maxsize=None)
def _reference_counts(mode):
    """Window counts of every topic word in the whole APNEWS file (NPMI reference)."""
    from tfktopic.data import read_tdlm
    from tfktopic.evaluation import ReferenceCounts

    data = _data(mode)
    documents = ([w for sentence in doc for w in sentence] for doc in read_tdlm(data["path"]))
    return ReferenceCounts(documents, data["topic"].words, window_size=20)


# ------------------------------------------------------------------------- models


def _build(name, mode):
    """A fresh model of the benchmark's shared size (seeded)."""
    import keras

    from tfktopic.models.lda_lstm import LDALSTMLanguageModel
    from tfktopic.models.lstm_lm import LSTMLanguageModel

    cfg, data = SETTINGS[mode], _data(mode)
    vocab, topic = len(data["lm"]), data["topic"]
    size = {"embedding_dim": cfg["embedding_dim"], "hidden_dim": cfg["hidden_dim"],
            "dropout": cfg["dropout"]}
    units = cfg["encoder_units"]
    keras.utils.set_random_seed(0)
    if name == "lstm":
        return LSTMLanguageModel(vocab, **size)
    if name == "doc_lstm":
        return LSTMLanguageModel(vocab, document_level=True, **size)
    if name == "lda_lstm":
        return LDALSTMLanguageModel(vocab, len(topic), num_topics=cfg["num_topics"],
                                    lda=_lda(mode), **size)
    if name == "topicrnn":
        cls = _require("tfktopic.models.topicrnn", "TopicRNN")
        extra = {} if units is None else {"encoder_units": units}
        return cls(vocab, topic.lm_to_topic, num_topics=cfg["num_topics"], **size, **extra)
    if name in ("tcnlm", "tcnlm_moe"):
        cls = _require("tfktopic.models.tcnlm", "TCNLM")
        extra = {} if units is None else {"ntm_units": units}
        return cls(vocab, len(topic), num_topics=cfg["num_topics"],
                   mixture="moe" if name == "tcnlm_moe" else "factorized", **size, **extra)
    raise ValueError(f"unknown model {name!r}; expected one of {MODELS}")


def _compile(model, mode):
    import keras

    cfg = SETTINGS[mode]
    model.compile(optimizer=keras.optimizers.Adam(cfg["learning_rate"], clipnorm=cfg["clipnorm"]))
    return model


def _datasets(name, mode):
    """(train, valid) datasets of a model: document chunks for doc_lstm, else windows."""
    from tfktopic.data.pipeline import document_dataset, sentence_dataset

    cfg, data = SETTINGS[mode], _data(mode)
    if name == "doc_lstm":
        batch = max(1, cfg["batch_size"] // cfg["doc_chunk"])
        return (document_dataset(data["train_documents"], batch_size=batch, seed=0),
                document_dataset(data["valid_documents"], batch_size=4 * batch, shuffle=False))
    extra = _dataset_options(name)
    return (sentence_dataset(data["train_examples"], batch_size=cfg["batch_size"], seed=0,
                             **extra),
            sentence_dataset(data["valid_examples"], batch_size=2 * cfg["batch_size"],
                             shuffle=False, **extra))


def _dataset_options(name):
    """TopicRNN charges its KL once per document: it needs each window's document size."""
    return {"document_targets": True} if name == "topicrnn" else {}


def _num_params(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


# -------------------------------------------------------------------------- speed


def _speed_dataset(name, mode):
    """Unshuffled, fixed-shape batches; the timed steps use the first `speed_steps`."""
    from tfktopic.data.pipeline import document_dataset, sentence_dataset

    cfg, data = SETTINGS[mode], _data(mode)
    if name == "doc_lstm":
        dataset = document_dataset(data["train_documents"],
                                   batch_size=max(1, cfg["batch_size"] // cfg["doc_chunk"]),
                                   shuffle=False, drop_remainder=True)
    else:
        dataset = sentence_dataset(data["train_examples"], batch_size=cfg["batch_size"],
                                   shuffle=False, drop_remainder=True, **_dataset_options(name))
    steps = cfg["speed_steps"]
    tokens = [float(np.sum(batch["mask"])) for batch in dataset.take(steps)]
    return dataset, float(np.mean(tokens))


def _measure_speed(name, mode):
    cfg = SETTINGS[mode]
    steps, rounds = cfg["speed_steps"], cfg["speed_rounds"]
    base_ds, base_tokens = _speed_dataset("lstm", mode)
    model_ds, model_tokens = _speed_dataset(name, mode)
    baseline = _compile(_build("lstm", mode), mode)
    model = baseline if name == "lstm" else _compile(_build(name, mode), mode)
    runs = [("lstm", baseline, base_ds)] + ([] if name == "lstm" else [(name, model, model_ds)])
    timings = {key: [] for key, _, _ in runs}
    peaks = {key: 0.0 for key, _, _ in runs}
    growth = {key: 0.0 for key, _, _ in runs}
    reset = True
    for _ in range(rounds):
        for key, net, dataset in runs:
            reset = reset_peak_rss() and reset
            before = status_mb("VmRSS")
            timings[key].append(time_train_steps(net, dataset, steps, warmup=2))
            peaks[key] = max(peaks[key], status_mb("VmHWM"))
            growth[key] = max(growth[key], peaks[key] - before)
    base_time, model_time = min(timings["lstm"]), min(timings[name])
    base_rate, model_rate = base_tokens / base_time, model_tokens / model_time
    config = {
        **{k: cfg[k] for k in ("embedding_dim", "hidden_dim", "num_topics", "batch_size",
                               "max_len", "speed_steps", "speed_rounds")},
        "lm_vocab": len(_data(mode)["lm"]), "topic_vocab": len(_data(mode)["topic"]),
        "seconds_per_step": model_time, "baseline_seconds_per_step": base_time,
        "seconds_per_step_rounds": timings[name], "baseline_rounds": timings["lstm"],
        "tokens_per_step": model_tokens, "baseline_tokens_per_step": base_tokens,
        "trainable_params": _num_params(model), "baseline_trainable_params": _num_params(baseline),
        "timing": "fastest of interleaved rounds of benchmarks.common.time_train_steps",
    }
    if name == "doc_lstm":
        config["batch"] = f"{cfg['batch_size'] // cfg['doc_chunk']} documents x " \
                          f"{cfg['doc_chunk']} windows (= the sentence models' windows per step)"
    memory_note = ("peak RSS while this model trained (high-water mark reset before each "
                   "measurement; includes the TF runtime, the data and every model built so far "
                   "in this process)" if reset else
                   "process-wide peak RSS (the high-water mark could not be reset)")
    memory_config = {"lm_vocab": config["lm_vocab"], "batch_size": cfg["batch_size"]}
    return [
        record("speed", name, "tokens_per_s", model_rate, "lstm", base_rate,
               protocol="training step (forward + backward + Adam), real tokens only",
               dataset="apnews", config=config),
        record("speed", name, "peak_rss_mb", peaks[name], "lstm", peaks["lstm"],
               protocol=memory_note, dataset="apnews", config=memory_config),
        record("speed", name, "peak_rss_increase_mb", growth[name], "lstm", growth["lstm"],
               protocol="largest rise of the peak RSS over the RSS at the start of a measurement "
                        "(first round: tracing, optimizer slots, activations); approximate, the "
                        "allocator reuses memory freed by earlier measurements",
               dataset="apnews", config=memory_config),
    ]


# ------------------------------------------------------------------------ quality


def _train(name, mode):
    """Train `name` with the shared budget and early stopping; returns (model, info)."""
    import keras

    cfg = SETTINGS[mode]
    model = _compile(_build(name, mode), mode)
    train_ds, valid_ds = _datasets(name, mode)
    stop = keras.callbacks.EarlyStopping(monitor="val_ppl", mode="min", patience=cfg["patience"],
                                         restore_best_weights=True)
    start = time.perf_counter()
    history = model.fit(train_ds, validation_data=valid_ds, epochs=cfg["epochs"],
                        callbacks=[stop], verbose=0)
    seconds = time.perf_counter() - start
    val = history.history["val_ppl"]
    info = {"epochs_run": len(val), "best_epoch": int(np.argmin(val)) + 1,
            "best_valid_ppl": float(np.min(val)), "valid_ppl_per_epoch": [float(v) for v in val],
            "train_seconds": seconds, "trainable_params": _num_params(model)}
    _log(f"{name}: {info['epochs_run']} epochs in {seconds:.0f} s, best valid ppl "
         f"{info['best_valid_ppl']:.2f} (epoch {info['best_epoch']})")
    return model, info


def _test_perplexity(name, model, mode, protocol):
    from tfktopic.data.pipeline import document_dataset, sentence_dataset
    from tfktopic.evaluation import evaluate_perplexity

    cfg, data = SETTINGS[mode], _data(mode)
    if protocol == "document":
        sequences = data["test_documents"]
        batch = max(1, 4 * cfg["batch_size"] // sequences.tokens.shape[1])
        dataset = document_dataset(sequences, batch_size=batch, shuffle=False)
        expected = sequences.num_targets
    else:
        examples = data["test_examples"][protocol]
        dataset = sentence_dataset(examples, batch_size=2 * cfg["batch_size"], shuffle=False)
        expected = examples.num_targets
    result = evaluate_perplexity(model, dataset, protocol=protocol)
    if result.num_tokens != expected:
        raise RuntimeError(f"{name}: scored {result.num_tokens} tokens, expected {expected}")
    return result


@functools.lru_cache(maxsize=None)
def _result(name, mode):
    """Test perplexities (per protocol), training info and topics of a trained model."""
    model, info = _train(name, mode)
    if name == "doc_lstm":
        protocols = ("document",)
    elif name == "lstm":
        protocols = ("preceding",)  # no context: identical under every protocol
    else:
        protocols = ("preceding", "all_other")
    perplexity = {p: _test_perplexity(name, model, mode, p) for p in protocols}
    topics = None
    if hasattr(model, "topics"):
        topics = model.topics(top_n=20, vocabulary=_data(mode)["topic"])
    for p, r in perplexity.items():
        _log(f"{name}: test ppl {r.perplexity:.2f} ({p}, {r.num_tokens} tokens)")
    return {"perplexity": {p: r.perplexity for p, r in perplexity.items()},
            "num_tokens": perplexity[protocols[0]].num_tokens, "info": info, "topics": topics}


def _coherence(topics, mode):
    from tfktopic.evaluation import npmi_coherence

    return npmi_coherence(topics, counts=_reference_counts(mode))


@functools.lru_cache(maxsize=None)
def _lda_coherence(mode):
    data = _data(mode)
    lda = _lda(mode)
    distribution = lda.get_topics()
    ids = np.argsort(-distribution, axis=1, kind="stable")[:, :20]
    topics = [[data["topic"].words[i] for i in row] for row in ids]
    return _coherence(topics, mode), topics


def _quality(name, mode):
    cfg, data = SETTINGS[mode], _data(mode)
    size = {k: cfg[k] for k in ("embedding_dim", "hidden_dim", "num_topics", "dropout",
                                "batch_size", "epochs", "patience", "learning_rate",
                                "clipnorm", "max_len", "context_len")}
    base = _result("lstm", mode)
    doc = _result("doc_lstm", mode) if name != "lstm" else None
    mine = base if name == "lstm" else (doc if name == "doc_lstm" else _result(name, mode))
    config = {**size, **data["description"], **mine["info"], "num_tokens": mine["num_tokens"]}
    if name == "lda_lstm":
        config["lda_passes"] = cfg["lda_passes"]
    records = []
    base_ppl = base["perplexity"]["preceding"]
    for protocol, value in mine["perplexity"].items():
        records.append(record("quality", name, "perplexity", value, "lstm", base_ppl,
                              protocol=protocol, dataset="apnews",
                              config={**config, "protocol_note": PROTOCOLS[protocol]}))
    if name not in ("lstm", "doc_lstm"):
        records.append(record("quality", name, "perplexity", mine["perplexity"]["preceding"],
                              "doc_lstm", doc["perplexity"]["document"], protocol="preceding",
                              dataset="apnews",
                              config={**config, "protocol_note": PROTOCOLS["preceding"],
                                      "baseline_protocol": PROTOCOLS["document"]}))
    coherence_protocol = ("NPMI (Lau et al. windows of 20, zero rule), mean of top-5/10/15/20; "
                          "reference corpus: the whole APNEWS file (2,000 documents)")
    lda_result, lda_topics = (_lda_coherence(mode) if name in TOPIC_MODELS + ("lda_lstm",)
                              else (None, None))
    if name == "lda_lstm":
        records.append(record("quality", "lda", "npmi", lda_result.mean,
                              protocol=coherence_protocol, dataset="apnews", config={
                                  "num_topics": cfg["num_topics"], "passes": cfg["lda_passes"],
                                  "per_cardinality": lda_result.to_dict()["per_cardinality"],
                                  "topics_top10": [t[:10] for t in lda_topics],
                                  "note": "gensim LdaModel on the training documents = the "
                                          "LDA inside lda_lstm"}))
    if name in TOPIC_MODELS:
        result = _coherence(mine["topics"], mode)
        records.append(record("quality", name, "npmi", result.mean, "lda", lda_result.mean,
                              protocol=coherence_protocol, dataset="apnews", config={
                                  "num_topics": cfg["num_topics"],
                                  "per_cardinality": result.to_dict()["per_cardinality"],
                                  "topics_top10": [list(t[:10]) for t in mine["topics"]]}))
    return records


SPEED = {name: functools.partial(_measure_speed, name) for name in MODELS}
QUALITY = {name: functools.partial(_quality, name) for name in MODELS}
