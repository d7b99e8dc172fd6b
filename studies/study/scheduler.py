"""The scheduler of the converged, multi-seed comparison study (issue 13; DESIGN.md §5a).

It runs the protocol of `studies.study.protocol` (what is run and what counts): starts each
pending run as its ``tfktopic train`` command, claims the runs it starts (`claim`), collects
each finished run's record into ``studies/results/study/`` (`collect`), scores it under the
other protocols (`score_protocols`) and counts its parameters (`count_parameters`).

Usage::

    python -m studies.study run [--corpus apnews|ptb ...] [--arms lstm doc_lstm ...] [--workers 2]
    python -m studies.study status [--corpus ptb]
    python -m studies.study.report [--corpus ptb]  # -> results/study/<corpus>_summary.{json,md}
    python -m studies.study protocols [--corpus ptb] [--arms tcnlm ...]

``protocols`` scores each finished run of a model that takes a topic context under the
papers' protocol (every other sentence of the document as context) and with every context
empty, with its kept model on the same test targets (`run` does it as each such run lands),
and adds the per-document NLLs to its record (`protocol.EXTRA_PROTOCOLS`). It also adds each
run's parameter counts (`count_parameters`: trained by gradient, and sampled -- LDA+LSTM's
LDA, rGBN-RNN's Phi and Pi) to records collected before ``tfktopic train`` stored them.

Runs go to ``runs/study/`` (``--out``); a cut-off run resumes exactly when
``run`` is called again. Each worker is one process with one TensorFlow
thread (2 workers on 2 cores).

Several schedulers may share the runs (``run --corpus apnews ptb`` on one core and
``run --corpus ptb apnews`` on the other): each run is claimed under an exclusive lock
(`claim`), so no run is started twice, and a scheduler takes the first unclaimed pending run
of its corpora in its order. It waits while runs it cannot start remain (held by another
scheduler: their landing may unlock seeds), and ends when nothing is pending.

The protocol's names are read as ``protocol.NAME`` at run time (a test that replaces one on
`studies.study.protocol` replaces it here too).
"""

import argparse
import fcntl
import json
import os
import pathlib
import subprocess
import sys
import time

from studies.common import code_snapshot, portable
from studies.study import protocol


def _log(message):
    print(f"[study {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def score_protocols(corpus, arm, config, seed, out_root):
    """Score a finished run's kept model on its test split under `protocol.EXTRA_PROTOCOLS` and
    add the scores to its record (atomic, each once).

    The run directory's model is first scored leak-free again: it must reproduce the
    record's test perplexity (the directory holds the model the record describes).

    Args:
        corpus, arm, config, seed: the run's key (its record must exist).
        out_root: the study's run directories (``--out``).

    Returns:
        dict record key -> test perplexity, or `None` for a model without a topic
        context (the same under every protocol) or a diverged run.

    Raises:
        FileNotFoundError: the run directory is not here (the run was made elsewhere).
        ValueError: the directory's model does not reproduce the record, or a protocol
            scored other target tokens.
    """
    from tfktopic.atomic import write_text
    from tfktopic.models import registry
    from tfktopic.runs import load_run
    from tfktopic.runs.data import score_perplexity
    from tfktopic.runs.reports import run_splits

    path = protocol.record_path(corpus, arm, config, seed)
    record = json.loads(path.read_text())
    if record.get("diverged") or not registry.get(record["model"]).has_topics:
        return None
    missing = [key for key in protocol.EXTRA_PROTOCOLS if key not in record]
    if not missing:
        return {key: record[key]["perplexity"] for key in protocol.EXTRA_PROTOCOLS}
    out = protocol.run_dir(out_root, corpus, arm, config, seed)
    if not (out / "model.keras").exists():
        name = protocol.run_name(arm, config, seed)
        raise FileNotFoundError(f"{out}: no model.keras (run {name} was not trained here)")
    run = load_run(out)
    test = run_splits(run.config)["test"]
    batch = int(run.config.get("training", {}).get("batch_size", 64))

    def score(rule):
        result, _ = score_perplexity(run.name, run.model, test, run.lm_vocab, run.topic_vocab,
                                     run.config["data"], rule, batch)
        return result

    again, recorded = score("preceding").perplexity, record["test"]["perplexity"]
    if abs(again / recorded - 1.0) > 1e-4:
        raise ValueError(f"{out}: its model scores {again:.4f} leak-free, the record "
                         f"{recorded:.4f}")
    for key in missing:
        result = score(protocol.EXTRA_PROTOCOLS[key])
        if [int(t) for t in result.document_tokens] != record["test_documents"]["tokens"]:
            raise ValueError(f"{out}: protocol {protocol.EXTRA_PROTOCOLS[key]} scored other target "
                             "tokens")
        record[key] = {"perplexity": result.perplexity, "protocol": result.protocol,
                       "nll": [round(float(v), 6) for v in result.document_nll]}
    write_text(path, json.dumps(portable(record), indent=1) + "\n")
    return {key: record[key]["perplexity"] for key in protocol.EXTRA_PROTOCOLS}


def count_parameters(corpus, arm, config, seed, out_root):
    """Add a finished run's parameter counts (`tfktopic.runs.parameter_counts`) to its record
    (atomic, once), from the model kept in its run directory.

    Records collected from a run trained before `tfktopic train` stored them lack them.

    Returns:
        dict: the counts, or `None` for a diverged run.

    Raises:
        FileNotFoundError: the run directory is not here.
        ValueError: the directory's model is not the record's (other constructor settings).
    """
    from tfktopic.atomic import write_text
    from tfktopic.runs import load_run, parameter_counts

    path = protocol.record_path(corpus, arm, config, seed)
    record = json.loads(path.read_text())
    if record.get("diverged"):
        return None
    if "parameters" in record:
        return record["parameters"]
    out = protocol.run_dir(out_root, corpus, arm, config, seed)
    if (out / "model.keras").exists():
        run = load_run(out)
        if json.loads(json.dumps(run.config["model_config"])) != record["model_config"]:
            raise ValueError(f"{out}: its model settings are not the record's")
        record["parameters"] = parameter_counts(run.model)
    else:
        twin = _same_sized(corpus, record)
        if twin is None:
            name = protocol.run_name(arm, config, seed)
            raise FileNotFoundError(f"{out}: no model.keras (run {name} "
                                    "was not trained here), and no record of a model of the "
                                    "same sizes has counts")
        twin_path, twin = twin
        record["parameters"] = {**twin["parameters"],   # its run's name: arm/config-sN
                                "counted_on": f"{twin_path.parent.name}/{twin_path.stem}"}
    write_text(path, json.dumps(portable(record), indent=1) + "\n")
    return record["parameters"]


#: Model settings that change no weight's shape (how weights start, what is dropped).
SHAPELESS_SETTINGS = ("initialization", "dropout")


def _same_sized(corpus, record):
    """A record of `corpus` with parameter counts measured on its own model whose model has
    the shapes of `record`'s: the same model, vocabulary sizes and model settings but for
    `SHAPELESS_SETTINGS`; (its path, the record), or `None` if there is none."""
    def shape_of(r):
        config = {k: v for k, v in r["model_config"].items() if k not in SHAPELESS_SETTINGS}
        sizes = {name: v.get("size") for name, v in (r.get("vocabularies") or {}).items()}
        return r["model"], json.dumps(config, sort_keys=True), json.dumps(sizes, sort_keys=True)

    wanted = shape_of(record)
    for path in sorted((protocol.RESULTS / corpus).glob("*/*.json")):
        other = json.loads(path.read_text())
        if other.get("diverged") or "parameters" not in other or \
                "counted_on" in other["parameters"]:
            continue
        if shape_of(other) == wanted:
            return path, other
    return None


def score_other_protocols(corpus, arms, out_root):
    """`score_protocols` for every finished run of `arms` that lacks a score, and
    `count_parameters` for every one that lacks its counts (a run whose directory is not
    here is reported and skipped); returns how many were scored."""
    scored = 0
    for arm in arms:
        for config in protocol.full_grid(corpus):
            for seed in protocol.SEEDS:
                if not protocol.finished(corpus, arm, config, seed):
                    continue
                name = protocol.run_name(arm, config, seed)
                record = json.loads(protocol.record_path(corpus, arm, config, seed).read_text())
                if "parameters" not in record and not record.get("diverged"):
                    try:
                        counts = count_parameters(corpus, arm, config, seed, out_root)
                        _log(f"{name}: {counts['gradient']:,} parameters trained by gradient, "
                             f"{counts['sampled']:,} sampled")
                    except FileNotFoundError as error:
                        _log(f"no parameter counts for {name}: {error}")
                        counts = None
                    if counts and "counted_on" in counts:
                        _log(f"{name}: counted on the same-sized {counts['counted_on']}")
                if all(key in record for key in protocol.EXTRA_PROTOCOLS):
                    continue
                try:
                    ppl = score_protocols(corpus, arm, config, seed, out_root)
                except FileNotFoundError as error:
                    _log(f"skipped {name}: {error}")
                    continue
                if ppl is not None:
                    scored += 1
                    _log(f"{name}: test {ppl[protocol.PAPERS_PROTOCOL]:.2f} under the papers' "
                         f"protocol, {ppl[protocol.NO_CONTEXT]:.2f} without a topic context")
    return scored


def collect_diverged(corpus, arm, config, seed, out, cmd):
    """The record of a run that stopped at a non-finite loss (never chosen)."""
    from tfktopic.atomic import write_text

    run = json.loads((pathlib.Path(out) / "run.json").read_text())
    record = {"corpus": corpus, "arm": arm, "config": config, "seed": seed, "diverged": True,
              "command": " ".join(["tfktopic"] + [c for c in cmd[3:]]),
              "training": {"best_val_ppl": None, "stopped_by": "diverged",
                           "epochs": run["progress"]["epochs_done"]},
              "history": run["progress"]["history"]}
    path = protocol.record_path(corpus, arm, config, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(portable(record), indent=1) + "\n")
    return path


def collect(corpus, arm, config, seed, out, cmd, path=None):
    """Copy a finished run's record into studies/results/study (atomic).

    Args:
        corpus, arm, config, seed: the run's key (recorded).
        out: the run's ``--out`` directory.
        cmd: its command (recorded, from ``-m tfktopic`` on).
        path: where to write the record (default: `protocol.record_path` of the key).

    Returns:
        The record's path.
    """
    from tfktopic.atomic import write_text

    out = pathlib.Path(out)
    results = json.loads((out / "results.json").read_text())
    run = json.loads((out / "run.json").read_text())
    documents = json.loads((out / "test_documents.json").read_text())
    record = {
        "corpus": corpus, "arm": arm, "config": config, "seed": seed,
        "model": run["model"], "preset": run["preset"], "model_config": run["model_config"],
        "data": run["data"], "training_settings": run["training"],
        "command": " ".join(["tfktopic"] + [c for c in cmd[3:]]),
        "test": results["test"], "unigram_ppl": results["unigram_ppl"],
        "training": results["training"], "history": run["progress"]["history"],
        "vocabularies": run.get("vocabularies"), "tfktopic_version": run.get("tfktopic_version"),
        "code_commits": code_commits(out),
        "test_documents": {"nll": documents["nll"], "tokens": documents["tokens"]},
    }
    for key in ("topics", "generated", "topic_quality", "parameters"):
        if key in results:
            record[key] = results[key]
    if path is None:
        path = protocol.record_path(corpus, arm, config, seed)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(portable(record), indent=1) + "\n")
    return path


def _head_commit():
    """The repository's HEAD commit (with "-dirty" if tracked files changed), or None."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=protocol.REPO,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=protocol.REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("-dirty" if dirty.strip() else "")


def code_commits(out):
    """The commits whose code trained a run: one line per (re)start, in ``commits.txt``."""
    path = pathlib.Path(out) / "commits.txt"
    return path.read_text().split() if path.exists() else []


CLAIM_NAME = ".claim"


def claim(out):
    """Claim the run of directory `out` for this scheduler: an exclusive ``flock`` on
    ``out/.claim`` (created with its directory).

    The kernel releases it when every process holding it has ended (`_start` passes it to
    the training process too, so that a scheduler killed alone leaves its run claimed until
    that run ends), so a claim never outlives its run.

    Returns:
        The open lock file (close it to release the claim), or `None` when another
        process holds the claim.
    """
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / CLAIM_NAME, "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _start(corpus, arm, config, seed, out_root, claimed=None):
    out = protocol.run_dir(out_root, corpus, arm, config, seed)
    out.mkdir(parents=True, exist_ok=True)
    cmd = protocol.command(corpus, arm, config, seed, out)
    # The run imports a frozen copy of HEAD's code (`code_snapshot`), not the working tree
    # that later commits change under it.
    code, commit = code_snapshot(pathlib.Path(out_root) / "code", protocol.REPO)
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}
    with open(out / "commits.txt", "a") as commits:   # which code trained it (`code_commits`)
        commits.write(f"{commit or _head_commit()}\n")
    log = open(out / "train.log", "a")
    log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} (code {code}) {' '.join(cmd)}\n")
    log.flush()
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=code,
                               pass_fds=(claimed.fileno(),) if claimed else ())
    return process, out, cmd, log


def _score_other_protocols(corpus, arm, out_root):
    """`score_other_protocols` for an arm, in a process of one TensorFlow thread (the scheduler
    itself stays free of TensorFlow); a failure is logged, not fatal."""
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "studies.study", "protocols", "--corpus", corpus,
           "--arms", arm, "--out", str(out_root)]
    # One scorer of a corpus at a time: another scheduler's may be rewriting the same records.
    lock_path = pathlib.Path(out_root) / f".protocols-{corpus}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(cmd, cwd=protocol.REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        _log(f"other protocols of {arm} failed (exit {done.returncode}): "
             f"{(done.stderr.strip().splitlines() or [''])[-1]}")


def run(corpora, arms, workers, out_root):
    """Run the pending runs, `workers` at a time, until none is left (resumable).

    Args:
        corpora: a corpus, or several in order of priority: a scheduler starts the first
            pending run of its first corpus that no other scheduler has claimed, then of
            the next (`claim`).
        arms: the arms to run (of a single corpus), or `None` for each corpus's arms.
        workers: runs at a time.
        out_root: the runs' root directory (``--out``).

    Returns:
        0, or 1 when a run failed (the others go on).
    """
    corpora = [corpora] if isinstance(corpora, str) else list(corpora)
    if arms is not None and len(corpora) > 1:
        raise ValueError(f"arms: name them for one corpus, not for {corpora}")
    arms_by = {c: list(arms) if arms is not None else list(protocol.arms_of(c)) for c in corpora}
    active = {}
    failed = set()
    while True:
        for process, (key, out, cmd, log, claimed) in list(active.items()):
            code = process.poll()
            if code is None:
                continue
            log.close()
            del active[process]
            corpus, arm, config, seed = key
            status = json.loads((out / "run.json").read_text()).get("status") \
                if (out / "run.json").exists() else None
            if code == 0 and (out / "results.json").exists():
                path = collect(corpus, arm, config, seed, out, cmd)
                claimed.close()          # the record is there: nobody starts it again
                _log(f"finished {run_label(key)}: {path.relative_to(protocol.REPO)}")
                _score_other_protocols(corpus, arm, out_root)
            elif status == "diverged":
                path = collect_diverged(corpus, arm, config, seed, out, cmd)
                claimed.close()
                _log(f"diverged {run_label(key)}: {path.relative_to(protocol.REPO)}")
            else:
                claimed.close()
                failed.add(key)
                _log(f"FAILED {run_label(key)} (exit {code}); see {out / 'train.log'}")
        busy = {key for key, *_ in active.values()}
        todo = [(corpus, *key) for corpus in corpora
                for key in protocol.pending(corpus, arms_by[corpus])
                if (corpus, *key) not in busy and (corpus, *key) not in failed]
        held = []                        # pending, but claimed by another scheduler
        while todo and len(active) < workers:
            key = todo.pop(0)
            claimed = claim(protocol.run_dir(out_root, *key))
            if claimed is None:
                held.append(key)
                continue
            if protocol.finished(*key):           # it landed between `pending` and the claim
                claimed.close()
                continue
            process, out, cmd, log = _start(*key, out_root, claimed)
            active[process] = (key, out, cmd, log, claimed)
            _log(f"started {run_label(key)} (pid {process.pid})")
        if not active and not held:
            break
        time.sleep(10)
    _log(f"done; {len(failed)} failed: {sorted(run_label(k) for k in failed)}")
    return 1 if failed else 0


def run_label(key):
    """``arm/config-s<seed>``, prefixed by its corpus when that is not APNEWS (the log's
    name of a run)."""
    corpus, *run = key
    name = protocol.run_name(*run)
    return name if corpus == "apnews" else f"{corpus}:{name}"


def status(corpus, arms, out_root=None):
    """Print each arm's finished records, its chosen configuration and (with
    `out_root`) the runs in progress: epochs done and best validation so far."""
    for arm in arms:
        done = []
        for config in protocol.full_grid(corpus):
            for seed in protocol.SEEDS:
                path = protocol.record_path(corpus, arm, config, seed)
                if path.exists():
                    record = json.loads(path.read_text())
                    if record.get("diverged"):
                        done.append(f"{config}-s{seed}: diverged at epoch "
                                    f"{record['training']['epochs']}")
                        continue
                    done.append(f"{config}-s{seed}: test {record['test']['perplexity']:.2f} "
                                f"(val {record['training']['best_val_ppl']:.2f}, "
                                f"{record['training']['stopped_by']} at "
                                f"{record['training']['epochs']})")
                elif out_root is not None:
                    run_json = protocol.run_dir(out_root, corpus, arm, config, seed) / "run.json"
                    if run_json.exists():
                        progress = json.loads(run_json.read_text()).get("progress", {})
                        best_val = progress.get("best_val_ppl")
                        done.append(f"{config}-s{seed}: in progress, "
                                    f"{progress.get('epochs_done', 0)} epochs done"
                                    + (f", best val {best_val:.2f}" if best_val else ""))
        best = protocol.chosen_config(corpus, arm)
        landed = sum("in progress" not in line for line in done)
        print(f"{arm}: {landed} runs" + (f", chosen {best}" if best else ""))
        for line in done:
            print(f"   {line}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.study",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["run", "status", "protocols"],
                        help="the tables: python -m studies.study.report --corpus CORPUS")
    parser.add_argument("--corpus", nargs="+", default=["apnews"],
                        choices=sorted(protocol.CORPORA),
                        help="the corpus; for run, several in order of priority (another "
                        "scheduler may share them: `claim`)")
    parser.add_argument("--arms", nargs="+", default=None,
                        help="arms to run (default: every arm of the corpus's study)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(protocol.REPO / "runs" / "study"))
    args = parser.parse_args(argv)
    if len(args.corpus) > 1 and (args.action != "run" or args.arms):
        parser.error(f"--corpus: one corpus for {args.action}"
                     + (" with --arms" if args.action == "run" else "")
                     + f", got {' '.join(args.corpus)}")
    if args.action == "run" and len(args.corpus) > 1:
        return run(args.corpus, None, args.workers, args.out)
    args.corpus = args.corpus[0]
    unknown = set(args.arms or ()) - set(protocol.arms_of(args.corpus))
    if unknown:
        parser.error(f"--arms: {sorted(unknown)} are not arms of {args.corpus} "
                     f"({', '.join(protocol.arms_of(args.corpus))})")
    args.arms = args.arms or list(protocol.arms_of(args.corpus))
    if args.action == "run":
        return run(args.corpus, args.arms, args.workers, args.out)
    if args.action == "status":
        return status(args.corpus, args.arms, args.out)
    score_other_protocols(args.corpus, args.arms, args.out)              # protocols
    return 0


if __name__ == "__main__":
    sys.exit(main())
