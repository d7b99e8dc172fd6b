"""Run directories: train, load, evaluate and use a model trained by `tfktopic train`.

A **run directory** (``--out`` of ``tfktopic train``) holds everything needed to
use a trained model again, offline:

* ``model.keras`` -- the best checkpoint (lowest validation perplexity);
* ``lm_vocab.json``, ``topic_vocab.json`` -- the vocabularies (`Vocabulary`,
  `TopicVocabulary`, versioned JSON);
* ``run.json`` -- how the run was made: model name, preset, corpus, format,
  seed, ``max_documents``, the data settings (``max_len``, ``context_len``,
  ``min_count``, stop list, ``sentences_per_chunk`` ...), the model's
  constructor settings, the training settings, the tfktopic version, and the
  training progress (``status``, epochs done, best validation perplexity);
* ``results.json`` -- test perplexity, unigram baseline, parameter counts, topics,
  generated text;
* ``backup/`` -- the complete training state of the two newest finished epochs
  (``state-NNNNN.npz``: weights, MCMC state, optimizer and RNG states) and the
  best weights (``best.npz``), see `tfktopic.runs.checkpoints`: running the same
  ``tfktopic train`` command again after a kill resumes exactly where the
  uninterrupted run would be (and does nothing more once all epochs are done);
* ``.lock`` -- held (an OS file lock, `filelock`) by the command that trains or
  evaluates into the directory, with its PID (`tfktopic.runs.lock`).

Every file is written atomically (`tfktopic.atomic`): a kill or a full disk
leaves the previous version, never a truncated file.

This package is the only orchestration of tfktopic: the CLI, the scripts and
the benchmarks all go through it.

* `preset_settings` reads a preset (``name``, ``model``, ``data``,
  ``training``); `apply_overrides` applies ``--set KEY=VALUE``;
  `resolve_settings` is both plus ``tfktopic train``'s other options (what a
  run trains with, before any data is read).
* `prepare_data` reads the corpus, splits it 80/10/10 by document (seeded),
  resolves the data rules given for another corpus size (`resolve_data_rules`:
  e.g. TCNLM's ``min_doc_freq`` of 100 for 50K documents is scaled to the
  training split), builds the vocabularies on the training part, and cuts the
  sentence windows or document chunks (training contexts ``all_other``,
  validation and test ``preceding``) -> `RunData` (``.dataset(split, batch)``).
* `build_model` (the one constructor glue, compiled with `build_optimizer`),
  `fit_model`, `score_perplexity`; NPMI always against `npmi_reference`
  (the run's training split).
* `train_run` does all of it into a run directory (resumable);
  `evaluate_run` recomputes the run's test split from ``run.json``.

Modules: `settings` (model names, presets, ``--set`` overrides), `data` (data
preparation and scoring), `directory` (`Run`, `resolve_run_dir`, `load_run`),
`training` (`build_model`, `fit_model`, `train_run`), `reports` (topics,
evaluation, generation, export, `parameter_counts`), `usage` (how much of the
training documents each topic explains) and `files` (JSON files, log lines).

Example:

```python
from tfktopic import runs

runs.train_run("tcnlm", "runs/lee-tcnlm", corpus="lee", preset="small")
run = runs.load_run("runs/lee-tcnlm")
runs.evaluate_run(run)["perplexity"]["perplexity"]
runs.generate_text(run, topic=2, num=3)

# The same pieces, step by step (what the scripts and benchmarks do):
settings = runs.preset_settings("tcnlm", "small")
data = runs.prepare_data(settings, "lee", seed=0)
model = runs.build_model(settings, data, seed=0)
runs.fit_model(model, data, settings)
result, _ = runs.score_perplexity("tcnlm", model, data.parts["test"], data.lm_vocab,
                                  data.topic_vocab, data.data)
```
"""

from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.runs.data import (NPMI_REFERENCE, RunData, build_vocabularies, make_dataset,
                                make_examples, npmi_reference, prepare_data, read_corpus,
                                resolve_data_rules, resolve_format, score_perplexity,
                                split_corpus)
from tfktopic.runs.directory import Run, load_model, load_run, read_run_config, resolve_run_dir
from tfktopic.runs.reports import (document_bow, evaluate_run, export_run, generate_text,
                                   parameter_counts, run_splits, run_topics, topics_report)
from tfktopic.runs.precision import PRECISIONS, precision_policy
from tfktopic.runs.settings import (DATA_DEFAULTS, GENERATION, MODELS, OPTIMIZERS, SPLIT,
                                    TRAINING_DEFAULTS, apply_overrides, preset_settings)
from tfktopic.runs.training import (build_model, build_optimizer, fit_model, resolve_settings,
                                    train_run)

__all__ = [
    "MODELS",
    "Run",
    "RunData",
    "resolve_run_dir",
    "load_run",
    "load_model",
    "preset_settings",
    "resolve_settings",
    "prepare_data",
    "resolve_data_rules",
    "read_corpus",
    "split_corpus",
    "build_vocabularies",
    "make_examples",
    "make_dataset",
    "build_model",
    "build_optimizer",
    "parameter_counts",
    "fit_model",
    "npmi_reference",
    "NPMI_REFERENCE",
    "unigram_perplexity",
    "train_run",
    "evaluate_run",
    "run_splits",
    "run_topics",
    "document_bow",
    "generate_text",
    "export_run",
    "topics_report",
    "read_run_config",
    "resolve_format",
    "score_perplexity",
    "apply_overrides",
    "DATA_DEFAULTS",
    "GENERATION",
    "OPTIMIZERS",
    "PRECISIONS",
    "precision_policy",
    "SPLIT",
    "TRAINING_DEFAULTS",
]
