"""Building and training a run's model: `build_model`, `fit_model`, `train_run` (resumable)."""

import dataclasses
import math
import pathlib
import time

from tfktopic.errors import TfktopicError
from tfktopic.models import registry
from tfktopic.runs import checkpoints, stopping
from tfktopic.runs.checks import check_learning_rate, check_setting_keys, vocabulary_record
from tfktopic.runs.data import given_split, perplexity_message, prepare_data, resolve_format
from tfktopic.runs.directory import Run, load_model, read_run_config
from tfktopic.runs.files import jsonable, say, write_json
from tfktopic.runs.lock import locked
from tfktopic.runs.precision import check_precision, precision_policy
from tfktopic.runs.reports import (generate_text, parameter_counts, parameters_message,
                                   print_topics, quality_report)
from tfktopic.runs.settings import (GENERATION, OPTIMIZERS, RUN_FORMAT_VERSION, SPLIT,
                                    apply_overrides, preset_settings, parse_override)
from tfktopic.runs.usage import collapse_note, topic_usage

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
    say(log, f"word2vec {path}: {coverage}; embedding size {dim}"
              + (f" (instead of the preset's {previous})" if previous not in (None, dim) else ""))
    return matrix, str(coverage)


# ------------------------------------------------------------------- model and optimizer
def adam_optimizer(training):
    """The Adam optimizer of a preset's training settings (decay and clipping).

    Args:
        training: dict with ``learning_rate`` (default 1e-3) and optionally
            ``decay_steps`` / ``decay_rate`` (the learning rate times
            ``decay_rate ** (step / decay_steps)``, continuous as rGBN-RNN's
            released code), ``clipnorm`` (per variable), ``global_clipnorm``
            (the norm of all gradients together, as PyTorch's
            ``clip_grad_norm_``) and ``clipvalue`` (element-wise).

    Returns:
        A `keras.optimizers.Adam`.

    Example:
    >>> from tfktopic import presets
    >>> adam_optimizer(presets.preset("rgbn_rnn", "reference_code").training)  # doctest: +SKIP
    """
    import keras

    rate = float(training.get("learning_rate", 1e-3))
    if training.get("decay_steps"):
        rate = keras.optimizers.schedules.ExponentialDecay(
            rate, int(training["decay_steps"]), float(training["decay_rate"]))
    return keras.optimizers.Adam(rate, clipvalue=training.get("clipvalue"),
                                 **clipping(training))


def clipping(training):
    """The norm-clipping arguments of a Keras optimizer: ``clipnorm`` or ``global_clipnorm``.

    Raises:
        ValueError: both are set (Keras clips one way only); names the override to drop.
    """
    clipnorm, global_clipnorm = training.get("clipnorm"), training.get("global_clipnorm")
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError(f"--set global_clipnorm={global_clipnorm}: the settings also clip each "
                         f"variable (clipnorm={clipnorm}); add --set clipnorm=null")
    return {"clipnorm": clipnorm, "global_clipnorm": global_clipnorm}


def build_optimizer(settings, num_train_tokens, seed=0):
    """The optimizer of a run's training settings.

    Args:
        settings: `preset_settings` output (``name``, ``training``: ``optimizer``
            "adam" / "sgld" / "psgld", ``learning_rate``, ``clipnorm``, ...).
        num_train_tokens: training targets (SG-MCMC's dataset size N).
        seed: SG-MCMC noise seed.

    Returns:
        A Keras optimizer: `adam_optimizer` (with the preset's decay and
        clipping) or `tfktopic.bayes.setups.optimizer`.
    """
    training = settings["training"]
    kind = training["optimizer"]
    if kind in ("sgld", "psgld"):  # every model (N = training tokens)
        from tfktopic.bayes.setups import optimizer

        return optimizer(kind, training["learning_rate"], num_examples=num_train_tokens,
                         seed=seed, **clipping(training))
    if kind != "adam":
        raise ValueError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {kind!r}")
    return adam_optimizer(training)


def build_model(settings, data, seed=0, embeddings=None, lda=None, topic_updates=True,
                compile=True):
    """A new model of a run's settings on its prepared data (the one constructor glue).

    Call it inside the distribution strategy's scope. The random seed is set
    (`keras.utils.set_random_seed(seed)`) before the weights are created.

    Args:
        settings: `preset_settings` output (``name``, ``model`` constructor
            arguments, ``training``).
        data: the run's `RunData` (vocabulary sizes, training chunks, the
            training corpus of LDA+LSTM's LDA).
        seed: initialisation seed (rGBN / GBN: also the MCMC seed).
        embeddings: optional [V, E] initial word embeddings.
        lda: lda_lstm: an already fitted gensim `LdaModel` (default: fit
            one on the training split with the settings' topics and passes).
        topic_updates: rGBN / GBN: ``False`` leaves out the TLASGR-MCMC update
            of Phi and Pi in `train_step` (the speed benchmark's "without
            MCMC" variant, for the MCMC's share of a step).
        compile: compile with `build_optimizer`.

    Returns:
        The Keras model.

    Raises:
        ValueError: a ``--set`` key that is not an argument of the model.
    """
    import keras

    name = settings["name"]
    model_cfg = dict(settings["model"])
    keras.utils.set_random_seed(int(seed))
    with precision_policy(settings["training"].get("precision", "float32")):
        model = registry.build_model(
            name, model_cfg, lm_vocab=data.lm_vocab, topic_vocab=data.topic_vocab,
            num_documents=len(data.examples["train"]), embeddings=embeddings, seed=int(seed),
            train_corpus=data.parts["train"], training=settings["training"], lda=lda)
    if not topic_updates:
        if not registry.get(name).hierarchical:
            raise ValueError(f"topic_updates=False applies to "
                             f"{' and '.join(registry.names('hierarchical'))}, not {name}")
        _skip_topic_updates(model)
    if compile:
        model.compile(optimizer=build_optimizer(settings, data.examples["train"].num_targets,
                                                seed))
    return model


def _skip_topic_updates(model):
    """rGBN / GBN without the TLASGR-MCMC update (timing only).

    The model has no constructor flag for it yet, so the topic layer's
    `update` is replaced on this instance by a no-op; keep this the only
    place that does it (replace it by the model's flag once there is one).
    """
    model.topic_model.update = lambda bow, thetas: {}


def fit_model(model, data, settings, callbacks=(), verbose=1, seed=0, validation=True,
              distribute=None, datasets=None, initial_epoch=0):
    """Train a built model on a run's data: the training split, validated every epoch.

    Args:
        model: from `build_model`.
        data: the run's `RunData`.
        settings: ``training`` gives ``batch_size`` and ``epochs``.
        callbacks: Keras callbacks (checkpoints, early stopping, ...).
        verbose: `fit` verbosity.
        seed: shuffling seed of the training batches.
        validation: validate on the validation split every epoch (``val_ppl``).
        distribute: wraps each dataset (e.g. `tfktopic.distribute.distribute_dataset`).
        datasets: (train, valid) pipelines made earlier (default: made here
            with `RunData.dataset`). A tf.data shuffle seed depends on the
            global seed at the time the pipeline is made, so `train_run` makes
            them before `build_model` seeds, as it always did.
        initial_epoch: epochs already done (a resumed run); the training stream
            skips their batches, so the data order resumes exactly.

    Returns:
        The Keras `History`.
    """
    batch = int(settings["training"]["batch_size"])
    wrap = distribute or (lambda dataset: dataset)
    if datasets is None:
        datasets = (data.dataset("train", batch, shuffle=True, seed=seed),
                    data.dataset("valid", batch, shuffle=False) if validation else None)
    # Epoch k's batches are a function of (seed, k) whether the run starts at 0 or resumes
    # at k (`RunData.training_stream`).
    train, steps = data.training_stream(batch, seed=seed, initial_epoch=int(initial_epoch),
                                        dataset=datasets[0])
    valid = wrap(datasets[1]) if validation else None
    return model.fit(wrap(train), steps_per_epoch=steps, initial_epoch=int(initial_epoch),
                     validation_data=valid, epochs=int(settings["training"]["epochs"]),
                     callbacks=list(callbacks), verbose=verbose, shuffle=False)


def _signature(config):
    keys = ("model", "preset", "corpus", "format", "max_documents", "subset_seed", "seed",
            "data", "model_config", "embeddings_path")
    # run.json written before split_seed (precision) existed: the split followed
    # the seed (float32)
    return jsonable({**{k: config.get(k) for k in keys},
                     "split_seed": config.get("split_seed", config.get("seed")),
                     "precision": (config.get("training") or {}).get("precision", "float32")})


def _progress_callback(path, config):
    import keras

    class _Progress(keras.callbacks.Callback):
        """Records finished epochs (logs, seconds) and the best validation perplexity."""

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            logs = {k: float(v) for k, v in (logs or {}).items()}
            logs["seconds"] = round(time.perf_counter() - getattr(self, "started",
                                                                   time.perf_counter()), 2)
            progress = config.setdefault("progress", {"epochs_done": 0, "best_val_ppl": None,
                                                      "history": []})
            progress["history"] = progress["history"][:epoch] + [{"epoch": epoch + 1, **logs}]
            progress["epochs_done"] = epoch + 1
            val = logs.get("val_ppl")
            if val is not None and math.isfinite(val) and (
                    progress["best_val_ppl"] is None or val < progress["best_val_ppl"]):
                progress["best_val_ppl"] = val
            write_json(path, config)

    return _Progress()


def _override_items(overrides):
    return (list(overrides.items()) if isinstance(overrides, dict)
            else [parse_override(o) for o in overrides or ()])


def resolve_settings(model_name, preset="small", overrides=None, epochs=None, batch_size=None,
                     learning_rate=None, stopwords=None, optimizer="adam", patience=None,
                     precision=None):
    """The settings a run of `train_run` trains with, before any data is read.

    The one resolution of ``tfktopic train``'s options: the preset
    (`preset_settings`), the ``--set`` overrides (`apply_overrides`), then the
    options that name a setting (``--epochs``, ``--batch-size``,
    ``--stopwords``, ``--optimizer`` with its SG-MCMC step size,
    ``--learning-rate``, ``--patience``, ``--precision``), checked. Data rules given for a
    corpus size (``min_doc_freq``) are resolved later, on the training split
    (`tfktopic.runs.data.prepare_data`).

    Args:
        model_name, preset, overrides, epochs, batch_size, learning_rate,
            stopwords, optimizer, patience, precision: as in `train_run`
            (``precision`` is recorded only when given; absent means float32).

    Returns:
        dict with ``name``, ``model`` (constructor arguments), ``data`` and
        ``training`` (a stop-list file made absolute).

    Raises:
        ValueError / TfktopicError: an unknown preset or ``--set`` key, a bad
            value (the message names the option).

    Example:
    >>> resolve_settings("rgbn_rnn", "medium", ["num_layers=1"])["model"]["num_layers"]
    1
    """
    settings = preset_settings(model_name, preset)
    override_items = _override_items(overrides)
    apply_overrides(settings, dict(override_items))
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

        ptb = presets.preset("sgmcmc_ptb", "small").training
        training["learning_rate"] = ptb["learning_rates"][optimizer]
        training["clipnorm"] = ptb["clipnorm"]
    if learning_rate is not None:
        training["learning_rate"] = float(learning_rate)
    if patience is not None:
        training["patience"] = int(patience)
    if precision is not None:
        training["precision"] = check_precision(precision)
    if training.get("patience") is not None and int(training["patience"]) < 1:
        raise ValueError(f"--patience must be >= 1, got {training['patience']}")
    check_learning_rate(training.get("learning_rate"))
    check_setting_keys(model_name, [k for k, _ in override_items], settings)
    for key in ("epochs", "batch_size"):
        if int(training[key]) < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {training[key]}")
    _check_stopwords(data, preset)
    return settings


@locked("out")
def train_run(model_name, out, corpus="lee", format=None, preset="small", epochs=None,
              batch_size=None, max_documents=None, stopwords=None, embeddings=None,
              optimizer="adam", learning_rate=None, strategy="none", seed=0, overrides=None,
              verbose=1, log=print, split_seed=None, patience=None, topic_report=True,
              precision=None, callbacks=(), subset_seed=None, prepared=None):
    """Train a model into a run directory, then score it on the test split.

    Reads the corpus, splits it 80/10/10 by document (seeded), builds the
    vocabularies on the training part, trains with a validation pass every
    epoch (the full training state in ``out/backup``, the best ``val_ppl`` in
    ``out/model.keras``, a stop at the first non-finite loss: `checkpoints`;
    ``out`` locked for the call: `lock`), then reports the test perplexity
    under the leak-free "preceding" protocol next to a unigram model, the
    topics and topic-conditioned sentences, and writes ``results.json``.
    Calling it again with the same arguments resumes an interrupted run
    exactly -- the same final weights and test perplexity as without the
    interruption -- (and only re-scores a finished one).

    Args:
        model_name: one of `MODELS`.
        out: the run directory.
        corpus: "lee" or a corpus path.
        format: corpus format (inferred for lee, ``*.jsonl.gz``, ``ptb.*``).
        preset: preset of the model's family (`preset_settings`).
        epochs, batch_size, learning_rate: override the preset's.
        max_documents: use only the first N documents (with `subset_seed`: a seeded
            random N, kept in file order).
        stopwords: "gensim", "none" or a stop-list file (default: the preset's).
        embeddings: a word2vec ``.bin`` / ``.txt`` file or converted
            KeyedVectors; the embedding size follows the vectors.
        optimizer: "adam", or "sgld" / "psgld" (every model; the step sizes
            of the ``sgmcmc_ptb`` "small" preset, `tfktopic.bayes.sgmcmc_presets`).
        strategy: "none", "mirrored", "multiworker" or "data_parallel"
            (`tfktopic.distribute`; data_parallel: `keras.distribution` under JAX).
        seed: shuffling and initialisation seed (and the split's, unless
            `split_seed` is given).
        split_seed: seed of the 80/10/10 split by document (default: `seed`);
            fix it to compare training seeds on one split.
        patience: early stopping: stop after this many epochs without a lower
            validation perplexity (`epochs` is then the maximum; default: the
            preset's ``patience``, usually none). What stopped the run is
            recorded (`tfktopic.runs.stopping`).
        topic_report: topic models: report the topics' NPMI and diversity next
            to a gensim LDA with as many topics on the same training split.
        overrides: ``KEY=VALUE`` strings or a dict (`apply_overrides`).
        verbose: Keras `fit` verbosity (1: progress bar, 2: a line per epoch).
        log: callable receiving each output line (`None`: silent).
        precision: "float32" (default), "mixed_bfloat16" or "mixed_float16"
            (`tfktopic.runs.precision`): the model is built under that Keras
            dtype policy; recorded in run.json, and a resume must use the same.
        callbacks: more Keras callbacks for `fit` (e.g. ``keras.callbacks.TensorBoard``),
            after the run's own checkpointing callbacks.
        subset_seed: with `max_documents`, the seed of a random subset of the corpus's
            documents (recorded in run.json; `None`: the first N).
        prepared: a directory written by ``tfktopic prepare`` (`tfktopic.runs.prepared`):
            train from its shards (vocabularies, split and the settings it fixes come
            from it; `corpus`, `format`, `max_documents`, `subset_seed` and
            `split_seed` must be left unset) instead of reading a corpus into memory.

    Returns:
        The results dict written to ``out/results.json``.

    Example:
    >>> train_run("tcnlm", "runs/lee-tcnlm", epochs=2)          # doctest: +SKIP
    """
    settings = resolve_settings(model_name, preset, overrides, epochs=epochs,
                                batch_size=batch_size, learning_rate=learning_rate,
                                stopwords=stopwords, optimizer=optimizer, patience=patience,
                                precision=precision)
    plan = _plan_run(model_name, out, corpus, format, preset, settings, overrides, embeddings,
                     strategy, seed, split_seed, max_documents, subset_seed, prepared,
                     stopwords)
    rundata, matrix = _prepare_run_data(plan, settings, embeddings, seed, log)
    _open_run_directory(plan, rundata, settings)
    model, datasets, resumed = _build_and_restore(plan, settings, rundata, seed, matrix, log)
    model = _train(plan, model, rundata, settings, datasets, resumed, callbacks, verbose, seed,
                   log)
    return _report(plan, model, rundata, seed, topic_report, log)


# The steps of `train_run`, in order: resolve the settings (`resolve_settings`) -> plan the
# run (checks before any data is read; the run.json record) -> prepare the data -> open or
# resume the run directory -> build the model and restore its newest state -> fit ->
# score and report.
@dataclasses.dataclass
class _RunPlan:
    """What `train_run` knows before it reads the corpus.

    Attributes:
        model_name, preset, corpus, format, max_documents, subset_seed: the run's.
        out: the run directory; ``run_json`` its ``run.json``.
        config: the run.json record (completed by the later steps).
        previous: the run.json found in `out` (`None`: a new run).
        files: the corpus's own split files (`given_split`) or `None`.
        split_seed: seed of the 80/10/10 split.
        distribution: the `tfktopic.distribute` strategy.
        explicit_dim: an ``embedding_dim`` given by ``--set`` (else `None`).
        prepared: the prepared directory to train from (`None`: read `corpus`).
        explicit_data: data settings given explicitly (``--set``, ``--stopwords``).
    """

    model_name: str
    preset: str
    corpus: object
    format: str
    max_documents: object
    subset_seed: object
    out: pathlib.Path
    run_json: pathlib.Path
    config: dict
    previous: object
    files: object
    split_seed: int
    distribution: object
    explicit_dim: object
    prepared: object = None
    explicit_data: dict = None


def _refuse_corpus_options(prepared, corpus, format, max_documents, subset_seed, split_seed):
    """With a prepared directory the corpus options are the directory's: refuse one given."""
    given = {"CORPUS": corpus != "lee", "--format": format is not None,
             "--max-documents": max_documents is not None,
             "--subset-seed": subset_seed is not None, "--split-seed": split_seed is not None}
    named = [name for name, set_ in given.items() if set_]
    if named:
        raise TfktopicError(f"--prepared {prepared}: the prepared directory fixes the corpus and "
                            f"its split; drop {', '.join(named)}")


def _plan_run(model_name, out, corpus, format, preset, settings, overrides, embeddings,
              strategy, seed, split_seed, max_documents, subset_seed, prepared=None,
              stopwords=None):
    """Check what can be checked before the corpus is read; the run.json record."""
    from tfktopic.distribute import check_batch_size, get_strategy
    from tfktopic.runs.sizes import check_model_size
    from tfktopic.version import __version__

    check_model_size(settings["model"])  # before the corpus is read
    if prepared is not None:
        _refuse_corpus_options(prepared, corpus, format, max_documents, subset_seed, split_seed)
    explicit_dim = dict(_override_items(overrides)).get("embedding_dim")
    training, data = settings["training"], settings["data"]
    split_seed = int(seed if split_seed is None else split_seed)
    if embeddings is not None and not pathlib.Path(embeddings).exists():
        raise TfktopicError(f"{embeddings}: no such word2vec file (--embeddings)")
    explicit_data = {k: v for k, v in _override_items(overrides)}
    if stopwords is not None:
        explicit_data["stopwords"] = stopwords
    if prepared is not None:
        from tfktopic.runs.prepared import shard_kind

        shard_kind(model_name, prepared)  # before anything is read
        corpus, format = pathlib.Path(prepared), "prepared"
    else:
        format = resolve_format(corpus, format)
    distribution = get_strategy(strategy)
    check_batch_size(distribution, training["batch_size"])  # before the run directory

    out = pathlib.Path(out)
    config = {
        "format_version": RUN_FORMAT_VERSION, "tfktopic_version": __version__,
        "model": model_name, "preset": preset,
        "corpus": "lee" if str(corpus) == "lee" else str(pathlib.Path(corpus).resolve()),
        "format": format, "max_documents": max_documents,
        "subset_seed": None if subset_seed is None else int(subset_seed), "seed": int(seed),
        "split_seed": split_seed, "data": data, "training": {**training, "strategy": strategy},
        "embeddings_path": None if embeddings is None else str(pathlib.Path(embeddings).resolve()),
    }
    files = given_split(corpus) if prepared is None else None
    config["split"] = ({"given": {k: str(v.resolve()) for k, v in files.items()}}
                       if files is not None else "prepared" if prepared is not None
                       else list(SPLIT))
    run_json = out / "run.json"
    previous = None
    if run_json.exists():
        previous = read_run_config(out)
    return _RunPlan(model_name, preset, corpus, format, max_documents, subset_seed, out,
                    run_json, config, previous, files, split_seed, distribution, explicit_dim,
                    prepared, explicit_data)


def _prepare_run_data(plan, settings, embeddings, seed, log):
    """Read and split the corpus, resolve its data rules, build vocabularies and examples.

    Returns:
        (`RunData`, the initial embedding matrix or `None`).
    """
    if plan.prepared is not None:
        from tfktopic.distribute import input_workers
        from tfktopic.runs.prepared import load_prepared

        rundata = load_prepared(plan.prepared, plan.model_name, settings["data"],
                                plan.explicit_data, workers=input_workers(plan.distribution))
    else:
        rundata = prepare_data(settings, plan.corpus, plan.format, plan.max_documents,
                               plan.split_seed, subset_seed=plan.subset_seed)
    for note in rundata.notes:
        say(log, f"note: {note}")
    parts, lm_vocab, topic_vocab = rundata.parts, rundata.lm_vocab, rundata.topic_vocab
    settings["data"] = plan.config["data"] = rundata.data  # the resolved data rules
    how = ("its own split files" if plan.files is not None else "prepared shards"
           if plan.prepared is not None else "80/10/10 by document")
    say(log, f"{rundata.corpus.source or plan.corpus}: {len(parts['train'])} / "
             f"{len(parts['valid'])} / {len(parts['test'])} documents (train / valid / test; "
             f"{how}), LM vocabulary {len(lm_vocab)}, topic vocabulary {len(topic_vocab)}, "
             f"{len(rundata.examples['train'])} training {rundata.unit}")
    matrix = None
    if embeddings is not None:
        matrix, coverage = _embedding_matrix(embeddings, lm_vocab, settings, plan.explicit_dim,
                                             seed, log)
        plan.config["embeddings_coverage"] = coverage
    return rundata, matrix


def _fresh_progress():
    """The progress record of a run with no epoch done."""
    return {"epochs_done": 0, "best_val_ppl": None, "history": []}


def _open_run_directory(plan, rundata, settings):
    """Refuse an `out` holding another run; write the vocabularies and run.json."""
    config, out, previous = plan.config, plan.out, plan.previous
    config["model_config"] = jsonable(settings["model"])
    config["vocabularies"] = vocabulary_record(rundata.lm_vocab, rundata.topic_vocab)
    if (previous is not None and checkpoints.has_progress(out)
            and _signature(previous) != _signature(config)):
        changed = [k for k, v in _signature(config).items() if _signature(previous).get(k) != v]
        raise TfktopicError(f"{plan.run_json}: --out holds another run (different "
                            f"{', '.join(changed)}); use a new --out or delete {out}")
    out.mkdir(parents=True, exist_ok=True)
    rundata.lm_vocab.save(out / "lm_vocab.json")
    rundata.topic_vocab.save(out / "topic_vocab.json")
    config["progress"] = (previous or {}).get("progress") or _fresh_progress()
    config["status"] = "training"
    write_json(plan.run_json, config)


def _build_and_restore(plan, settings, rundata, seed, matrix, log):
    """Make the pipelines, build the model and restore the newest intact training state.

    Returns:
        (model, (train, valid) pipelines, epochs already done).
    """
    config, out = plan.config, plan.out
    batch = int(settings["training"]["batch_size"])
    # made before `build_model` seeds: a tf.data shuffle seed depends on the global seed
    datasets = (rundata.dataset("train", batch, shuffle=True, seed=seed),
                rundata.dataset("valid", batch, shuffle=False))
    with plan.distribution.scope():
        model = build_model(settings, rundata, int(seed), embeddings=matrix)
        model(next(iter(datasets[1])))  # build, so the checkpoint can be restored
    # crash safety (tfktopic.runs.checkpoints): exact resume from the newest intact state
    state = checkpoints.restore_state(out / "backup", model, log)
    resumed = int(state["epoch"]) if state else 0
    best = state.get("best_val_ppl") if state else None
    if not checkpoints.recover_model_file(out, model, log):
        best = None
    fresh = _fresh_progress()
    config["progress"] = {**fresh, **config["progress"]} if resumed else fresh
    config["progress"].update(epochs_done=resumed, best_val_ppl=best,
                              history=config["progress"]["history"][:resumed])
    return model, datasets, resumed


def _train(plan, model, rundata, settings, datasets, resumed, callbacks, verbose, seed, log):
    """Fit the remaining epochs (checkpoints, divergence guard, early stopping).

    Returns:
        The model to score: the best checkpoint (``out/model.keras``) where there is one.

    Raises:
        checkpoints.DivergedError: the loss became non-finite (run.json says "diverged").
    """
    from tfktopic.distribute import distribute_dataset

    config, out, run_json = plan.config, plan.out, plan.run_json
    training = settings["training"]
    guard, safety = checkpoints.training_callbacks(out, config["progress"]["best_val_ppl"],
                                                   training.get("learning_rate"))
    patience = training.get("patience")
    history = lambda: config["progress"]["history"]
    user_callbacks = list(callbacks)
    callbacks = [*safety, _progress_callback(run_json, config), *user_callbacks]
    if patience:
        callbacks.append(stopping.EarlyStopping(history, int(patience)))
    total = int(training["epochs"])
    backup = out / "backup"
    stop = stopping.stop_reason(history(), patience, total)
    if stop is not None and stop["stopped_by"] == "max_epochs":
        say(log, f"{out}: all {total} epochs are done (backup in {backup}); scoring the best "
                 "checkpoint")
    elif stop is not None:
        say(log, f"{out}: training stopped early after epoch {stop['epochs']} (no lower "
                 f"validation perplexity for {patience} epochs; best epoch "
                 f"{stop['best_epoch']}); scoring the best checkpoint")
    else:
        if resumed:
            say(log, f"resuming from {backup} after epoch {resumed} of {total}")
        say(log, f"training {plan.model_name} (preset {plan.preset}) for "
                 + (f"at most {total} epochs (early stopping, patience {patience})"
                    if patience else f"{total} epochs") + f"; checkpoints in {out}")
        fit_model(model, rundata, settings, callbacks, verbose, int(seed),
                  distribute=distribute_dataset, datasets=datasets, initial_epoch=resumed)
    if guard.diverged is not None:
        config["status"] = "diverged"
        write_json(run_json, config)
        raise checkpoints.DivergedError(guard.message(out))
    stop = stopping.stop_reason(config["progress"]["history"], patience, total) or {
        "stopped_by": "interrupted", "epochs": len(config["progress"]["history"])}
    config["progress"]["stop"] = stop
    if (out / "model.keras").exists():
        model = load_model(out / "model.keras")
    return model


def _report(plan, model, rundata, seed, topic_report, log):
    """Score the test split (leak-free) next to a unigram model; topics, samples and
    results.json; mark the run finished.

    Returns:
        The results dict written to ``out/results.json``.
    """
    config, out, run_json, model_name = plan.config, plan.out, plan.run_json, plan.model_name
    preset, split_seed = plan.preset, plan.split_seed
    parts, lm_vocab, topic_vocab = rundata.parts, rundata.lm_vocab, rundata.topic_vocab
    batch = int(config["training"]["batch_size"])
    stop = config["progress"]["stop"]

    result = rundata.score_test(model, batch)
    # The unigram baseline scores the same target tokens (every model predicts them).
    unigram = rundata.unigram_test()
    say(log, "\n" + perplexity_message(model_name, result))
    say(log, f"unigram model on the same tokens: {unigram:.2f}")
    parameters = parameter_counts(model)
    say(log, parameters_message(parameters))
    say(log, f"training stopped by {stop['stopped_by']} after epoch {stop['epochs']}"
             + (f" (best epoch {stop['best_epoch']})" if stop.get("best_epoch") else ""))
    write_json(out / "test_documents.json", {
        "about": "per-document NLL sums (nats) and predicted tokens of the test split, in "
                 "split order: the unit of tfktopic.evaluation.comparison.paired_bootstrap",
        "split_seed": split_seed, "protocol": result.protocol,
        "nll": [round(float(v), 6) for v in result.document_nll],
        "tokens": [int(v) for v in result.document_tokens]})
    summary = {"model": model_name, "preset": preset, "corpus": config["corpus"],
               "seed": int(seed), "split_seed": split_seed,
               "test": result.as_dict(), "unigram_ppl": unigram,
               "parameters": parameters,
               "training": {**stop, "best_val_ppl": config["progress"].get("best_val_ppl"),
                            "seconds": round(sum(h.get("seconds", 0.0)
                                                 for h in config["progress"]["history"]), 1)}}
    run = Run(model, lm_vocab, topic_vocab, config, out)
    entry = registry.get(model_name)
    if entry.simplex_topics:
        summary["topic_usage"] = topic_usage(run, parts["train"])
        note = collapse_note(summary["topic_usage"], getattr(model, "decoder_init", None))
        if note:
            say(log, note)
    if entry.has_topics:
        summary["topics"] = print_topics(run, 10, log, summary.get("topic_usage"))
        if topic_report:
            summary["topic_quality"] = quality_report(run, parts["train"], seed=int(seed),
                                                      log=log)
    if entry.generates and entry.has_topics:
        say(log, "\ngenerated sentences (top-k sampling, conditioned on one topic):")
        summary["generated"] = {}
        topics = summary["topics"]
        for k in range(min(3, len(topics))):
            text = generate_text(run, num=1, max_len=25, topic=k, seed=int(seed) + k,
                                 **GENERATION)[0]
            summary["generated"][k] = text
            say(log, f"  topic {k:>2} ({' '.join(topics[k][:3])}): {text}")
    elif entry.generates:
        say(log, "\ngenerated sentences (top-k sampling):")
        summary["generated"] = generate_text(run, num=3, max_len=25, seed=int(seed),
                                             **GENERATION)
        for text in summary["generated"]:
            say(log, f"  {text}")
    write_json(out / "results.json", jsonable(summary))
    config["status"] = "finished"
    write_json(run_json, config)
    say(log, f"\nmodel, vocabularies and results.json written to {out}")
    return summary
