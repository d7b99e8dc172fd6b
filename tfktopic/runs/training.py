"""`train_run`: train a model into a run directory (resumable)."""

import json
import math
import pathlib

from tfktopic.errors import TfktopicError
from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.runs._io import _jsonable, _say, _write_json
from tfktopic.runs.data import (build_vocabularies, make_dataset, make_examples, read_corpus,
                                resolve_format, score_perplexity, split_corpus,
                                _perplexity_message)
from tfktopic.runs.directory import Run, read_run_config, _load_model
from tfktopic.runs.reports import generate_text, _print_topics
from tfktopic.runs.settings import (CHUNKED_MODELS, GENERATING_MODELS, GENERATION,
                                    HIERARCHICAL_MODELS, OPTIMIZERS, RUN_FORMAT_VERSION, SPLIT,
                                    TOPIC_MODELS, apply_overrides, preset_settings,
                                    _split_override)

# ----------------------------------------------------------------------------- training
def _check_stopwords(data, preset):
    stopwords = data["stopwords"]
    if stopwords not in ("gensim", "none") and not pathlib.Path(str(stopwords)).is_file():
        raise ValueError(f"--stopwords: preset {preset!r} uses the stop list {stopwords!r}, "
                         "which is not a file here; pass --stopwords PATH (e.g. Mallet's "
                         "en.txt) or --stopwords gensim")
    if stopwords not in ("gensim", "none"):
        data["stopwords"] = str(pathlib.Path(str(stopwords)).resolve())


def _load_vectors(path):
    from tfktopic.data.embeddings import load_keyed_vectors, load_word2vec

    path = pathlib.Path(path)
    if not path.exists():
        raise TfktopicError(f"{path}: no such word2vec file (--embeddings)")
    name = path.name.lower()
    if name.endswith((".bin", ".bin.gz", ".txt", ".txt.gz", ".vec", ".vec.gz")):
        return load_word2vec(path)
    try:
        return load_keyed_vectors(path)
    except TfktopicError:
        raise
    except Exception as error:
        raise TfktopicError(f"{path}: neither a word2vec file (.bin/.txt/.vec) nor gensim "
                            f"KeyedVectors saved by convert_word2vec ({type(error).__name__})"
                            ) from None


def _embedding_matrix(path, lm_vocab, settings, explicit_dim, seed, log):
    from tfktopic.data.embeddings import embedding_matrix

    matrix, coverage = embedding_matrix(lm_vocab, _load_vectors(path), seed=seed)
    dim = matrix.shape[1]
    if explicit_dim is not None and int(explicit_dim) != dim:
        raise ValueError(f"--embeddings: {path} holds {dim}-dimensional vectors, but "
                         f"--set embedding_dim={explicit_dim}; drop that override (the "
                         "embedding size follows the vectors) or use vectors of that size")
    previous = settings["model"].get("embedding_dim")
    settings["model"]["embedding_dim"] = dim
    _say(log, f"word2vec {path}: {coverage}; embedding size {dim}"
              + (f" (instead of the preset's {previous})" if previous not in (None, dim) else ""))
    return matrix, str(coverage)


def _build_model(name, settings, lm_vocab, topic_vocab, num_train_chunks, embeddings, seed,
                 train_corpus=None):
    """A new model of `name` with the run's settings (call inside the strategy scope)."""
    model_cfg = dict(settings["model"])
    try:
        if name in ("lstm", "doc_lstm"):
            from tfktopic.models import LSTMLanguageModel

            return LSTMLanguageModel(len(lm_vocab), embeddings=embeddings, **model_cfg)
        if name == "lda_lstm":
            from tfktopic.models.lda_lstm import LDALSTMLanguageModel, fit_lda

            lda = fit_lda(train_corpus, topic_vocab, num_topics=model_cfg.get("num_topics", 50),
                          passes=settings["training"].get("lda_passes", 5), seed=seed,
                          iterations=model_cfg.get("lda_iterations", 50))
            return LDALSTMLanguageModel(len(lm_vocab), len(topic_vocab), lda=lda,
                                        embeddings=embeddings, **model_cfg)
        if name == "topicrnn":
            from tfktopic.models.topicrnn import TopicRNN

            return TopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, embeddings=embeddings,
                            **model_cfg)
        if name == "tcnlm":
            from tfktopic.models.tcnlm import TCNLM

            return TCNLM(len(lm_vocab), len(topic_vocab), embeddings=embeddings, **model_cfg)
        from tfktopic.models.rgbn_rnn import RGBNRNN

        num_layers = model_cfg.pop("num_layers", 3)
        model_cfg.setdefault("seed", seed)
        return RGBNRNN.from_preset(model_cfg, len(lm_vocab), len(topic_vocab),
                                   num_documents=num_train_chunks, num_layers=num_layers,
                                   embeddings=embeddings)
    except TypeError as error:
        raise ValueError(f"--set: a setting is not an argument of {name} ({error})") from None


def _optimizer(name, training, num_train_tokens, seed):
    import keras

    kind = training["optimizer"]
    if kind in ("sgld", "psgld"):  # every model (N = training tokens)
        from tfktopic.bayes.setups import optimizer

        return optimizer(kind, training["learning_rate"], num_examples=num_train_tokens,
                         clipnorm=training.get("clipnorm"), seed=seed)
    if kind != "adam":
        raise ValueError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {kind!r}")
    if name in HIERARCHICAL_MODELS:
        from tfktopic.models.rgbn_rnn import make_optimizer

        return make_optimizer(training)
    return keras.optimizers.Adam(training["learning_rate"], clipnorm=training.get("clipnorm"))


def _signature(config):
    keys = ("model", "preset", "corpus", "format", "max_documents", "seed", "data",
            "model_config", "embeddings_path")
    return _jsonable({k: config.get(k) for k in keys})


def _progress_callback(path, config):
    import keras

    class _Progress(keras.callbacks.Callback):
        """Records finished epochs and the best validation perplexity in run.json."""

        def on_epoch_end(self, epoch, logs=None):
            logs = {k: float(v) for k, v in (logs or {}).items()}
            progress = config.setdefault("progress", {"epochs_done": 0, "best_val_ppl": None,
                                                      "history": []})
            progress["history"] = progress["history"][:epoch] + [{"epoch": epoch + 1, **logs}]
            progress["epochs_done"] = epoch + 1
            val = logs.get("val_ppl")
            if val is not None and math.isfinite(val) and (
                    progress["best_val_ppl"] is None or val < progress["best_val_ppl"]):
                progress["best_val_ppl"] = val
            _write_json(path, config)

    return _Progress()


def train_run(model_name, out, corpus="lee", format=None, preset="small", epochs=None,
              batch_size=None, max_documents=None, stopwords=None, embeddings=None,
              optimizer="adam", learning_rate=None, strategy="none", seed=0, overrides=None,
              verbose=1, log=print):
    """Train a model into a run directory, then score it on the test split.

    Reads the corpus, splits it 80/10/10 by document (seeded), builds the
    vocabularies on the training part, trains with a validation pass every
    epoch (`BackupAndRestore` in ``out/backup``, the best ``val_ppl`` in
    ``out/model.keras``, `TerminateOnNaN`), then reports the test perplexity
    under the leak-free "preceding" protocol next to a unigram model, the
    topics and topic-conditioned sentences, and writes ``results.json``.
    Calling it again with the same arguments resumes an interrupted run (and
    only re-scores a finished one).

    Args:
        model_name: one of `MODELS`.
        out: the run directory.
        corpus: "lee" or a corpus path.
        format: corpus format (inferred for lee, ``*.jsonl.gz``, ``ptb.*``).
        preset: preset of the model's family (`preset_settings`).
        epochs, batch_size, learning_rate: override the preset's.
        max_documents: use only the first N documents.
        stopwords: "gensim", "none" or a stop-list file (default: the preset's).
        embeddings: a word2vec ``.bin`` / ``.txt`` file or converted
            KeyedVectors; the embedding size follows the vectors.
        optimizer: "adam", or "sgld" / "psgld" (every model; the step sizes
            of `tfktopic.bayes.setups`' PTB "small" preset).
        strategy: "none", "mirrored" or "multiworker" (`tfktopic.distribute`).
        seed: split, shuffling and initialisation seed.
        overrides: ``KEY=VALUE`` strings or a dict (`apply_overrides`).
        verbose: Keras `fit` verbosity (1: progress bar, 2: a line per epoch).
        log: callable receiving each output line (`None`: silent).

    Returns:
        The results dict written to ``out/results.json``.

    Example:
    >>> train_run("tcnlm", "runs/lee-tcnlm", epochs=2)          # doctest: +SKIP
    """
    import keras

    from tfktopic.distribute import distribute_dataset, get_strategy
    from tfktopic.version import __version__

    settings = preset_settings(model_name, preset)
    override_items = (list(overrides.items()) if isinstance(overrides, dict)
                      else [_split_override(o) for o in overrides or ()])
    apply_overrides(settings, dict(override_items))
    explicit_dim = dict(override_items).get("embedding_dim")
    training, data = settings["training"], settings["data"]
    if epochs is not None:
        training["epochs"] = int(epochs)
    if batch_size is not None:
        training["batch_size"] = int(batch_size)
    if stopwords is not None:
        data["stopwords"] = stopwords
    training["optimizer"] = optimizer
    if optimizer in ("sgld", "psgld"):
        from tfktopic import presets

        ptb = presets.get("sgmcmc_ptb", "small")
        training["learning_rate"] = ptb["sgd_lr"] if optimizer == "sgld" else ptb["rmsprop_lr"]
        training["clipnorm"] = ptb["clipnorm"]
    if learning_rate is not None:
        training["learning_rate"] = float(learning_rate)
    for key in ("epochs", "batch_size"):
        if int(training[key]) < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {training[key]}")
    _check_stopwords(data, preset)
    if embeddings is not None and not pathlib.Path(embeddings).exists():
        raise TfktopicError(f"{embeddings}: no such word2vec file (--embeddings)")
    format = resolve_format(corpus, format)
    distribution = get_strategy(strategy)

    out = pathlib.Path(out)
    config = {
        "format_version": RUN_FORMAT_VERSION, "tfktopic_version": __version__,
        "model": model_name, "preset": preset,
        "corpus": "lee" if str(corpus) == "lee" else str(pathlib.Path(corpus).resolve()),
        "format": format, "max_documents": max_documents, "seed": int(seed),
        "split": list(SPLIT), "data": data, "training": {**training, "strategy": strategy},
        "embeddings_path": None if embeddings is None else str(pathlib.Path(embeddings).resolve()),
    }
    run_json = out / "run.json"
    previous = None
    if run_json.exists():
        previous = read_run_config(out)

    source = read_corpus(corpus, format, data, max_documents)
    parts = split_corpus(source, seed)
    lm_vocab, topic_vocab = build_vocabularies(parts["train"], data)
    examples = {
        name: make_examples(model_name, part, lm_vocab, topic_vocab, data,
                            protocol="all_other" if name == "train" else "preceding")
        for name, part in parts.items()}
    unit = "chunks" if model_name in CHUNKED_MODELS else "windows"
    _say(log, f"{source.source or corpus}: {len(parts['train'])} / {len(parts['valid'])} / "
              f"{len(parts['test'])} documents (train / valid / test), LM vocabulary "
              f"{len(lm_vocab)}, topic vocabulary {len(topic_vocab)}, "
              f"{len(examples['train'])} training {unit}")
    matrix = None
    if embeddings is not None:
        matrix, coverage = _embedding_matrix(embeddings, lm_vocab, settings, explicit_dim, seed,
                                             log)
        config["embeddings_coverage"] = coverage
    config["model_config"] = _jsonable(settings["model"])
    if previous is not None and _signature(previous) != _signature(config):
        changed = [k for k, v in _signature(config).items() if _signature(previous).get(k) != v]
        raise TfktopicError(f"{run_json}: --out holds another run (different "
                            f"{', '.join(changed)}); use a new --out or delete {out}")
    out.mkdir(parents=True, exist_ok=True)
    lm_vocab.save(out / "lm_vocab.json")
    topic_vocab.save(out / "topic_vocab.json")
    backup = out / "backup"
    resumed = 0
    fresh = {"epochs_done": 0, "best_val_ppl": None, "history": []}
    if (backup / "training_metadata.json").exists():
        try:
            resumed = int(json.loads((backup / "training_metadata.json").read_text())["epoch"])
        except (ValueError, KeyError, TypeError):
            raise TfktopicError(f"{backup / 'training_metadata.json'}: corrupt backup; delete "
                                f"{backup} to train from scratch") from None
        config["progress"] = (previous or {}).get("progress") or fresh
    else:
        config["progress"] = fresh
    config["status"] = "training"
    _write_json(run_json, config)

    batch = int(training["batch_size"])
    datasets = {name: make_dataset(model_name, ex, batch, shuffle=name == "train", seed=seed)
                for name, ex in examples.items() if name != "test"}
    keras.utils.set_random_seed(int(seed))
    with distribution.scope():
        model = _build_model(model_name, settings, lm_vocab, topic_vocab, len(examples["train"]),
                             matrix, int(seed), train_corpus=parts["train"])
        model.compile(optimizer=_optimizer(model_name, training, examples["train"].num_targets,
                                           int(seed)))
        model(next(iter(datasets["valid"])))  # build, so BackupAndRestore can restore weights
    best = config["progress"].get("best_val_ppl") if resumed else None
    callbacks = [
        keras.callbacks.BackupAndRestore(str(backup), delete_checkpoint=False),
        keras.callbacks.ModelCheckpoint(str(out / "model.keras"), monitor="val_ppl",
                                        mode="min", save_best_only=True,
                                        initial_value_threshold=best),
        keras.callbacks.TerminateOnNaN(),
        _progress_callback(run_json, config),
    ]
    total = int(training["epochs"])
    if resumed >= total:
        _say(log, f"{out}: all {total} epochs are done (backup in {backup}); scoring the best "
                  "checkpoint")
    else:
        if resumed:
            _say(log, f"resuming from {backup} after epoch {resumed} of {total}")
        _say(log, f"training {model_name} (preset {preset}) for {total} epochs; checkpoints "
                  f"in {out}")
    model.fit(distribute_dataset(datasets["train"]),
              validation_data=distribute_dataset(datasets["valid"]), epochs=total,
              callbacks=callbacks, verbose=verbose)
    if (out / "model.keras").exists():
        model = _load_model(out / "model.keras")
    if not all(math.isfinite(h.get("loss", 0.0)) for h in config["progress"]["history"]):
        _say(log, "training stopped: the loss became NaN (TerminateOnNaN); the best checkpoint "
                  "before it is scored")

    result, test_examples = score_perplexity(model_name, model, parts["test"], lm_vocab,
                                            topic_vocab, data, "preceding", batch)
    unigram = unigram_perplexity(lm_vocab, test_examples)
    _say(log, "\n" + _perplexity_message(model_name, result))
    _say(log, f"unigram model on the same tokens: {unigram:.2f}")
    summary = {"model": model_name, "preset": preset, "corpus": config["corpus"],
               "test": result.as_dict(), "unigram_ppl": unigram}
    run = Run(model, lm_vocab, topic_vocab, config, out)
    if model_name in TOPIC_MODELS:
        summary["topics"] = _print_topics(run, 10, log)
    if model_name in GENERATING_MODELS:
        _say(log, "\ngenerated sentences (top-k sampling, conditioned on one topic):")
        summary["generated"] = {}
        topics = summary["topics"]
        for k in range(min(3, len(topics))):
            text = generate_text(run, num=1, max_len=25, topic=k, seed=int(seed) + k,
                                 **GENERATION)[0]
            summary["generated"][k] = text
            _say(log, f"  topic {k:>2} ({' '.join(topics[k][:3])}): {text}")
    _write_json(out / "results.json", _jsonable(summary))
    config["status"] = "finished"
    _write_json(run_json, config)
    _say(log, f"\nmodel, vocabularies and results.json written to {out}")
    return summary
