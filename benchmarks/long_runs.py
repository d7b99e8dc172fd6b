"""Start, or resume, the long training jobs of the open issues with one command.

    python -m benchmarks.long_runs start [--jobs apnews+ptb,ablation+ptb] [--dry-run]
    python -m benchmarks.long_runs status

Jobs (each resumes from its directory under ``runs/``, each one process with one
TensorFlow thread, so two lanes fill 2 cores):

* ``apnews`` -- the comparison study on APNEWS (`benchmarks.study` ``run``, 1 worker);
* ``ptb`` -- the study's PTB pair (``run --corpus ptb``, 1 worker);
* ``ablation`` -- the SG-MCMC Table 7 ablation (`benchmarks.sgmcmc_ablation`, its
  default order), from a code snapshot of HEAD, each finished record copied to
  ``benchmarks/results/ablation/`` as it lands.

A **lane** (``--jobs a+b``) runs its jobs one after the other in one detached process
(`run_lane`), so that a core freed by a finished job goes to the next one within the session;
a job already run by another lane (its lock ``runs/jobs/<job>.lock`` held) is skipped, so
two lanes may end in the same job. The default lanes are ``apnews+ptb`` and
``ablation+ptb``: the PTB pair starts on whichever core frees first.

A job whose process is alive (its pid in ``runs/jobs/<job>.pid``) is left alone. On a new
machine ``runs/`` is empty and only the committed records remain: the study's scheduler
reads its records from ``benchmarks/results/study/``, and ``start`` copies the committed
ablation records back to ``runs/ablation/<run>/result.json``, so no finished run is
trained again. A run that was cut off on another machine starts again from epoch 0.
"""

import argparse
import fcntl
import os
import pathlib
import subprocess
import sys

from benchmarks.common import SHARED_DATA, code_snapshot

REPO = pathlib.Path(__file__).resolve().parents[1]
JOBS = ("apnews", "ptb", "ablation")
ABLATION_RECORDS = REPO / "benchmarks" / "results" / "ablation"
_THREADS = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
            "OMP_NUM_THREADS": "1"}


def restore_ablation_records(records=ABLATION_RECORDS, out=None):
    """Copy each committed ablation record back to ``out/<setting>/<name>/result.json``
    where it is missing; returns the runs restored."""
    from benchmarks.sgmcmc_ablation import RUNS, record_name

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
    """(argv, working directory, extra environment, log file) of a job (``snapshot``:
    extract the code snapshot the ablation runs from; without it, the live code)."""
    runs = pathlib.Path(repo) / "runs"
    if job in ("apnews", "ptb"):
        argv = [sys.executable, "-m", "benchmarks.study", "run", "--corpus", job,
                "--workers", "1"]
        return argv, pathlib.Path(repo), {}, runs / "study" / f"scheduler_{job}.log"
    if job == "ablation":
        code = (code_snapshot(runs / "ablation" / "code", repo)[0] if snapshot
                else pathlib.Path(repo))
        argv = [sys.executable, "-m", "benchmarks.sgmcmc_ablation",
                "--out", str(runs / "ablation"), "--ptb-dir", str(pathlib.Path(shared) / "ptb"),
                "--records", str(pathlib.Path(repo) / "benchmarks" / "results" / "ablation")]
        env = {**_THREADS, "PYTHONPATH": str(code), "TFKTOPIC_SHARED_DATA": str(shared)}
        return argv, code, env, runs / "ablation" / "ablation.log"
    raise ValueError(f"unknown job {job!r}; choose from {', '.join(JOBS)}")


def _pid_file(job, repo=REPO):
    return pathlib.Path(repo) / "runs" / "jobs" / f"{job}.pid"


def running(job, repo=REPO):
    """The pid of the job's live process, or None."""
    try:
        pid = int(_pid_file(job, repo).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def run_lane(jobs, repo=REPO, log=print):
    """Run `jobs` one after the other in this process (one core's lane).

    Each job runs under its exclusive lock (``runs/jobs/<job>.lock``, released when its
    process ends, however it ends), with this process's pid in its pid file; a job whose
    lock another lane holds is skipped. Returns {job: exit status or "skipped"}.
    """
    repo, done = pathlib.Path(repo), {}
    for job in jobs:
        lock_path = _pid_file(job, repo).with_suffix(".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"{job}: run by another lane, skipped")
                done[job] = "skipped"
                continue
            _pid_file(job, repo).write_text(str(os.getpid()))
            argv, cwd, env, log_file = job_command(job, repo)
            log_file.parent.mkdir(parents=True, exist_ok=True)
            log(f"{job}: started ({' '.join(argv)})")
            with open(log_file, "a") as handle:
                done[job] = subprocess.call(argv, cwd=cwd, env={**os.environ, **env},
                                            stdout=handle, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
            _pid_file(job, repo).unlink(missing_ok=True)
            log(f"{job}: exited with status {done[job]}")
    return done


def start(lanes, repo=REPO, dry_run=False):
    """Start each lane (a list of jobs, or one job's name) whose first job is not running,
    detached (its own session), logging to ``runs/jobs/<lane>.log``; returns
    {lane name: pid or the reason it was not started}."""
    started = {}
    repo = pathlib.Path(repo)
    lanes = [[lane] if isinstance(lane, str) else list(lane) for lane in lanes]
    restored = restore_ablation_records(repo / "benchmarks" / "results" / "ablation",
                                        repo / "runs" / "ablation") \
        if any("ablation" in lane for lane in lanes) and not dry_run else []
    if restored:
        print(f"restored committed ablation records: {', '.join(restored)}")
    for lane in lanes:
        name = "+".join(lane)
        # Running if its first job is (a later one may be another lane's: the lane skips
        # it when it gets there).
        live = {job: pid for job in lane[:1] for pid in [running(job, repo)] if pid}
        if live:
            started[name] = "already running (" + ", ".join(
                f"{job}: pid {pid}" for job, pid in live.items()) + ")"
            continue
        argv = [sys.executable, "-m", "benchmarks.long_runs", "lane", *lane]
        if dry_run:
            started[name] = "would run, one after the other: " + "; ".join(
                f"in {cwd}: {' '.join(job_argv)}" for job_argv, cwd, _, _ in
                (job_command(job, repo, snapshot=False) for job in lane))
            continue
        log = repo / "runs" / "jobs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as handle:
            process = subprocess.Popen(argv, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True,
                                       env={**os.environ, "TFKTOPIC_LONG_RUNS_REPO": str(repo)})
        _pid_file(lane[0], repo).write_text(str(process.pid))
        started[name] = process.pid
    return started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "status", "lane"])
    parser.add_argument("lane_jobs", nargs="*", help="lane: the jobs to run in turn "
                        "(internal: what `start` runs detached)")
    parser.add_argument("--jobs", default="apnews+ptb,ablation+ptb",
                        help=f"comma-separated lanes, each one job of {', '.join(JOBS)} or "
                        "several joined by + (run in turn on one core); default: "
                        "apnews+ptb,ablation+ptb, one lane per core")
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
        for job in JOBS:
            pid = running(job, repo)
            print(f"{job}: " + (f"running (pid {pid})" if pid else "not running"))
        return 0
    for lane, state in start(lanes, repo, dry_run=args.dry_run).items():
        print(f"{lane}: {state if isinstance(state, str) else f'started (pid {state})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
