"""Gan et al. (2017) Table 7 ablation on PTB small, resumable (issue 15).

    python -m studies.claims.sgmcmc_ablation --out runs/ablation            # every run (hours)
    python -m studies.claims.sgmcmc_ablation --out runs/ablation --runs paper/rmsprop
    python -m studies.claims.sgmcmc_ablation --out runs/ablation --runs paper/rmsprop-s2
    python -m studies.claims.sgmcmc_ablation --out runs/ablation --rescore   # see below
    python -m studies.claims.sgmcmc_ablation --quick --out runs/ablation-quick   # smoke run, minutes

Runs (one directory each under ``--out``; re-running the command continues
an interrupted run from its last epoch and skips finished ones, whose
record is ``<run>/result.json``):

* ``<setting>/rmsprop``: the setting's preconditioner at T = 0 (RMSprop),
  early-stopped on the model's validation perplexity (best weights kept:
  "RMSprop single"); its iterates after burn-in are collected too, and their
  predictive average is M2 (averaging without noise).
* ``<setting>/psgld``: the sampler, early-stopped on the validation
  perplexity of the running sample average; its last sample is M1 (noise
  without averaging), the average of all thinned samples is "full".
* ``paper/psgld_T0.1``, ``paper/psgld_T0.01``: cold posteriors; the sweep
  T in {1, 0.1, 0.01} is decided on the validation perplexity of the average.
* ``<run>-s<k>``: `<run>` at seed k (`SEED_RUNS`: the seeds of the target's
  comparison, pSGLD averaged at the chosen T against RMSprop single).

Every run records its per-epoch log across resumed sessions (``epochs.json``,
`EpochLog`, which also decides early stopping: Keras' callback forgot its best
epoch at every resume) and the NLL of each test block (`stream_blocks`: 400
contiguous tokens), from which `seeded_comparisons` gives the ratio over
seeds with a paired bootstrap interval. ``--rescore`` adds the block scores to
finished sampler runs of older code from their stored samples.

Settings are the ``sgmcmc_ablation`` presets (`tfktopic.bayes.sgmcmc_presets`;
"paper": T = 1; "authors_code": T = 2/N, gradient norm rescaled to 5, rho
0.9, ε inside),
the schedule is `ABLATION_SCHEDULE` (Table 2: burn-in 4 epochs, a sample
every half epoch, at most 40 epochs). Minibatches are "successive" by
default (`--minibatches random` for the Theano setup): the same cost per
step, and the state carried through the stream gives the model a longer
context, so it reaches a given perplexity in fewer epochs (Zaremba et al.;
Gan et al. Table 4, successive < random for every small-model optimizer).
The table is written to ``--out/table.json`` once its runs are done.
"""

import argparse
import json
import math
import pathlib
import sys
import time

import keras
import numpy as np
import tensorflow as tf

#: The six runs of the table, each at seed 0.
BASE_RUNS = ("paper/rmsprop", "paper/psgld", "authors_code/rmsprop", "authors_code/psgld",
             "paper/psgld_T0.1", "paper/psgld_T0.01")
#: The extra seeds of the comparison the issue's target rests on (DESIGN §5a: >= 3 seeds
#: and a paired interval): RMSprop single against pSGLD averaged at the temperature chosen
#: on validation. A run name ``<run>-s<k>`` is `<run>` at seed k. RMSprop's seed-0 run
#: predates the per-block scores (its best weights were not kept), so its three scored
#: seeds are 1-3; pSGLD's seed 0 is rescored from its stored samples (``--rescore``).
#: Every swept temperature has its seeds listed, but only those of the temperature chosen
#: on validation among the sweep runs finished by then are trained (`seed_run_wanted`):
#: the data make the choice, not the queue.
SEED_RUNS = ("paper/rmsprop-s1", "paper/rmsprop-s2", "paper/rmsprop-s3",
             "paper/psgld_T0.01-s1", "paper/psgld_T0.01-s2",
             "paper/psgld_T0.1-s1", "paper/psgld_T0.1-s2",
             "paper/psgld-s1", "paper/psgld-s2")
RUNS = BASE_RUNS + SEED_RUNS
#: The temperature sweep of the "paper" setting: (run, T).
SWEEP = (("paper/psgld", 1.0), ("paper/psgld_T0.1", 0.1), ("paper/psgld_T0.01", 0.01))
#: The order the default ``--runs`` trains them in: the runs expected to stop sooner first
#: (RMSprop: 4 and 11 epochs; T = 0.01: 20 epochs, 1.9 h of one core), then the seeds of
#: the cold temperature chosen so far, T = 1 pSGLD last (and its seeds, should it beat the
#: cold ones on validation). Its noise dominates the drift (sgmcmc_issue15.md), so it
#: needs the most epochs (test average still falling ~1.3 per epoch at epoch 20 on
#: 2026-11-25: ~5 h of one core); twice a new machine ended it half-way with the others
#: not started, since a run's state lives in ``--out`` on the machine and only finished
#: records are committed.
ORDER = ("paper/rmsprop", "paper/psgld_T0.01", "authors_code/rmsprop", "authors_code/psgld",
         "paper/psgld_T0.1", *SEED_RUNS[:7], "paper/psgld", *SEED_RUNS[7:])
#: Epoch caps below the schedule's ``max_epochs``: base run -> epochs. A run's state lives
#: in ``--out`` on the machine, and a new machine (three times so far) ended T = 1 pSGLD
#: half-way, at 434 s per epoch beside one other lane (40 epochs: 4.8 h, more than a
#: 3-hour session). Capped at 18 epochs (~2.2 h) it lands within one session; its record
#: says ``"stopped": "epoch cap"`` and the table compares the sweep at the capped epoch too
#: (`table`'s ``sweep_at_epoch``), so the T = 1 row is not read as a converged run.
EPOCH_CAPS = {"paper/psgld": 18}
#: Test batches per scoring block: a block is one of the batch's parallel streams over this
#: many consecutive batches (20 x 20 = 400 contiguous tokens at PTB small; ~206 blocks).
BATCHES_PER_BLOCK = 20


def split_seed(run):
    """``"paper/rmsprop-s2"`` -> ``("paper/rmsprop", 2)``; no suffix is seed 0.

    Raises:
        ValueError: the run (without its seed) is not one of `BASE_RUNS`.
    """
    base, marker, seed = run.partition("-s")
    if base not in BASE_RUNS or (marker and not seed.isdigit()):
        raise ValueError(f"unknown run {run!r}; choose from {', '.join(RUNS)} "
                         "(a base run may take a seed suffix -s<k>)")
    return base, int(seed) if marker else 0


def _temperature(run):
    """None (the setting's), 0 (RMSprop) or the cold-sweep temperature of a run."""
    name = split_seed(run)[0].split("/")[1]
    if name == "rmsprop":
        return 0.0
    if name.startswith("psgld_T"):
        return float(name[len("psgld_T"):])
    return None


def chosen_temperature(records):
    """The "paper" setting's temperature with the best validation perplexity of the
    sample average among the finished sweep runs (seed 0) in `records`, or None."""
    sweep = {t: records[run]["averaged_valid_ppl"] for run, t in SWEEP
             if "averaged_valid_ppl" in records.get(run, {})}
    return min(sweep, key=sweep.get) if sweep else None


def seed_run_wanted(run, records):
    """Whether `run` is to be trained given the finished `records`: a pSGLD seed of the
    sweep only at the temperature `chosen_temperature` picks (so far); every other run
    always. The first seed-0 sweep run decides alone; T = 1 runs last, and its seeds
    follow only if it then beats the cold temperatures on validation. With no sweep run
    finished there is nothing to choose from, and the run is trained as asked."""
    base, seed = split_seed(run)
    swept, chosen = dict(SWEEP), chosen_temperature(records)
    if seed == 0 or base not in swept or chosen is None:
        return True
    return chosen == swept[base]


def stream_blocks(dataset, batches_per_block=BATCHES_PER_BLOCK):
    """The scoring block of every predicted target of an LM dataset, in scoring order.

    A block is one row (a parallel stream, with successive minibatches) over
    `batches_per_block` consecutive batches: contiguous text, so that the
    blocks are close to independent units for a bootstrap.

    Args:
        dataset: batches with a ``mask`` [B, T] (1 where a target is scored).
        batches_per_block: consecutive batches per block.

    Returns:
        (int [n] block index of each target in the row-major order of
        `tfktopic.bayes.target_log_probs`, int [num_blocks] targets per block).
    """
    keys = []
    for k, batch in enumerate(dataset):
        mask = np.asarray(batch["mask"]) > 0
        rows = np.broadcast_to(np.arange(mask.shape[0])[:, None], mask.shape)[mask]
        keys.append((k // batches_per_block) * (1 << 20) + rows)
    ids = np.concatenate(keys)
    _, ids = np.unique(ids, return_inverse=True)   # number the blocks 0..m-1
    return ids, np.bincount(ids)


def block_nll(log_probs, block_ids):
    """Negative log-likelihood sum of each block (`stream_blocks`), float [num_blocks]."""
    log_probs = np.asarray(log_probs, np.float64)
    if log_probs.shape != np.shape(block_ids):
        raise ValueError(f"{log_probs.shape[0]} log-probabilities for {len(block_ids)} "
                         "scored targets: not the same evaluation data")
    return np.bincount(block_ids, weights=-log_probs)


def model_log_probs(model, dataset):
    """log p of every target of `dataset` under `model` (a stateful model from a zero
    state), in the order of `stream_blocks`."""
    from tfktopic.bayes.collection import target_log_probs

    predict = tf.function(lambda batch: target_log_probs(model, batch))
    model.reset_states()
    out = np.concatenate([predict(batch).numpy() for batch in dataset])
    model.reset_states()
    return out


class EpochLog(keras.callbacks.Callback):
    """Every epoch's logs in ``<directory>/epochs.json``, kept across resumed sessions;
    early stopping decided on that whole log, the best epoch's weights kept on disk.

    Keras' ``EarlyStopping`` forgets its best value and weights when a killed run resumes
    from ``BackupAndRestore``: the first epoch of every session became "the best", so the
    reported "RMSprop single" could be a later, worse epoch than the run's best. Here the
    decision is `tfktopic.runs.stopping.stop_reason` on the logged epochs (the rule of
    Keras' callback: strictly lower is better, `patience` epochs without one stop the run),
    so a resumed run stops where an uninterrupted one would.

    Args:
        directory: the run's directory.
        monitor: the logged value to minimise (``val_ppl``; ``valid_avg_ppl`` for samplers).
        patience: epochs without a lower value.
        ignore_first: epochs not monitored (a sampler's burn-in and first sampling epoch,
            as ``start_from_epoch`` of Keras' callback).
        keep_best: save the best epoch's weights to ``best.weights.h5``.

    Put it after the callbacks that add to the logs (`SampleCollector`). An epoch whose
    backup was written but whose log was not (a kill between the two) is logged as ``{}``.
    """

    def __init__(self, directory, monitor, patience, ignore_first=0, keep_best=False):
        super().__init__()
        self.path = pathlib.Path(directory) / "epochs.json"
        self.best_path = pathlib.Path(directory) / "best.weights.h5"
        self.monitor, self.patience = monitor, patience
        self.ignore_first, self.keep_best = ignore_first, keep_best

    @property
    def rows(self):
        """The logged epochs, epoch 1 first (``{}`` for an epoch that was not logged)."""
        if not self.path.exists():
            return []
        logged = {row["epoch"]: row for row in json.loads(self.path.read_text())}
        return [logged.get(k, {}) for k in range(1, max(logged, default=0) + 1)]

    def _monitored(self, rows):
        return [row if k >= self.ignore_first else {}
                for k, row in enumerate(rows)]

    def best_epoch(self):
        """The 1-based best epoch of the log, or `None`."""
        from tfktopic.runs.stopping import best_epoch

        return best_epoch(self._monitored(self.rows), self.monitor)

    def stopped_early(self):
        """Whether the logged epochs meet the early-stopping rule."""
        from tfktopic.runs.stopping import stop_reason

        monitored = self._monitored(self.rows)[self.ignore_first:]
        return stop_reason(monitored, self.patience, math.inf, self.monitor) is not None

    def on_epoch_end(self, epoch, logs=None):
        rows = [row for row in self.rows if row.get("epoch") != epoch + 1]
        rows.append({"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()}})
        rows.sort(key=lambda row: row.get("epoch", 0))
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([row for row in rows if row], indent=0))
        tmp.replace(self.path)
        if self.keep_best and self.best_epoch() == epoch + 1:
            tmp = self.best_path.with_name("best.tmp.weights.h5")
            self.model.save_weights(str(tmp))
            tmp.replace(self.best_path)
        if self.stopped_early():
            self.model.stop_training = True


def score_blocks(record, blocks, single=None, samples=None):
    """Add the per-block test NLL sums of a run to its record (in place).

    Args:
        record: the run's record.
        blocks: `stream_blocks` of the test data.
        single: per-target test log-probs of the trained model (RMSprop single).
        samples: the test `PredictiveSamples` of the collected samples.

    Returns:
        record.
    """
    ids, counts = blocks
    record["test_block_tokens"] = counts.tolist()
    if single is not None:
        record["single_test_block_nll"] = block_nll(single, ids).tolist()
    if samples is not None and len(samples):
        record["averaged_test_block_nll"] = block_nll(samples.average_log_prob(), ids).tolist()
        record["last_sample_test_block_nll"] = block_nll(
            samples.average_log_prob(indices=[len(samples) - 1]), ids).tolist()
    return record


def train_one(run, out, data, vocab_size, sizes, schedule, successive, log=print):
    """Train (or resume) one run of the ablation; returns its record.

    Args:
        run: "<setting>/<name>[-s<seed>]", one of `RUNS` or a seed of one (`split_seed`);
            the seed sets the initialisation, the minibatch order and the noise.
        out: the run's directory (backup, samples, epochs.csv, result.json).
        data: `ptb_data` output.
        vocab_size: vocabulary size.
        sizes: the ``model`` settings of an ``sgmcmc_ptb`` preset.
        schedule: `ABLATION_SCHEDULE`-like dict (its ``max_epochs`` lowered by
            `EPOCH_CAPS` for the capped runs).
        successive: stateful model over the streams (else random windows).

    Returns:
        dict: the run's record (also written to ``out/result.json``), with the per-block
        test NLL sums of `score_blocks`.
    """
    from tfktopic.bayes import SampleCollector
    from tfktopic.bayes.setups import ablation_optimizer
    from tfktopic.evaluation import evaluate_perplexity
    from tfktopic.models import LSTMLanguageModel, ResetStates

    out = pathlib.Path(out)
    result_path = out / "result.json"
    if result_path.exists():
        log(f"{run}: finished ({result_path})")
        return json.loads(result_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    base, seed = split_seed(run)
    setting = base.split("/")[0]
    temperature = _temperature(run)
    sampler = temperature != 0.0
    max_epochs = min(schedule["max_epochs"], EPOCH_CAPS.get(base, math.inf))
    steps_per_epoch = sum(1 for _ in data["train"])
    keras.utils.set_random_seed(seed)
    model = LSTMLanguageModel(vocab_size, sizes["embedding_dim"], sizes["hidden_dim"],
                              num_layers=sizes["num_layers"], dropout=0.0,
                              stateful=successive)
    optimizer = ablation_optimizer(setting, schedule["learning_rate"],
                                   data["num_train_tokens"], temperature=temperature,
                                   seed=seed)
    model.compile(optimizer=optimizer)
    model(next(iter(data["train"])))
    collector = SampleCollector(
        {"valid": data["valid"], "test": data["test"]},
        burn_in_epochs=schedule["burn_in_epochs"],
        thin=max(1, steps_per_epoch // schedule["samples_per_epoch"]),
        directory=out / "samples")
    epochs = EpochLog(out, "valid_avg_ppl" if sampler else "val_ppl", schedule["patience"],
                      ignore_first=schedule["burn_in_epochs"] + 1 if sampler else 0,
                      keep_best=not sampler)
    callbacks = [keras.callbacks.BackupAndRestore(str(out / "backup")), collector, epochs]
    if successive:
        callbacks.insert(0, ResetStates())
    log(f"{run}: T = {optimizer.temperature:.3g}, {steps_per_epoch} steps per epoch, "
        f"N = {data['num_train_tokens']}")
    start = time.perf_counter()
    history = model.fit(data["train"], validation_data=data["valid"],
                        epochs=max_epochs, callbacks=callbacks, verbose=2)
    seconds = time.perf_counter() - start
    best = epochs.best_epoch()
    if not sampler and best is not None:   # RMSprop single: the best validation epoch
        model.load_weights(str(epochs.best_path))
    model.reset_states()
    record = {"run": run, "seed": seed, "setting": setting,
              "temperature": optimizer.temperature,
              "optimizer": optimizer.get_config(), "schedule": schedule,
              "minibatches": "successive" if successive else "random",
              # every session's epochs (`history` has this session's only); an epoch
              # trained by code older than the log is {}
              "epochs_run": len(epochs.rows), "epochs_this_session": len(history.epoch),
              "max_epochs": max_epochs,
              "stopped": ("early stopping" if epochs.stopped_early() else
                          "epoch cap" if max_epochs < schedule["max_epochs"] else
                          "max_epochs"),
              "steps_per_epoch": steps_per_epoch, "epochs": epochs.rows, "best_epoch": best,
              "train_seconds_this_session": seconds,
              "history": {k: [float(x) for x in v] for k, v in history.history.items()}}
    single = test = None
    if not sampler:
        record["single_valid_ppl"] = evaluate_perplexity(model, data["valid"]).perplexity
        model.reset_states()
        record["single_test_ppl"] = evaluate_perplexity(model, data["test"]).perplexity
        single = model_log_probs(model, data["test"])
    if collector.num_samples:
        valid, test = collector.samples("valid"), collector.samples("test")
        record.update(
            num_samples=len(test),
            averaged_valid_ppl=valid.perplexity(), averaged_test_ppl=test.perplexity(),
            last_sample_valid_ppl=float(valid.sample_perplexities()[-1]),
            last_sample_test_ppl=float(test.sample_perplexities()[-1]),
            curves={s: test.curve(s) for s in ("thinned", "forward", "backward")})
    score_blocks(record, stream_blocks(data["test"]), single=single, samples=test)
    result_path.write_text(json.dumps(record, indent=1))
    log(f"{run}: " + ", ".join(f"{k} {v:.2f}" for k, v in record.items()
                               if k.endswith("_ppl")))
    return record


def record_name(run):
    """The committed file name of a run's record: ``paper/psgld_T0.1`` ->
    ``paper_psgld_T0.1.json``."""
    return run.replace("/", "_") + ".json"


def copy_record(result, records, run):
    """Copy a finished run's ``result.json`` to ``records/record_name(run)`` (if it
    differs), so that it can be committed as soon as it lands."""
    target = pathlib.Path(records) / record_name(run)
    text = pathlib.Path(result).read_text()
    if not target.exists() or target.read_text() != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def table(records):
    """Table 7 from the finished runs' records (missing runs are left out), the
    temperature sweep and the temperature chosen on validation with its seeded
    comparisons; a run stopped by `EPOCH_CAPS` is marked (``psgld_stopped``) and the sweep
    is also compared at its last epoch (``sweep_at_epoch``, from the runs' epoch logs)."""
    rows = {}
    for setting in ("paper", "authors_code"):
        rms, psgld = records.get(f"{setting}/rmsprop"), records.get(f"{setting}/psgld")
        row = {}
        if rms:
            row["rmsprop_single"] = rms.get("single_test_ppl")
            row["M2_averaged_rmsprop"] = rms.get("averaged_test_ppl")
        if psgld:
            row["M1_last_sample"] = psgld.get("last_sample_test_ppl")
            row["full_averaged_psgld"] = psgld.get("averaged_test_ppl")
            if psgld.get("stopped") == "epoch cap":
                row["psgld_stopped"] = f"epoch cap, {psgld['epochs_run']} epochs"
        if row.get("rmsprop_single") and row.get("full_averaged_psgld"):
            row["full_over_rmsprop"] = row["full_averaged_psgld"] / row["rmsprop_single"]
        rows[setting] = row
    sweep = {}
    for run, temperature in SWEEP:
        if records.get(run) and "averaged_valid_ppl" in records[run]:
            sweep[str(temperature)] = {"valid": records[run]["averaged_valid_ppl"],
                                       "test": records[run]["averaged_test_ppl"]}
    out = {"table7": rows, "temperature_sweep": sweep}
    capped = [records[run]["epochs_run"] for run, _ in SWEEP
              if records.get(run, {}).get("stopped") == "epoch cap"]
    if capped:   # the sweep where the capped run stopped, from the runs' epoch logs
        epoch, at = min(capped), {}
        for run, temperature in SWEEP:
            logged = (records.get(run) or {}).get("epochs") or []
            if len(logged) >= epoch and "valid_avg_ppl" in logged[epoch - 1]:
                at[str(temperature)] = logged[epoch - 1]["valid_avg_ppl"]
        out["sweep_at_epoch"] = {"epoch": epoch, "valid": at}
    chosen = chosen_temperature(records)
    if chosen is not None:
        out["chosen_on_validation"] = {"temperature": chosen, **sweep[str(chosen)]}
        rms = rows.get("paper", {}).get("rmsprop_single")
        if rms:
            out["chosen_on_validation"]["over_rmsprop_single"] = \
                sweep[str(chosen)]["test"] / rms
        out["seeded"] = seeded_comparisons(records, chosen)
    return out


def seeded_comparisons(records, temperature, num_resamples=2000):
    """The target's comparison over seeds, with its paired interval (DESIGN §5a).

    pSGLD averaged at `temperature` ("full") against RMSprop single, and against M2
    (RMSprop's iterates averaged: does the noise add anything to the averaging?), from
    the runs with per-block test scores (`score_blocks`): the bootstrap resamples the
    test blocks (paired) and each side's seeds.

    Args:
        records: run name -> record (seeded runs included).
        temperature: the "paper" setting's temperature chosen on validation.

    Returns:
        dict name -> {``seeds_a``, ``seeds_b``, ``ppl_a``/``ppl_b`` mean/sd, and the
        `PerplexityComparison` fields}; a comparison lacking a side is left out.

    Raises:
        ValueError: the scored records do not score the same test blocks.
    """
    from tfktopic.evaluation.comparison import paired_bootstrap, seed_summary

    sampler = {t: run for run, t in SWEEP}[temperature]

    def scored(base, key):
        found = {split_seed(run)[1]: record for run, record in records.items()
                 if split_seed(run)[0] == base and key in record}
        return {seed: found[seed] for seed in sorted(found)}

    full = scored(sampler, "averaged_test_block_nll")
    sides = {"full_vs_rmsprop_single": ("single_test_block_nll", "RMSprop single"),
             "full_vs_M2": ("averaged_test_block_nll", "M2: RMSprop iterates averaged")}
    out = {}
    for name, (key, label) in sides.items():
        other = scored("paper/rmsprop", key)
        if not full or not other:
            continue
        tokens = {tuple(r["test_block_tokens"]) for r in [*full.values(), *other.values()]}
        if len(tokens) != 1:
            raise ValueError(f"{name}: the scored runs do not score the same test blocks")
        result = paired_bootstrap([r["averaged_test_block_nll"] for r in full.values()],
                                  [r[key] for r in other.values()], list(tokens.pop()),
                                  num_resamples=num_resamples)
        out[name] = {"a": f"pSGLD averaged, T = {temperature:g}", "b": label,
                     "seeds_a": list(full), "seeds_b": list(other),
                     "ppl_a_summary": seed_summary(result.ppl_a),
                     "ppl_b_summary": seed_summary(result.ppl_b), **result.as_dict()}
    return out


def rescore(out, data, records_dir=None, log=print):
    """Add the per-block test scores to finished sampler runs that lack them, from the
    samples stored in their directory; returns the runs rescored.

    Raises:
        ValueError: the stored samples do not reproduce the record's perplexity.
    """
    from tfktopic.bayes import PredictiveSamples

    blocks, done = None, []
    for run in RUNS:
        path = pathlib.Path(out) / run / "result.json"
        samples_dir = path.parent / "samples"
        if not path.exists() or not (samples_dir / "samples.json").exists():
            continue
        record = json.loads(path.read_text())
        if "averaged_test_block_nll" in record or _temperature(run) == 0.0:
            continue
        samples = PredictiveSamples.load(samples_dir, "test")
        if len(samples) != record["num_samples"] or not math.isclose(
                samples.perplexity(), record["averaged_test_ppl"], rel_tol=1e-9):
            raise ValueError(f"{samples_dir}: {len(samples)} samples, perplexity "
                             f"{samples.perplexity():.4f}; the record has "
                             f"{record['num_samples']}, {record['averaged_test_ppl']:.4f}")
        blocks = blocks or stream_blocks(data["test"])
        score_blocks(record, blocks, samples=samples)
        record["rescored"] = "per-block scores added from the stored samples (--rescore)"
        path.write_text(json.dumps(record, indent=1))
        if records_dir:
            copy_record(path, records_dir, run)
        if log:
            log(f"{run}: rescored ({len(samples)} samples)")
        done.append(run)
    return done


def main(argv=None):
    from tfktopic import presets
    from tfktopic.bayes.sgmcmc_presets import ABLATION_SCHEDULE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptb-dir", default=str(pathlib.Path(__file__).resolve().parents[3]
                                                 / "shared" / "data" / "ptb"))
    parser.add_argument("--out", required=True, help="directory of the runs (resumable)")
    parser.add_argument("--runs", default=",".join(ORDER),
                        help="comma-separated subset of: " + ", ".join(RUNS)
                        + " (trained in the order given)")
    parser.add_argument("--records", default=None,
                        help="directory to copy each finished run's record to, as "
                        "<setting>_<name>.json (studies/results/ablation: commit them)")
    parser.add_argument("--minibatches", choices=["successive", "random"],
                        default="successive")
    parser.add_argument("--quick", action="store_true",
                        help="60k training tokens, hidden 32, 3 epochs, burn-in 1 (smoke run)")
    parser.add_argument("--rescore", action="store_true",
                        help="add the per-block test scores to finished sampler records "
                        "that lack them, from their stored samples, and exit")
    args = parser.parse_args(argv)
    runs = args.runs.split(",")
    for run in runs:
        try:
            split_seed(run)
        except ValueError as error:
            parser.error(f"--runs: {error}")

    from tfktopic.bayes.setups import ptb_data
    from tfktopic.data import Vocabulary, read_ptb

    ptb_dir = pathlib.Path(args.ptb_dir)
    if not (ptb_dir / "ptb.train.txt").exists():
        parser.error(f"--ptb-dir: {ptb_dir / 'ptb.train.txt'} not found")
    preset = presets.preset("sgmcmc_ptb", "small").settings()
    sizes = preset["model"]
    schedule = dict(ABLATION_SCHEDULE)
    if args.quick:
        sizes.update(hidden_dim=32, embedding_dim=32)
        schedule.update(max_epochs=3, burn_in_epochs=1, patience=1, learning_rate=3e-3)
    vocab = Vocabulary.build(read_ptb(ptb_dir / "ptb.train.txt"), min_count=1)
    data = ptb_data(ptb_dir, vocab, preset["data"]["num_steps"],
                    preset["training"]["batch_size"],
                    limit_tokens=60_000 if args.quick else None, minibatches=args.minibatches)
    out = pathlib.Path(args.out)
    if args.rescore:
        rescore(out, data, args.records)
        return 0
    records = {}
    for run in runs:
        finished = {r: json.loads((out / r / "result.json").read_text()) for r in RUNS
                    if (out / r / "result.json").exists()}
        if not seed_run_wanted(run, finished):
            print(f"{run}: skipped, T = {chosen_temperature(finished):g} is chosen on "
                  "validation so far", flush=True)
            continue
        records[run] = train_one(run, out / run, data, len(vocab), sizes, schedule,
                                 args.minibatches == "successive")
        if args.records:
            copy_record(out / run / "result.json", args.records, run)
    for run in RUNS:  # runs finished by earlier commands
        path = out / run / "result.json"
        if run not in records and path.exists():
            records[run] = json.loads(path.read_text())
    summary = table(records)
    summary["quick"] = args.quick
    (out / "table.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
