"""Start, or resume, the long training jobs of the open issues with one command.

    python -m studies.long_runs start [--jobs defaults+imdb,defaults+bleu] [--dry-run]
    python -m studies.long_runs status

Jobs (each resumes from its directory under ``runs/``, each one process with one
TensorFlow thread, so two lanes fill 2 cores):

* ``apnews``, ``ptb``, ``imdb`` -- the comparison study on that corpus (`studies.study.scheduler`
  ``run``, 1 worker; IMDB: its arms in `studies.study.protocol.IMDB_ARMS`' order, the
  document LSTM and GBN-RNN first);
* ``ablation`` -- the SG-MCMC Table 7 ablation (`studies.claims.sgmcmc_ablation`, its
  default order), from a code snapshot of HEAD, each finished record copied to
  ``studies/results/ablation/`` as it lands;
* ``defaults`` -- every family's defaults on the held-out corpora, 3 seeds
  (`studies.claims.defaults` ``run``);
* ``bleu`` -- the BLEU claim's retrained APNEWS models, training seeds 1-2
  (`studies.claims.bleu_claim` ``train``);
* ``sentiment`` -- the IMDB sentiment claim's TopicRNN, RNN and LSTM feature extractors
  under the ``cpu`` protocol, 3 seeds (`studies.claims.imdb_sentiment` ``arms``).

A **lane** (``--jobs a+b``) runs its jobs one after the other in one detached process
(`run_lane`), so that a core freed by a finished job goes to the next one within the session.
The study's jobs are shared: a lane's adjacent study jobs are one scheduler over those
corpora in that order (``studies.study run --corpus apnews ptb``), and two lanes'
schedulers split the pending runs between them, each run claimed by one
(`studies.study.scheduler.claim`). ``defaults``, ``defaults_imdb10k``, ``bleu`` and
``sentiment`` are shared too: each of their runs holds its run directory's lock, and a lane
that meets a run another lane holds moves on to the next one (a BLEU run being scored holds
no lock: two lanes reaching it score it twice, to the same record). The ablation is not: a
lane reaching it while another lane runs it (its lock ``runs/jobs/ablation.lock`` held)
skips it. The default lanes, ``defaults_imdb10k+bleu+sentiment+imdb`` and
``bleu+defaults_imdb10k+sentiment+imdb``, are the open issues' jobs still to run (issue 51's
IMDB 10,000-review topic test on one core, the BLEU seeds on the other); each core, once a
job has nothing left to start, goes on to the next, and the two meet in the jobs they share.

A lane whose process is alive (its pid in ``runs/jobs/<lane>.pid``) is left alone. On a new
machine ``runs/`` is empty and only the committed records remain: the study's scheduler
reads its records from ``studies/results/study/``, the claims skip what is recorded under
``studies/results/``, and ``start`` copies the committed ablation records back to
``runs/ablation/<run>/result.json``, so no finished run is trained again. A run that was
cut off on another machine starts again from epoch 0. Records are not committed by the
lanes: commit ``studies/results/`` as they land.
"""

import argparse
import contextlib
import fcntl
import importlib.util
import os
import pathlib
import subprocess
import sys

from studies.common import SHARED_DATA, code_snapshot

REPO = pathlib.Path(__file__).resolve().parents[1]
JOBS = ("apnews", "ptb", "imdb", "ablation", "defaults", "defaults_imdb10k", "bleu",
        "sentiment")
STUDY_JOBS = ("apnews", "ptb", "imdb")   # shared by lanes (their runs are claimed one by one)
#: Jobs a lane runs only while it holds the job's lock (the others share their runs).
EXCLUSIVE_JOBS = ("ablation",)
#: job -> (module, its arguments, log file under runs/): the claims' resumable commands.
CLAIM_JOBS = {
    "defaults": ("studies.claims.defaults",
                 ["run", "--corpus", "war_and_peace", "imdb", "--seeds", "0", "1", "2"],
                 "defaults/lane.log"),
    "defaults_imdb10k": ("studies.claims.defaults",
                         ["run", "--corpus", "imdb_10k", "--seeds", "0", "1", "2"],
                         "defaults/lane_imdb10k.log"),
    "bleu": ("studies.claims.bleu_claim", ["train", "--seeds", "1", "2"], "bleu/lane.log"),
    "sentiment": ("studies.claims.imdb_sentiment", ["arms", "--protocol", "cpu"],
                  "imdb_sentiment/lane.log"),
}
DEFAULT_LANES = "defaults_imdb10k+bleu+sentiment+imdb,bleu+defaults_imdb10k+sentiment+imdb"
ABLATION_RECORDS = REPO / "studies" / "results" / "ablation"
_THREADS = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
            "OMP_NUM_THREADS": "1"}


def restore_ablation_records(records=ABLATION_RECORDS, out=None):
    """Copy each committed ablation record back to ``out/<setting>/<name>/result.json``
    where it is missing; returns the runs restored."""
    from studies.claims.sgmcmc_ablation import RUNS, record_name

    out = pathlib.Path(out or REPO / "runs" / "ablation")
    restored = []
    for run in RUNS:
        record, result = pathlib.Path(records) / record_name(run), out / run / "result.json"
        if record.exists() and not result.exists():
            result.parent.mkdir(parents=True, exist_ok=True)
            result.write_text(record.read_text())
            restored.append(run)
    return restored


def job_command(job, repo=REPO, shared=SHARED_DATA, snapshot=True):
    """(argv, working directory, extra environment, log file) of a job, or of a step of
    study jobs joined by ``+`` (one scheduler over those corpora in that order); ``snapshot``:
    extract the code snapshot the ablation runs from (without it, the live code)."""
    runs = pathlib.Path(repo) / "runs"
    if _is_study(job):
        argv = [sys.executable, "-m", "studies.study", "run", "--corpus", *job.split("+"),
                "--workers", "1"]
        return argv, pathlib.Path(repo), {}, runs / "study" / f"scheduler_{job}.log"
    if job == "ablation":
        code = (code_snapshot(runs / "ablation" / "code", repo)[0] if snapshot
                else pathlib.Path(repo))
        argv = [sys.executable, "-m", "studies.claims.sgmcmc_ablation",
                "--out", str(runs / "ablation"), "--ptb-dir", str(pathlib.Path(shared) / "ptb"),
                "--records", str(pathlib.Path(repo) / "studies" / "results" / "ablation")]
        env = {**_THREADS, "PYTHONPATH": str(code), "TFKTOPIC_SHARED_DATA": str(shared)}
        return argv, code, env, runs / "ablation" / "ablation.log"
    if job in CLAIM_JOBS:
        module, arguments, log = CLAIM_JOBS[job]
        env = {**_THREADS, "TFKTOPIC_SHARED_DATA": str(shared)}
        return [sys.executable, "-m", module, *arguments], pathlib.Path(repo), env, runs / log
    raise ValueError(f"unknown job {job!r}; choose from {', '.join(JOBS)}")


def _is_study(step):
    """Whether a step (jobs joined by ``+``) is study jobs only: one shared scheduler."""
    return all(job in STUDY_JOBS for job in step.split("+"))


def _pid_file(lane, repo=REPO):
    return pathlib.Path(repo) / "runs" / "jobs" / f"{lane}.pid"


def steps(jobs):
    """A lane's jobs as the steps it runs in turn: the ablation alone, adjacent study jobs
    joined into one (``apnews+ptb``: one scheduler)."""
    out = []
    for job in jobs:
        if job in STUDY_JOBS and out and _is_study(out[-1]):
            out[-1] += f"+{job}"
        else:
            out.append(job)
    return out


def running(lane, repo=REPO):
    """The pid of the lane's live process (`lane`: its jobs joined by ``+``), or None."""
    try:
        pid = int(_pid_file(lane, repo).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def run_lane(jobs, repo=REPO, log=print):
    """Run `jobs` one after the other in this process (one core's lane), as `steps`.

    The ablation runs under its exclusive lock (``runs/jobs/ablation.lock``, released when
    its process ends, however it ends) and is skipped when another lane holds it; every
    other step always runs (its runs are shared with any other lane). Returns
    {step: exit status or "skipped"}.
    """
    repo, done = pathlib.Path(repo), {}
    for step in steps(jobs):
        with contextlib.ExitStack() as held:
            if step in EXCLUSIVE_JOBS:
                lock_path = _pid_file(step, repo).with_suffix(".lock")
                lock_path.parent.mkdir(parents=True, exist_ok=True)
                lock = held.enter_context(open(lock_path, "w"))
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    log(f"{step}: run by another lane, skipped")
                    done[step] = "skipped"
                    continue
            argv, cwd, env, log_file = job_command(step, repo)
            log_file.parent.mkdir(parents=True, exist_ok=True)
            log(f"{step}: started ({' '.join(argv)})")
            with open(log_file, "a") as handle:
                done[step] = subprocess.call(argv, cwd=cwd, env={**os.environ, **env},
                                             stdout=handle, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
            log(f"{step}: exited with status {done[step]}")
    return done


def start(lanes, repo=REPO, dry_run=False):
    """Start each lane (a list of jobs, or one job's name) that is not running (its pid
    in ``runs/jobs/<lane>.pid``), detached (its own session), logging to
    ``runs/jobs/<lane>.log``; returns {lane name: pid or the reason it was not started}."""
    started = {}
    repo = pathlib.Path(repo)
    lanes = [[lane] if isinstance(lane, str) else list(lane) for lane in lanes]
    if not dry_run and importlib.util.find_spec("keras") is None:
        # Every job runs in this interpreter: without the package's dependencies each
        # would die at its first import, one traceback per run, after start had said "started".
        raise SystemExit(f"long_runs start: {sys.executable} cannot import keras; activate the "
                         "environment tfktopic is installed in (. .venv/bin/activate)")
    restored = restore_ablation_records(repo / "studies" / "results" / "ablation",
                                        repo / "runs" / "ablation") \
        if any("ablation" in lane for lane in lanes) and not dry_run else []
    if restored:
        print(f"restored committed ablation records: {', '.join(restored)}")
    for lane in lanes:
        name = "+".join(lane)
        pid = running(name, repo)
        if pid:
            started[name] = f"already running (pid {pid})"
            continue
        argv = [sys.executable, "-m", "studies.long_runs", "lane", *lane]
        if dry_run:
            started[name] = "would run, one after the other: " + "; ".join(
                f"in {cwd}: {' '.join(job_argv)}" for job_argv, cwd, _, _ in
                (job_command(step, repo, snapshot=False) for step in steps(lane)))
            continue
        log = repo / "runs" / "jobs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as handle:
            process = subprocess.Popen(argv, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env={**os.environ, "TFKTOPIC_LONG_RUNS_REPO": str(repo)})
        _pid_file(name, repo).write_text(str(process.pid))
        started[name] = process.pid
    return started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "status", "lane"])
    parser.add_argument("lane_jobs", nargs="*", help="lane: the jobs to run in turn "
                        "(internal: what `start` runs detached)")
    parser.add_argument("--jobs", default=DEFAULT_LANES,
                        help=f"comma-separated lanes, each one job of {', '.join(JOBS)} or "
                        "several joined by + (run in turn on one core); default: "
                        f"{DEFAULT_LANES}, one lane per core")
    parser.add_argument("--dry-run", action="store_true", help="print, start nothing")
    args = parser.parse_args(argv)
    lanes = [args.lane_jobs] if args.action == "lane" else \
        [lane.split("+") for lane in args.jobs.split(",") if lane]
    unknown = [job for lane in lanes for job in lane if job not in JOBS]
    if unknown:
        parser.error(f"--jobs: unknown {unknown}; choose from {', '.join(JOBS)}")
    repo = pathlib.Path(os.environ.get("TFKTOPIC_LONG_RUNS_REPO", REPO))
    if args.action == "lane":
        run_lane(args.lane_jobs, repo, log=lambda m: print(m, flush=True))
        return 0
    if args.action == "status":
        names = ["+".join(lane) for lane in lanes]
        names += sorted(p.stem for p in (repo / "runs" / "jobs").glob("*.pid")
                        if p.stem not in names)
        for name in names:
            pid = running(name, repo)
            print(f"{name}: " + (f"running (pid {pid})" if pid else "not running"))
        return 0
    for lane, state in start(lanes, repo, dry_run=args.dry_run).items():
        print(f"{lane}: {state if isinstance(state, str) else f'started (pid {state})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
