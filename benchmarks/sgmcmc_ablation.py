"""Gan et al. (2017) Table 7 ablation on PTB small, resumable (issue 15).

    python -m benchmarks.sgmcmc_ablation --out runs/ablation            # every run (hours)
    python -m benchmarks.sgmcmc_ablation --out runs/ablation --runs paper/rmsprop
    python -m benchmarks.sgmcmc_ablation --quick --out runs/ablation-quick   # smoke run, minutes

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
import pathlib
import sys
import time

import keras

RUNS = ("paper/rmsprop", "paper/psgld", "authors_code/rmsprop", "authors_code/psgld",
        "paper/psgld_T0.1", "paper/psgld_T0.01")
#: The order the default ``--runs`` trains them in: the runs expected to stop sooner first
#: (RMSprop: 4 and 11 epochs; T = 0.01: 20 epochs, 1.9 h of one core), T = 1 pSGLD
#: last. Its noise dominates the drift (sgmcmc_issue15.md), so it needs the most epochs
#: (test average still falling ~1.3 per epoch at epoch 20 on 2026-11-25: ~5 h of one
#: core); twice a new machine ended it half-way with the others
#: not started, since a run's state lives in ``--out`` on the machine and only finished
#: records are committed.
#: The temperature sweep of the "paper" setting: (run, T).
SWEEP = (("paper/psgld", 1.0), ("paper/psgld_T0.1", 0.1), ("paper/psgld_T0.01", 0.01))
ORDER = ("paper/rmsprop", "paper/psgld_T0.01", "authors_code/rmsprop", "authors_code/psgld",
         "paper/psgld_T0.1", "paper/psgld")


def _temperature(run):
    """None (the setting's), 0 (RMSprop) or the cold-sweep temperature of a run."""
    name = run.split("/")[1]
    if name == "rmsprop":
        return 0.0
    if name.startswith("psgld_T"):
        return float(name[len("psgld_T"):])
    return None


def train_one(run, out, data, vocab_size, sizes, schedule, successive, seed, log=print):
    """Train (or resume) one run of the ablation; returns its record.

    Args:
        run: "<setting>/<name>", one of `RUNS`.
        out: the run's directory (backup, samples, result.json).
        data: `ptb_data` output.
        vocab_size: vocabulary size.
        sizes: the ``model`` settings of an ``sgmcmc_ptb`` preset.
        schedule: `ABLATION_SCHEDULE`-like dict.
        successive: stateful model over the streams (else random windows).
        seed: initialisation and noise seed.

    Returns:
        dict: the run's record (also written to ``out/result.json``).
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
    setting = run.split("/")[0]
    temperature = _temperature(run)
    sampler = temperature != 0.0
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
    monitor = "valid_avg_ppl" if sampler else "val_ppl"
    stop = keras.callbacks.EarlyStopping(
        monitor=monitor, mode="min", patience=schedule["patience"],
        restore_best_weights=not sampler,
        start_from_epoch=schedule["burn_in_epochs"] + 1 if sampler else 0)
    callbacks = [keras.callbacks.BackupAndRestore(str(out / "backup")), collector, stop]
    if successive:
        callbacks.insert(0, ResetStates())
    log(f"{run}: T = {optimizer.temperature:.3g}, {steps_per_epoch} steps per epoch, "
        f"N = {data['num_train_tokens']}")
    start = time.perf_counter()
    history = model.fit(data["train"], validation_data=data["valid"],
                        epochs=schedule["max_epochs"], callbacks=callbacks, verbose=2)
    seconds = time.perf_counter() - start
    model.reset_states()
    record = {"run": run, "setting": setting, "temperature": optimizer.temperature,
              "optimizer": optimizer.get_config(), "schedule": schedule,
              "minibatches": "successive" if successive else "random",
              "epochs_run": len(history.epoch), "steps_per_epoch": steps_per_epoch,
              "train_seconds_this_session": seconds,
              "history": {k: [float(x) for x in v] for k, v in history.history.items()}}
    if not sampler:
        record["single_valid_ppl"] = evaluate_perplexity(model, data["valid"]).perplexity
        model.reset_states()
        record["single_test_ppl"] = evaluate_perplexity(model, data["test"]).perplexity
    if collector.num_samples:
        valid, test = collector.samples("valid"), collector.samples("test")
        record.update(
            num_samples=len(test),
            averaged_valid_ppl=valid.perplexity(), averaged_test_ppl=test.perplexity(),
            last_sample_valid_ppl=float(valid.sample_perplexities()[-1]),
            last_sample_test_ppl=float(test.sample_perplexities()[-1]),
            curves={s: test.curve(s) for s in ("thinned", "forward", "backward")})
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
    """Table 7 from the finished runs' records (missing runs are left out)."""
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
        if row.get("rmsprop_single") and row.get("full_averaged_psgld"):
            row["full_over_rmsprop"] = row["full_averaged_psgld"] / row["rmsprop_single"]
        rows[setting] = row
    sweep = {}
    for run, temperature in SWEEP:
        if records.get(run) and "averaged_valid_ppl" in records[run]:
            sweep[str(temperature)] = {"valid": records[run]["averaged_valid_ppl"],
                                       "test": records[run]["averaged_test_ppl"]}
    out = {"table7": rows, "temperature_sweep": sweep}
    if sweep:
        chosen = min(sweep, key=lambda t: sweep[t]["valid"])
        out["chosen_on_validation"] = {"temperature": float(chosen), **sweep[chosen]}
        rms = rows.get("paper", {}).get("rmsprop_single")
        if rms:
            out["chosen_on_validation"]["over_rmsprop_single"] = sweep[chosen]["test"] / rms
    return out


def main(argv=None):
    from tfktopic import presets
    from tfktopic.bayes.sgmcmc_presets import ABLATION_SCHEDULE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptb-dir", default=str(pathlib.Path(__file__).resolve().parents[2]
                                                 / "shared" / "data" / "ptb"))
    parser.add_argument("--out", required=True, help="directory of the runs (resumable)")
    parser.add_argument("--runs", default=",".join(ORDER),
                        help="comma-separated subset of: " + ", ".join(RUNS)
                        + " (trained in the order given)")
    parser.add_argument("--records", default=None,
                        help="directory to copy each finished run's record to, as "
                        "<setting>_<name>.json (benchmarks/results/ablation: commit them)")
    parser.add_argument("--minibatches", choices=["successive", "random"],
                        default="successive")
    parser.add_argument("--quick", action="store_true",
                        help="60k training tokens, hidden 32, 3 epochs, burn-in 1 (smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = args.runs.split(",")
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        parser.error(f"--runs: unknown {unknown}; choose from {', '.join(RUNS)}")

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
    records = {}
    for run in runs:
        records[run] = train_one(run, out / run, data, len(vocab), sizes, schedule,
                                 args.minibatches == "successive", args.seed)
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
