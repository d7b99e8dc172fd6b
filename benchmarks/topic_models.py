"""Speed and quality of the topic-guided LMs against the LSTM baselines (DESIGN.md §7).

Models (DESIGN §7 names): ``lstm`` (sentence-level `LSTMLanguageModel`, the papers'
"basic-LSTM"), ``doc_lstm_chunked`` (document-level, state carried across sentences; Zheng,
Vafa & Blei 2023), ``lda_lstm`` (`LDALSTMLanguageModel`), ``topicrnn`` (TopicRNN),
``tcnlm`` (TCNLM, factorised mixture of topic experts) and ``tcnlm_moe`` (TCNLM's
naive mixture of experts, eq. 7). Every model has the same embedding size, hidden
size, vocabulary and batch size.

**Speed** (``SPEED``): training tokens per second (real predicted tokens, padding
excluded) of each model against a plain Keras LSTM LM of the same size: an
`LSTMLanguageModel` whose LSTMs run Keras' own implementation (`use_keras_lstm`; the
package's models run `HoistedLSTM`'s path on a CPU), measured in the same process,
interleaved over a few rounds (the fastest round of each counts, so the ratio is robust
to other processes on the machine); `ratio` = model / keras_lstm (for ``lstm`` itself:
the fast path's speed-up).
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
* ``doc_lstm_chunked`` trains on chunks of 8 windows (`document_dataset`) and is tested with
  each test document as one sequence (state carried over the whole document). It
  predicts exactly the same test tokens as the sentence-level models.
* Perplexity records of every model have baseline ``lstm``; extra records compare the
  context models with ``doc_lstm_chunked`` (a chunked document LSTM; the streamed baseline of
  Zheng et al. is ``doc_lstm``, in studies/study/protocol.py).
* Topic coherence: NPMI (Lau et al.: windows of 20, pairs that never co-occur count 0,
  mean over top-5/10/15/20) of the TopicRNN and TCNLM topics and of gensim's LDA on
  the same training documents, topic vocabulary and number of topics. The reference
  corpus is the package's one rule, `tfktopic.runs.npmi_reference`: the **training
  split** (windows running across the sentences of a document) -- not Wikipedia as in
  the papers, so the numbers are not comparable with TCNLM's Table 4.

Every number goes through `tfktopic.runs` (`prepare_data`, `build_model`,
`fit_model`, `score_perplexity`), the code ``tfktopic train`` runs; this module
keeps only the sizes, the timing, the records and the reporting.

``--quick`` uses a 300-document subset and tiny models (a few minutes); the full mode
uses paper-like sizes (embedding 300, 1 x 600 LSTM, 50 topics, dropout 0.4, batch 64,
10 epochs; TCNLM Table 2 "small") on all 2,000 documents, which takes many hours on a
2-core CPU.
"""

import functools
import sys
import time

import numpy as np

from benchmarks.common import record, reset_peak_rss, shared_file, status_mb, time_train_steps
from tfktopic import runs
from tfktopic.layers.hoisted_lstm import use_keras_lstm

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
MODELS = ("lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn", "tcnlm", "tcnlm_moe")
TOPIC_MODELS = ("topicrnn", "tcnlm", "tcnlm_moe")
#: The `tfktopic.runs` model of each benchmark entry.
RUNS_MODEL = {"lstm": "lstm", "doc_lstm_chunked": "doc_lstm_chunked",
              "lda_lstm": "lda_lstm",
              "topicrnn": "topicrnn", "tcnlm": "tcnlm", "tcnlm_moe": "tcnlm"}


def _log(message):
    print(f"[topic_models] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------ settings
def _settings(name, mode):
    """The `tfktopic.runs` settings of an entry: the mode's shared sizes and data rules."""
    cfg = SETTINGS[mode]
    model = {"embedding_dim": cfg["embedding_dim"], "hidden_dim": cfg["hidden_dim"],
             "dropout": cfg["dropout"]}
    units = cfg["encoder_units"]
    if name == "doc_lstm_chunked":
        model["document_level"] = True
    elif name == "lda_lstm":
        model["num_topics"] = cfg["num_topics"]
    elif name == "topicrnn":
        model.update(num_topics=cfg["num_topics"],
                     **({} if units is None else {"encoder_units": units}))
    elif name in ("tcnlm", "tcnlm_moe"):
        model.update(num_topics=cfg["num_topics"],
                     mixture="moe" if name == "tcnlm_moe" else "factorized",
                     **({} if units is None else {"ntm_units": units}))
    elif name != "lstm":
        raise ValueError(f"unknown model {name!r}; expected one of {MODELS}")
    data = {**runs.DATA_DEFAULTS, "min_count": cfg["min_count"], "max_freq_fraction": 0.001,
            "stopwords": str(shared_file("stopwords/mallet_en.txt")),
            "min_doc_freq": cfg["min_doc_freq"], "max_len": cfg["max_len"],
            "context_len": cfg["context_len"], "sentences_per_chunk": cfg["doc_chunk"]}
    training = {**runs.TRAINING_DEFAULTS, "optimizer": "adam",
                "learning_rate": cfg["learning_rate"], "clipnorm": cfg["clipnorm"],
                "batch_size": cfg["batch_size"], "epochs": cfg["epochs"],
                "lda_passes": cfg["lda_passes"]}
    return {"name": RUNS_MODEL[name], "model": model, "data": data, "training": training}


# --------------------------------------------------------------------------- data
@functools.lru_cache(maxsize=None)
def _data(mode, name="lstm"):
    """`runs.prepare_data` of a mode (cached), with the examples of model `name`."""
    if name != "lstm":
        return _data(mode).for_model(RUNS_MODEL[name])
    cfg = SETTINGS[mode]
    data = runs.prepare_data(_settings("lstm", mode), str(shared_file("apnews/apnews.txt")),
                             format="tdlm", max_documents=cfg["num_documents"], seed=SPLIT_SEED,
                             subset_seed=SPLIT_SEED)
    _log(f"data ({mode}): {data.describe()}")
    return data


def _description(mode):
    """The data part of every record's config."""
    description = _data(mode).describe()
    return {**description, "train_tokens": description["train_targets"],
            "split": f"by document 80/10/10, seed {SPLIT_SEED}",
            "train_context_protocol": TRAIN_PROTOCOL}


@functools.lru_cache(maxsize=None)
def _lda(mode):
    """gensim LDA on the training documents' topic-vocabulary BoW (cached per mode)."""
    from tfktopic.lda import fit_lda

    cfg, data = SETTINGS[mode], _data(mode)
    start = time.perf_counter()
    lda = fit_lda(data.parts["train"], data.topic_vocab, num_topics=cfg["num_topics"],
                  passes=cfg["lda_passes"], seed=0)
    _log(f"gensim LDA: {cfg['num_topics']} topics, {cfg['lda_passes']} passes, "
         f"{time.perf_counter() - start:.1f} s")
    return lda


# ------------------------------------------------------------------------- models


def _build(name, mode):
    """A fresh, compiled model of the benchmark's shared size (`runs.build_model`, seed 0)."""
    return runs.build_model(_settings(name, mode), _data(mode, name), seed=0,
                            lda=_lda(mode) if name == "lda_lstm" else None)


def _num_params(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


# -------------------------------------------------------------------------- speed


def _speed_dataset(name, mode):
    """Unshuffled, fixed-shape batches; the timed steps use the first `speed_steps`."""
    cfg = SETTINGS[mode]
    dataset = _data(mode, name).dataset("train", cfg["batch_size"], shuffle=False,
                                        drop_remainder=True)
    steps = cfg["speed_steps"]
    tokens = [float(np.sum(batch["mask"])) for batch in dataset.take(steps)]
    return dataset, float(np.mean(tokens))


#: The speed baseline's name in the records: the LSTM LM on Keras' own LSTM path.
BASELINE = "keras_lstm"


def _measure_speed(name, mode):
    cfg = SETTINGS[mode]
    steps, rounds = cfg["speed_steps"], cfg["speed_rounds"]
    base_ds, base_tokens = _speed_dataset("lstm", mode)
    model_ds, model_tokens = _speed_dataset(name, mode)
    baseline = _build("lstm", mode)
    use_keras_lstm(baseline)     # the plain Keras LSTM LM, the speed standard
    model = _build(name, mode)
    runs = [(BASELINE, baseline, base_ds), (name, model, model_ds)]
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
    base_time, model_time = min(timings[BASELINE]), min(timings[name])
    base_rate, model_rate = base_tokens / base_time, model_tokens / model_time
    config = {
        **{k: cfg[k] for k in ("embedding_dim", "hidden_dim", "num_topics", "batch_size",
                               "max_len", "speed_steps", "speed_rounds")},
        "lm_vocab": len(_data(mode).lm_vocab), "topic_vocab": len(_data(mode).topic_vocab),
        "seconds_per_step": model_time, "baseline_seconds_per_step": base_time,
        "seconds_per_step_rounds": timings[name], "baseline_rounds": timings[BASELINE],
        "tokens_per_step": model_tokens, "baseline_tokens_per_step": base_tokens,
        "trainable_params": _num_params(model), "baseline_trainable_params": _num_params(baseline),
        "timing": "fastest of interleaved rounds of benchmarks.common.time_train_steps",
    }
    if name == "doc_lstm_chunked":
        config["batch"] = f"{cfg['batch_size'] // cfg['doc_chunk']} documents x " \
                          f"{cfg['doc_chunk']} windows (= the sentence models' windows per step)"
    memory_note = ("peak RSS while this model trained (high-water mark reset before each "
                   "measurement; includes the TF runtime, the data and every model built so far "
                   "in this process)" if reset else
                   "process-wide peak RSS (the high-water mark could not be reset)")
    memory_config = {"lm_vocab": config["lm_vocab"], "batch_size": cfg["batch_size"]}
    return [
        record("speed", name, "tokens_per_s", model_rate, BASELINE, base_rate,
               protocol="training step (forward + backward + Adam), real tokens only",
               dataset="apnews", config=config),
        record("speed", name, "peak_rss_mb", peaks[name], BASELINE, peaks[BASELINE],
               protocol=memory_note, dataset="apnews", config=memory_config),
        record("speed", name, "peak_rss_increase_mb", growth[name], BASELINE, growth[BASELINE],
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
    model = _build(name, mode)
    stop = keras.callbacks.EarlyStopping(monitor="val_ppl", mode="min", patience=cfg["patience"],
                                         restore_best_weights=True)
    start = time.perf_counter()
    history = runs.fit_model(model, _data(mode, name), _settings(name, mode), callbacks=[stop],
                             verbose=0, seed=0)
    seconds = time.perf_counter() - start
    val = history.history["val_ppl"]
    info = {"epochs_run": len(val), "best_epoch": int(np.argmin(val)) + 1,
            "best_valid_ppl": float(np.min(val)), "valid_ppl_per_epoch": [float(v) for v in val],
            "train_seconds": seconds, "trainable_params": _num_params(model)}
    _log(f"{name}: {info['epochs_run']} epochs in {seconds:.0f} s, best valid ppl "
         f"{info['best_valid_ppl']:.2f} (epoch {info['best_epoch']})")
    return model, info


def _test_perplexity(name, model, mode, protocol):
    """`runs.score_perplexity` on the test split ("document": doc_lstm, whole documents)."""
    cfg, data = SETTINGS[mode], _data(mode, name)
    result, examples = runs.score_perplexity(
        RUNS_MODEL[name], model, data.parts["test"], data.lm_vocab, data.topic_vocab,
        data.data, "preceding" if protocol == "document" else protocol,
        batch_size=2 * cfg["batch_size"])
    if result.num_tokens != examples.num_targets:
        raise RuntimeError(f"{name}: scored {result.num_tokens} tokens, expected "
                           f"{examples.num_targets}")
    return result


@functools.lru_cache(maxsize=None)
def _result(name, mode):
    """Test perplexities (per protocol), training info and topics of a trained model."""
    model, info = _train(name, mode)
    if name == "doc_lstm_chunked":
        protocols = ("document",)
    elif name == "lstm":
        protocols = ("preceding",)  # no context: identical under every protocol
    else:
        protocols = ("preceding", "all_other")
    perplexity = {p: _test_perplexity(name, model, mode, p) for p in protocols}
    topics = None
    if model.has_topics:  # every model has `topics()`; only topic models have topics
        topics = model.topics(top_n=20, vocabulary=_data(mode).topic_vocab)
    for p, r in perplexity.items():
        _log(f"{name}: test ppl {r.perplexity:.2f} ({p}, {r.num_tokens} tokens)")
    return {"perplexity": {p: r.perplexity for p, r in perplexity.items()},
            "num_tokens": perplexity[protocols[0]].num_tokens, "info": info, "topics": topics}


def _coherence(topics, mode):
    """NPMI of `topics` against the package's reference (the training split)."""
    from tfktopic.evaluation import npmi_coherence

    return npmi_coherence(topics, counts=_reference_counts(mode))


@functools.lru_cache(maxsize=None)
def _reference_counts(mode):
    """`runs.npmi_reference` for every topic word (cached per mode)."""
    return _data(mode).npmi_reference(_data(mode).topic_vocab.words)


@functools.lru_cache(maxsize=None)
def _lda_coherence(mode):
    data = _data(mode)
    lda = _lda(mode)
    distribution = lda.get_topics()
    ids = np.argsort(-distribution, axis=1, kind="stable")[:, :20]
    topics = data.topic_vocab.decode(ids)
    return _coherence(topics, mode), topics


def _quality(name, mode):
    cfg = SETTINGS[mode]
    size = {k: cfg[k] for k in ("embedding_dim", "hidden_dim", "num_topics", "dropout",
                                "batch_size", "epochs", "patience", "learning_rate",
                                "clipnorm", "max_len", "context_len")}
    base = _result("lstm", mode)
    doc = _result("doc_lstm_chunked", mode) if name != "lstm" else None
    mine = base if name == "lstm" else (doc if name == "doc_lstm_chunked" else _result(name, mode))
    config = {**size, **_description(mode), **mine["info"], "num_tokens": mine["num_tokens"]}
    if name == "lda_lstm":
        config["lda_passes"] = cfg["lda_passes"]
    records = []
    base_ppl = base["perplexity"]["preceding"]
    for protocol, value in mine["perplexity"].items():
        records.append(record("quality", name, "perplexity", value, "lstm", base_ppl,
                              protocol=protocol, dataset="apnews",
                              config={**config, "protocol_note": PROTOCOLS[protocol]}))
    if name not in ("lstm", "doc_lstm_chunked"):
        records.append(record("quality", name, "perplexity", mine["perplexity"]["preceding"],
                              "doc_lstm_chunked", doc["perplexity"]["document"], protocol="preceding",
                              dataset="apnews",
                              config={**config, "protocol_note": PROTOCOLS["preceding"],
                                      "baseline_protocol": PROTOCOLS["document"]}))
    coherence_protocol = ("NPMI (Lau et al. windows of 20, zero rule), mean of top-5/10/15/20; "
                          f"reference corpus: {runs.NPMI_REFERENCE} (tfktopic.runs)")
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
