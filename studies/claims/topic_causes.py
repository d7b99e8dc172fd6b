"""Why the topic-guided models' topics are less coherent than LDA's (issue 14): the experiments.

Each experiment trains through `tfktopic.runs` (the package's data path: APNEWS,
``--format tdlm``, Mallet's stop list, ``min_doc_freq=5``, ``max_freq_fraction=0.001``,
split seed 0, the ``medium`` presets unless an experiment overrides a setting) and
writes one JSON under ``studies/results/topics/<name>.json``: its settings, NPMI
(`tfktopic.runs.reports.topic_quality`: top 10 words, reference = the run's training
split) and diversity (top 25) after every evaluation point, the same-K gensim LDA's
(`tfktopic.runs.reports.lda_topics` on the same training split), the steps, the seconds
and, when the LM is trained, its validation and test perplexity (leak-free
``preceding`` contexts). An experiment whose JSON exists is skipped (resumable).

Kinds of experiment:

* ``lda`` -- the baseline.
* ``tcnlm_ntm`` -- TCNLM's neural topic model (encoder, Gaussian softmax, decoder,
  diversity regulariser) trained WITHOUT the LM on the training contexts' bags of words,
  with the joint objective's scaling (per LM token of the batch) minus the LM term.
* ``topicrnn_tm`` -- TopicRNN's inference network and topic bias B trained without the
  RNN: p(w | theta) = softmax over content words of (b + B^T theta), b the output
  layer's bias of the content words (what the RNN's V h_t would add is left out).
* ``tcnlm`` / ``topicrnn`` -- the joint model, NPMI after every epoch.
* ``gbn_tm`` / ``rgbn_tm`` -- GBN-RNN's / rGBN-RNN's topic model alone (1 layer,
  K = 100 unless overridden): the Weibull encoder trained by Adam on its part of eq. 7
  (Poisson likelihood + KL), then TLASGR-MCMC on Phi (and Pi) with the same theta
  samples, as in the joint `train_step` but without the LM; ``sweeps`` updates a batch.
* ``gbn`` / ``rgbn`` -- the joint (r)GBN-RNN (1 layer), NPMI of layer 1 every epoch.
* ``recorded`` -- the top-10 topics recorded by the medium topic-model benchmark
  (``benchmarks/results/medium/quality_topic_models.json``: the same data, preset and
  6 epochs), re-rated with the NPMI rule above; diversity over their top 10 only, for
  the model and the LDA alike.

Usage (one process at a time on the shared machine)::

    TF_NUM_INTEROP_THREADS=1 TF_NUM_INTRAOP_THREADS=1 \\
        python -m studies.claims.topic_causes [NAME ...]      # default: every experiment
    python -m studies.claims.topic_causes --list
"""

import argparse
import json
import math
import time

import numpy as np

from studies.common import REPO_ROOT, portable, shared_file
from tfktopic import runs
from tfktopic.runs.reports import lda_topics, topic_quality

RESULTS = REPO_ROOT / "studies" / "results" / "topics"
CORPUS, STOPWORDS = "apnews/apnews.txt", "stopwords/mallet_en.txt"
#: The study's data rules (studies/study/protocol.py), so the numbers are comparable with it.
DATA_RULES = {"min_doc_freq": 5, "max_freq_fraction": 0.001}
SPLIT_SEED = 0
BATCH = 64
MEDIUM_RECORDS = "benchmarks/results/medium/quality_topic_models.json"
GBN_MODELS = ("gbn_rnn", "rgbn_rnn")

# name -> (kind, settings overrides, options). Epochs count passes over the training
# sentence windows (420 batches of 64 on the APNEWS split).
EXPERIMENTS = {
    "lda": ("lda", {}, {}),
    "tcnlm_ntm": ("tcnlm_ntm", {}, {"epochs": 6}),
    "tcnlm_ntm_lr1e-2": ("tcnlm_ntm", {"learning_rate": 1e-2}, {"epochs": 6}),
    "tcnlm_ntm_div0": ("tcnlm_ntm", {"diversity_weight": 0.0}, {"epochs": 6}),
    "tcnlm_ntm_klwarm": ("tcnlm_ntm", {"kl_warmup_steps": 1260}, {"epochs": 6}),
    "tcnlm_ntm_log1p": ("tcnlm_ntm", {"bow_normalization": "log1p"}, {"epochs": 6}),
    "tcnlm_ntm_lda": ("tcnlm_ntm", {"decoder_init": "lda"}, {"epochs": 6}),
    "tcnlm_ntm_lr5e-4": ("tcnlm_ntm", {"learning_rate": 5e-4}, {"epochs": 6}),
    "tcnlm_ntm_div1": ("tcnlm_ntm", {"diversity_weight": 1.0}, {"epochs": 6}),
    "tcnlm_ntm_long": ("tcnlm_ntm", {}, {"epochs": 20}),
    # The same as tcnlm_ntm / tcnlm_ntm_lda, run again for the KL and topic-use records.
    "tcnlm_ntm_rerun": ("tcnlm_ntm", {}, {"epochs": 6}),
    "tcnlm_ntm_lda_rerun": ("tcnlm_ntm", {"decoder_init": "lda"}, {"epochs": 6}),
    "tcnlm_ntm_none": ("tcnlm_ntm", {"bow_normalization": "none"}, {"epochs": 6}),
    "tcnlm_ntm_log1p_div0": ("tcnlm_ntm", {"bow_normalization": "log1p",
                                           "diversity_weight": 0.0}, {"epochs": 6}),
    "tcnlm": ("tcnlm", {}, {"epochs": 6}),
    "tcnlm_coherent": ("tcnlm", {"preset": "coherent"}, {}),
    "tcnlm_medium_recorded": ("recorded", {}, {}),
    "topicrnn_medium_recorded": ("recorded", {}, {}),
    "topicrnn_tm": ("topicrnn_tm", {}, {"epochs": 6}),
    "topicrnn_tm_lda": ("topicrnn_tm", {"decoder_init": "lda"}, {"epochs": 6}),
    "topicrnn": ("topicrnn", {}, {"epochs": 6}),
    "topicrnn_lda": ("topicrnn", {"decoder_init": "lda"}, {"epochs": 6}),
    "topicrnn_klwarm": ("topicrnn", {"kl_warmup_steps": 1260}, {"epochs": 6}),
    # GBN-RNN / rGBN-RNN (1 layer, K = 100, batches of 8 chunks: 483 steps an epoch): the
    # topic model alone (Weibull encoder + TLASGR Phi), one factor at a time.
    "gbn_tm": ("gbn_tm", {}, {"epochs": 6}),
    "gbn_tm_long": ("gbn_tm", {}, {"epochs": 30}),
    "gbn_tm_sweeps4": ("gbn_tm", {}, {"epochs": 6, "sweeps": 4}),
    "gbn_tm_tau1000": ("gbn_tm", {"tlasgr": {"step_size_tau": 1000.0}}, {"epochs": 6}),
    "gbn_tm_decay0.5": ("gbn_tm", {"tlasgr": {"step_size_decay": 0.5}}, {"epochs": 6}),
    "rgbn_tm": ("rgbn_tm", {}, {"epochs": 6}),
    "gbn_tm_eta0.01": ("gbn_tm", {"tlasgr": {"phi_prior": 0.01}}, {"epochs": 6}),
    "gbn_tm_eta1": ("gbn_tm", {"tlasgr": {"phi_prior": 1.0}}, {"epochs": 6}),
    "gbn_tm_lr5e-4": ("gbn_tm", {"learning_rate": 5e-4}, {"epochs": 6}),
    "gbn_tm_eps0.1": ("gbn_tm", {"tlasgr": {"step_size": 0.1}}, {"epochs": 6}),
    "gbn_tm_decay1": ("gbn_tm", {"tlasgr": {"step_size_decay": 1.0}}, {"epochs": 6}),
    "gbn_tm_lda": ("gbn_tm", {"decoder_init": "lda"}, {"epochs": 6}),
    "rgbn_tm_lda": ("rgbn_tm", {"decoder_init": "lda"}, {"epochs": 6}),
    # The LDA start with smaller TLASGR steps (eps_0 = 1 makes the first update replace
    # Phi by one mini-batch's estimate).
    "gbn_tm_lda_eps0.1": ("gbn_tm", {"decoder_init": "lda", "tlasgr": {"step_size": 0.1}},
                          {"epochs": 6}),
    "gbn_tm_lda_eps0.02": ("gbn_tm", {"decoder_init": "lda", "tlasgr": {"step_size": 0.02}},
                           {"epochs": 6}),
    "rgbn_tm_coherent": ("rgbn_tm", {"preset": "coherent"}, {"epochs": 6}),
    # The joint models (medium, 1 layer = the study's gbn_rnn_1 / rgbn_rnn_1), NPMI per epoch.
    # 4 epochs (as the medium benchmark's recorded runs) to fit the shared CPU.
    "gbn_rnn": ("gbn", {}, {"epochs": 4}),
    "gbn_rnn_coherent": ("gbn", {"preset": "coherent"}, {"epochs": 4}),
    "rgbn_rnn": ("rgbn", {}, {"epochs": 4}),
    "rgbn_rnn_coherent": ("rgbn", {"preset": "coherent"}, {"epochs": 4}),
}


def _settings(model, overrides):
    overrides = dict(overrides)
    preset = overrides.pop("preset", "medium")
    settings = runs.preset_settings(model, preset)
    runs.apply_overrides(settings, {"stopwords": str(shared_file(STOPWORDS)), **DATA_RULES,
                                    **overrides})
    return settings


def _data(settings):
    return runs.prepare_data(settings, str(shared_file(CORPUS)), format="tdlm",
                             seed=SPLIT_SEED)


_LDA = {}


def _lda_quality(data, num_topics):
    key = (num_topics, len(data.topic_vocab))
    if key not in _LDA:
        train = data.parts["train"]
        topics = lda_topics(train, data.topic_vocab, num_topics, SPLIT_SEED)
        _LDA[key] = {**topic_quality(topics, train), "near_duplicates": near_duplicates(topics)}
    return _LDA[key]


def _quality(model, data, step, seconds):
    topics = model.topics(25, data.topic_vocab)   # (r)GBN-RNN: layer 1
    quality = topic_quality(topics, data.parts["train"])
    return {"step": int(step), "seconds": round(seconds, 1), "npmi": quality["npmi"],
            "diversity": quality["diversity"], "near_duplicates": near_duplicates(topics)}


def _topic_only(kind, settings, data, epochs, log):
    """Train only the topic part of a freshly built model; NPMI after every epoch."""
    import keras
    import tensorflow as tf

    from tfktopic.layers.topic_decoder import topic_diversity

    model = runs.build_model(settings, data, seed=0, compile=False)
    optimizer = keras.optimizers.Adam(settings["training"]["learning_rate"],
                                      clipnorm=settings["training"].get("clipnorm"))
    if kind == "tcnlm_ntm":
        weights = model.topic_model.trainable_weights

        def loss_fn(batch, step):
            t, kl, log_lik = model.topic_model(batch["context_bow"], training=True)
            tokens = tf.maximum(tf.reduce_sum(batch["mask"]), 1.0)
            div = topic_diversity(model.topic_model.decoder.beta())
            return ((-tf.reduce_sum(log_lik) + model.kl_weight(step) * tf.reduce_sum(kl))
                    / tokens - model.diversity_weight * div), tf.reduce_mean(kl)
    else:
        content = np.flatnonzero(model.lm_to_topic >= 0)
        order = np.argsort(model.lm_to_topic[content])   # content LM ids in topic-id order
        content_ids = tf.constant(content[order], tf.int32)
        bias = model.gate.projection.bias
        weights = model.encoder.trainable_weights + [model.gate.topic_word, bias]

        def loss_fn(batch, step):
            bow = batch["context_bow"]
            theta, mean, log_std = model.encoder(bow, training=True)
            logits = tf.gather(bias, content_ids)[None] + tf.matmul(theta, model.gate.topic_word)
            nll = -tf.reduce_sum(bow * tf.nn.log_softmax(logits, axis=-1))
            kl = model.encoder.kl(mean, log_std)
            return ((nll + tf.reduce_sum(kl)) / tf.maximum(tf.reduce_sum(batch["mask"]), 1.0),
                    tf.reduce_mean(kl))

    @tf.function
    def train_step(batch, step):
        with tf.GradientTape() as tape:
            loss, kl = loss_fn(batch, step)
        optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
        return loss, kl

    initial = np.array(model.topic_word_matrix())
    start, step, curve = time.time(), 0, []
    curve.append(_quality(model, data, 0, 0.0))
    for epoch in range(int(epochs)):
        kls = []
        for batch in data.dataset("train", BATCH, shuffle=True, seed=epoch):
            loss, kl = train_step(batch, tf.constant(step, tf.float32))
            kls.append(float(kl))
            step += 1
        # kl: the epoch's mean KL(q(theta | d) || p(theta)) per context (0 = posterior collapse).
        curve.append({**_quality(model, data, step, time.time() - start), "loss": float(loss),
                      "kl": float(np.mean(kls))})
        log(f"  epoch {epoch + 1}: {curve[-1]}")
    return {"curve": curve, "steps": step, "seconds": round(time.time() - start, 1),
            "topics_top10": model.topics(10, data.topic_vocab),
            **_topic_use(kind, model, data, initial)}


def near_duplicates(topics, top_n=10, shared=5):
    """Pairs of topics sharing at least `shared` of their top `top_n` words."""
    heads = [set(t[:top_n]) for t in topics]
    return sum(len(a & b) >= shared for i, a in enumerate(heads) for b in heads[i + 1:])


def _gbn_topic_only(settings, data, epochs, log, sweeps=1):
    """Train only the (r)GBN topic model of a freshly built (r)GBN-RNN: the Weibull
    encoder by Adam on its part of eq. 7 (tm_weight x (-log p(d | Phi theta) + KL)),
    then TLASGR-MCMC on Phi (and Pi) with the same theta samples (Algorithm 1),
    `sweeps` augment-and-update steps per batch. NPMI of layer 1 after every epoch."""
    import keras
    import tensorflow as tf

    from tfktopic.models.rgbn.prior import rgbn_elbo_terms

    model = runs.build_model(settings, data, seed=0, compile=False)
    optimizer = keras.optimizers.Adam(settings["training"]["learning_rate"],
                                      clipnorm=settings["training"].get("clipnorm"))
    weights = model.encoder.trainable_weights
    topics = model.topic_model

    @tf.function
    def train_step(batch):
        bow = tf.cast(batch["context_bow"], tf.float32)
        sentences = tf.cast(tf.reduce_sum(batch["mask"], -1) > 0, tf.float32)
        with tf.GradientTape() as tape:
            thetas, ks, lams = model.encoder(bow, training=True)
            log_lik, kls = rgbn_elbo_terms(bow, thetas, ks, lams, topics, sentences)
            tm_nll = -tf.reduce_mean(log_lik)
            kl = sum(w * tf.reduce_mean(k) for w, k in zip(model.kl_weights, kls))
            loss = model.tm_weight * (tm_nll + kl)
        optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
        thetas = [tf.stop_gradient(t) for t in thetas]
        for _ in range(int(sweeps)):
            topics.update(bow, thetas)
        return tm_nll, sum(tf.reduce_mean(k) for k in kls)

    batch_size = int(settings["training"]["batch_size"])
    start, step, curve = time.time(), 0, [_quality(model, data, 0, 0.0)]
    for epoch in range(int(epochs)):
        nlls, kls = [], []
        for batch in data.dataset("train", batch_size, shuffle=True, seed=epoch):
            nll, kl = train_step(batch)
            nlls.append(float(nll))
            kls.append(float(kl))
            step += 1
        # tm_nll / kl: the epoch's mean -log p(d | Phi theta) and KL per document chunk.
        curve.append({**_quality(model, data, step, time.time() - start),
                      "tm_nll": float(np.mean(nlls)),
                      "kl": float(np.mean(kls))})
        log(f"  epoch {epoch + 1}: {curve[-1]}")
    return {"curve": curve, "steps": step, "seconds": round(time.time() - start, 1),
            "topics_top10": model.topics(10, data.topic_vocab)}


def _topic_use(kind, model, data, initial):
    """How much each topic is used and moved: dead topics keep their initial top words.

    Returns ``topic_usage`` (mean topic proportion t_k over the training contexts,
    TCNLM; TopicRNN: mean |theta_k|), sorted descending, ``topics_moved`` (topics
    whose top-10 words changed from the initialisation's) and ``row_change`` (per
    topic, the L1 distance of its word distribution from the initial one).
    """
    rows = []
    for batch in data.dataset("train", 256, shuffle=False):
        if kind == "tcnlm_ntm":
            rows.append(np.asarray(model.topic_proportions(batch["context_bow"])))
        else:
            rows.append(np.abs(np.asarray(model.topic_proportions(batch["context_bow"]))))
    usage = np.concatenate(rows).mean(axis=0)

    def distribution(matrix):
        matrix = np.asarray(matrix, np.float64)
        if kind != "tcnlm_ntm":   # TopicRNN's B holds logits
            matrix = np.exp(matrix - matrix.max(axis=1, keepdims=True))
        return matrix / matrix.sum(axis=1, keepdims=True)

    before, after = distribution(initial), distribution(model.topic_word_matrix())
    top = lambda m: [set(np.argsort(-row)[:10]) for row in m]
    moved = sum(a != b for a, b in zip(top(before), top(after)))
    return {"topic_usage": sorted(usage.tolist(), reverse=True), "topics_moved": int(moved),
            "row_change": np.abs(after - before).sum(axis=1).round(4).tolist()}


def _joint(name, settings, data, log):
    """Train the whole model as `tfktopic train` does; NPMI and val ppl after every epoch."""
    import keras

    model = runs.build_model(settings, data, seed=0)
    start, curve = time.time(), []
    steps = data.steps("train", int(settings["training"]["batch_size"]))

    class Quality(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            point = _quality(model, data, (epoch + 1) * steps, time.time() - start)
            point["val_ppl"] = float(logs.get("val_ppl", math.nan))
            point["train_ppl"] = float(logs.get("ppl", math.nan))
            if "kl" in logs:   # TCNLM: per sentence; TopicRNN: per token
                point["kl"] = float(logs["kl"])
            curve.append(point)
            log(f"  epoch {epoch + 1}: {point}")

    curve.append(_quality(model, data, 0, 0.0))
    runs.fit_model(model, data, settings, callbacks=[Quality()], verbose=0, seed=0)
    seconds = time.time() - start
    test, _ = runs.score_perplexity(name, model, data.parts["test"], data.lm_vocab,
                                    data.topic_vocab, data.data)
    return {"curve": curve, "steps": int(settings["training"]["epochs"]) * steps,
            "seconds": round(seconds, 1), "test_ppl": float(test.perplexity),
            "test_ppl_protocol": "preceding (leak-free), last epoch's weights",
            "topics_top10": model.topics(10, data.topic_vocab)}


def _recorded(model, data, num_topics):
    """The medium benchmark's recorded top-10 topics and test perplexity, NPMI re-rated."""
    records = json.loads((REPO_ROOT / MEDIUM_RECORDS).read_text())
    topics = next(r for r in records if r["model"] == model and r["metric"] == "npmi")
    ppl = next(r for r in records if r["model"] == model and r["metric"] == "perplexity"
               and r["protocol"] == "preceding")
    train = data.parts["train"]
    ours = topic_quality(topics["config"]["topics_top10"], train)
    lda10 = topic_quality(lda_topics(train, data.topic_vocab, num_topics, SPLIT_SEED, top_n=10),
                          train)
    return {"source": MEDIUM_RECORDS, "npmi": ours["npmi"], "diversity": ours["diversity"],
            "diversity_top_n": ours["diversity_top_n"], "lda_diversity_top10": lda10["diversity"],
            "npmi_over_lda": None, "test_ppl": ppl["value"],
            "test_ppl_protocol": "preceding (leak-free), best of 6 epochs (= epoch 6)",
            "seconds": ppl["config"]["train_seconds"], "steps": 6 * data.steps("train", BATCH),
            "topics_top10": topics["config"]["topics_top10"]}


def run_experiment(name, log=print):
    """Run one experiment of `EXPERIMENTS` unless its JSON exists; returns the record."""
    path = RESULTS / f"{name}.json"
    if path.exists():
        log(f"{name}: {path} exists, skipped")
        return json.loads(path.read_text())
    kind, overrides, options = EXPERIMENTS[name]
    model = {"tcnlm_ntm": "tcnlm", "topicrnn_tm": "topicrnn", "lda": "tcnlm",
             "recorded": name.split("_")[0], "gbn_tm": "gbn_rnn", "rgbn_tm": "rgbn_rnn",
             "gbn": "gbn_rnn", "rgbn": "rgbn_rnn"}.get(kind, kind)
    overrides = dict(overrides)
    if "epochs" in options:
        overrides["epochs"] = options["epochs"]
    if model in GBN_MODELS:
        overrides.setdefault("num_layers", 1)   # the study's gbn_rnn_1 / rgbn_rnn_1 arms
    settings = _settings(model, overrides)
    data = _data(settings)
    num_topics = int(settings["model"]["topic_sizes"][0] if model in GBN_MODELS
                     else settings["model"]["num_topics"])
    log(f"{name}: {kind}, {data.describe()}")
    start = time.time()
    lda = _lda_quality(data, num_topics)
    result = {"experiment": name, "kind": kind, "model": model, "overrides": overrides,
              "settings": settings, "data": data.describe(),
              "lda": {"npmi": lda["npmi"], "diversity": lda["diversity"],
                      "num_topics": num_topics, "near_duplicates": lda["near_duplicates"]}}
    if kind == "lda":
        result.update({"npmi": lda["npmi"], "diversity": lda["diversity"],
                       "seconds": round(time.time() - start, 1)})
    elif kind == "recorded":
        result.update(_recorded(model, data, num_topics))
        result["npmi_over_lda"] = result["npmi"] / lda["npmi"]
    else:
        if kind in ("tcnlm_ntm", "topicrnn_tm"):
            result.update(_topic_only(kind, settings, data, options["epochs"], log))
        elif kind in ("gbn_tm", "rgbn_tm"):
            result.update(_gbn_topic_only(settings, data, options["epochs"], log,
                                          sweeps=options.get("sweeps", 1)))
            result["sweeps"] = options.get("sweeps", 1)
        else:
            result.update(_joint(model, settings, data, log))
        final = result["curve"][-1]
        result.update({"npmi": final["npmi"], "diversity": final["diversity"],
                       "npmi_over_lda": final["npmi"] / lda["npmi"],
                       "best_npmi": max(p["npmi"] for p in result["curve"])})
    result["protocol"] = ("NPMI: top 10 words, reference = the training split "
                          "(tfktopic.runs.reports.topic_quality); diversity: top 25")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(portable(json.loads(json.dumps(result, default=str))),
                               indent=1) + "\n")
    log(f"{name}: NPMI {result['npmi']:.4f} (LDA {lda['npmi']:.4f}), diversity "
        f"{result['diversity']:.3f} (LDA {lda['diversity']:.3f}) -> {path}")
    return result


def table():
    """A markdown table of every recorded experiment (for causes.md)."""
    lines = ["| experiment | kind | changed settings | steps | NPMI (best) | diversity | "
             "LDA NPMI / div. | NPMI / LDA | mean KL | test ppl |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in EXPERIMENTS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        changed = ", ".join(f"{k}={v}" for k, v in r["overrides"].items() if k != "epochs")
        best = f" ({r['best_npmi']:.4f})" if "best_npmi" in r else ""
        kl = r.get("curve", [{}])[-1].get("kl")
        div = f"{r['diversity']:.3f}" + (" (top 10)" if r.get("diversity_top_n") == 10 else "")
        lda_div = r.get("lda_diversity_top10") if r.get("diversity_top_n") == 10 else \
            r["lda"]["diversity"]
        lines.append(
            f"| {name} | {r['kind']} | {changed or '-'} | {r.get('steps', '-')} | "
            f"{r['npmi']:.4f}{best} | {div} | {r['lda']['npmi']:.4f} / {lda_div:.3f} | "
            f"{r.get('npmi_over_lda') or 1.0:.2f} | {'-' if kl is None else f'{kl:.1f}'} | "
            f"{r['test_ppl']:.2f} |" if "test_ppl" in r else
            f"| {name} | {r['kind']} | {changed or '-'} | {r.get('steps', '-')} | "
            f"{r['npmi']:.4f}{best} | {div} | {r['lda']['npmi']:.4f} / {lda_div:.3f} | "
            f"{r.get('npmi_over_lda') or 1.0:.2f} | {'-' if kl is None else f'{kl:.1f}'} | - |")
    return "\n".join(lines)


def gbn_table():
    """The (r)GBN experiments as a markdown table: NPMI per epoch, diversity,
    near-duplicate topic pairs, the fit of the bags of words and perplexity."""
    lines = ["| experiment | kind | changed settings | steps | NPMI per epoch (start first) | "
             "NPMI / LDA | diversity | near-dup. pairs | -log p(d) / chunk | test ppl |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, (kind, _, _) in EXPERIMENTS.items():
        path = RESULTS / f"{name}.json"
        if kind not in ("gbn_tm", "rgbn_tm", "gbn", "rgbn") or not path.exists():
            continue
        r = json.loads(path.read_text())
        changed = ", ".join(f"{k}={v}" for k, v in r["overrides"].items()
                            if k not in ("epochs", "num_layers"))
        if r.get("sweeps", 1) != 1:
            changed = ", ".join(filter(None, [changed, f"sweeps={r['sweeps']}"]))
        curve = r["curve"]
        nll = curve[-1].get("tm_nll")
        npmis = " ".join(f"{point['npmi']:.3f}" for point in curve)
        nll = "-" if nll is None else f"{nll:.0f}"
        ppl = f"{r['test_ppl']:.2f}" if "test_ppl" in r else "-"
        lines.append(
            f"| {name} | {kind} | {changed or '-'} | {r['steps']} | {npmis} | "
            f"{r['npmi_over_lda']:.2f} | {r['diversity']:.3f} | "
            f"{curve[-1].get('near_duplicates', '-')} | {nll} | {ppl} |")
    return "\n".join(lines)


def document_frequencies(names):
    """Median training-document frequency of the recorded top-10 words of experiments, and
    the share of them in at most 10 of the 1,600 training documents (LDA first)."""
    import collections

    settings = _settings("tcnlm", {})
    data = _data(settings)
    counts = collections.Counter()
    for document in data.parts["train"]:
        counts.update({w for sentence in document for w in sentence})

    def stat(topics):
        values = np.array([counts[w] for t in topics for w in t[:10]])
        return float(np.median(values)), float(np.mean(values <= 10))

    rows = {"lda": stat(lda_topics(data.parts["train"], data.topic_vocab, 50, SPLIT_SEED,
                                   top_n=10))}
    for name in names:
        path = RESULTS / f"{name}.json"
        if path.exists() and "topics_top10" in json.loads(path.read_text()):
            rows[name] = stat(json.loads(path.read_text())["topics_top10"])
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="experiments (default: all)")
    parser.add_argument("--list", action="store_true", help="list the experiments")
    parser.add_argument("--table", action="store_true",
                        help="print the markdown table of the recorded experiments")
    parser.add_argument("--gbn-table", action="store_true",
                        help="print the markdown table of the recorded (r)GBN experiments")
    parser.add_argument("--df", action="store_true",
                        help="document frequency of the recorded top words (rare-word check)")
    args = parser.parse_args(argv)
    if args.df:
        for name, (median, rare) in document_frequencies(args.names or EXPERIMENTS).items():
            print(f"{name:<26} median document frequency {median:6.1f}, "
                  f"in <= 10 documents: {rare:.1%}")
        return
    if args.table:
        print(table())
        return
    if args.gbn_table:
        print(gbn_table())
        return
    if args.list:
        for name, (kind, overrides, options) in EXPERIMENTS.items():
            print(f"{name:<22} {kind:<12} {overrides} {options}")
        return
    unknown = [n for n in args.names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {', '.join(unknown)}; see --list")
    for name in args.names or list(EXPERIMENTS):
        run_experiment(name, log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
