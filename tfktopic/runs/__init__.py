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
* ``results.json`` -- test perplexity, unigram baseline, topics, generated text;
* ``backup/`` -- the complete training state of the two newest finished epochs
  (``state-NNNNN.npz``: weights, MCMC state, optimizer and RNG states) and the
  best weights (``best.npz``), see `tfktopic.runs.checkpoints`: running the same
  ``tfktopic train`` command again after a kill resumes exactly where the
  uninterrupted run would be (and does nothing more once all epochs are done);
* ``.lock`` -- held (``flock``) by the command that trains or evaluates into the
  directory, with its PID (`tfktopic.runs.lock`).

Every file is written atomically (`tfktopic.atomic`): a kill or a full disk
leaves the previous version, never a truncated file.

The data preparation of a run (reading, 80/10/10 split by document, the
vocabularies, sentence windows or document chunks, tf.data pipelines) lives in
one place (`read_corpus`, `split_corpus`, `build_vocabularies`,
`make_examples`, `make_dataset`), used by both `train_run` and `evaluate_run`,
so an evaluation recomputes exactly the run's test split from ``run.json``.

Modules: `settings` (model names, presets, ``--set`` overrides), `data` (data
preparation), `directory` (`Run`, `resolve_run_dir`, `load_run`), `training`
(`train_run`) and `reports` (topics, evaluation, generation, export).

Example:

```python
from tfktopic import runs

runs.train_run("tcnlm", "runs/lee-tcnlm", corpus="lee", preset="small")
run = runs.load_run("runs/lee-tcnlm")
runs.evaluate_run(run)["perplexity"]["perplexity"]
runs.generate_text(run, topic=2, num=3)
```
"""

from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.runs.data import (build_vocabularies, make_dataset, make_examples, read_corpus,
                                resolve_format, score_perplexity, split_corpus)
from tfktopic.runs.directory import Run, load_run, read_run_config, resolve_run_dir
from tfktopic.runs.reports import (document_bow, evaluate_run, export_run, generate_text,
                                   run_topics, topics_report)
from tfktopic.runs.settings import (CHUNKED_MODELS, DATA_DEFAULTS, GENERATING_MODELS,
                                    GENERATION, HIERARCHICAL_MODELS, MODELS, OPTIMIZERS,
                                    PRESET_FAMILY, SPLIT, TOPIC_MODELS, TRAINING_DEFAULTS,
                                    apply_overrides, preset_settings)
from tfktopic.runs.training import train_run

__all__ = [
    "MODELS",
    "GENERATING_MODELS",
    "TOPIC_MODELS",
    "HIERARCHICAL_MODELS",
    "Run",
    "resolve_run_dir",
    "load_run",
    "preset_settings",
    "read_corpus",
    "split_corpus",
    "build_vocabularies",
    "make_examples",
    "make_dataset",
    "unigram_perplexity",
    "train_run",
    "evaluate_run",
    "run_topics",
    "document_bow",
    "generate_text",
    "export_run",
    "topics_report",
    "read_run_config",
    "resolve_format",
    "score_perplexity",
    "apply_overrides",
    "CHUNKED_MODELS",
    "DATA_DEFAULTS",
    "GENERATION",
    "OPTIMIZERS",
    "PRESET_FAMILY",
    "SPLIT",
    "TRAINING_DEFAULTS",
]
