"""Start, or resume, the long training jobs of the open issues with one command.

    python -m benchmarks.long_runs start [--jobs apnews,ablation] [--dry-run]
    python -m benchmarks.long_runs status

Jobs (each resumes from its directory under ``runs/``, each one process with one
TensorFlow thread, so two jobs fill 2 cores):

* ``apnews`` -- the comparison study on APNEWS (`benchmarks.study` ``run``, 1 worker);
* ``ptb`` -- the study's PTB pair (``run --corpus ptb``, 1 worker);
* ``ablation`` -- the SG-MCMC Table 7 ablation (`benchmarks.sgmcmc_ablation`, its
  default order), from a code snapshot of HEAD, each finished record copied to
  ``benchmarks/results/ablation/`` as it lands.

A job whose process is alive (its pid in ``runs/jobs/<job>.pid``) is left alone. On a new
machine ``runs/`` is empty and only the committed records remain: the study's scheduler
reads its records from ``benchmarks/results/study/``, and ``start`` copies the committed
ablation records back to ``runs/ablation/<run>/result.json``, so no finished run is
trained again. A run that was cut off on another machine starts again from epoch 0.
"""

import argparse
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


def start(jobs, repo=REPO, dry_run=False):
    """Start each job that is not running, detached (its own session), logging to its
    log file; returns {job: pid or the reason it was not started}."""
    started = {}
    repo = pathlib.Path(repo)
    restored = restore_ablation_records(repo / "benchmarks" / "results" / "ablation",
                                        repo / "runs" / "ablation") \
        if "ablation" in jobs and not dry_run else []
    if restored:
        print(f"restored committed ablation records: {', '.join(restored)}")
    for job in jobs:
        pid = running(job, repo)
        if pid is not None:
            started[job] = f"already running (pid {pid})"
            continue
        argv, cwd, env, log = job_command(job, repo, snapshot=not dry_run)
        if dry_run:
            started[job] = f"would run in {cwd}: {' '.join(argv)}"
            continue
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as handle:
            process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env},
                                       stdout=handle, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        _pid_file(job, repo).parent.mkdir(parents=True, exist_ok=True)
        _pid_file(job, repo).write_text(str(process.pid))
        started[job] = process.pid
    return started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "status"])
    parser.add_argument("--jobs", default="apnews,ablation",
                        help=f"comma-separated subset of {', '.join(JOBS)} (default: "
                        "apnews,ablation, one per core)")
    parser.add_argument("--dry-run", action="store_true", help="print, start nothing")
    args = parser.parse_args(argv)
    jobs = [job for job in args.jobs.split(",") if job]
    unknown = [job for job in jobs if job not in JOBS]
    if unknown:
        parser.error(f"--jobs: unknown {unknown}; choose from {', '.join(JOBS)}")
    if args.action == "status":
        for job in JOBS:
            pid = running(job)
            print(f"{job}: " + (f"running (pid {pid})" if pid else "not running"))
        return 0
    for job, state in start(jobs, dry_run=args.dry_run).items():
        print(f"{job}: {state if isinstance(state, str) else f'started (pid {state})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
