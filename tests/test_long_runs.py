"""One command that starts or resumes the long jobs (benchmarks/long_runs.py)."""

import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from benchmarks import long_runs


def test_committed_ablation_records_come_back_where_the_ablation_skips_them(tmp_path):
    records, out = tmp_path / "records", tmp_path / "runs" / "ablation"
    records.mkdir()
    (records / "paper_rmsprop.json").write_text(json.dumps({"single_test_ppl": 131.1}))
    (records / "unrelated.json").write_text("{}")
    kept = out / "paper" / "psgld" / "result.json"
    kept.parent.mkdir(parents=True)
    kept.write_text('{"mine": 1}')
    (records / "paper_psgld.json").write_text('{"committed": 1}')

    assert long_runs.restore_ablation_records(records, out) == ["paper/rmsprop"]
    assert json.loads((out / "paper" / "rmsprop" / "result.json").read_text()) == {
        "single_test_ppl": 131.1}
    assert kept.read_text() == '{"mine": 1}'          # an existing result is not overwritten
    assert long_runs.restore_ablation_records(records, out) == []


def test_each_job_runs_its_resumable_command_with_one_thread_for_the_ablation(tmp_path):
    argv, cwd, env, log = long_runs.job_command("ptb", repo=tmp_path, shared=tmp_path / "d")
    assert argv[1:] == ["-m", "benchmarks.study", "run", "--corpus", "ptb", "--workers", "1"]
    assert cwd == tmp_path and log == tmp_path / "runs" / "study" / "scheduler_ptb.log"
    # Not a git checkout: the live code is used (`code_snapshot`).
    argv, cwd, env, log = long_runs.job_command("ablation", repo=tmp_path, shared=tmp_path / "d")
    assert argv[argv.index("--out") + 1] == str(tmp_path / "runs" / "ablation")
    assert argv[argv.index("--ptb-dir") + 1] == str(tmp_path / "d" / "ptb")
    assert argv[argv.index("--records") + 1].endswith(os.path.join("results", "ablation"))
    assert env["TF_NUM_INTRAOP_THREADS"] == "1" and env["PYTHONPATH"] == str(cwd)
    with pytest.raises(ValueError, match="unknown job 'mutants'"):
        long_runs.job_command("mutants", repo=tmp_path)


def test_a_job_with_a_live_pid_is_left_alone_and_a_dead_one_is_started(tmp_path):
    pid_file = tmp_path / "runs" / "jobs" / "apnews.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(str(os.getpid()))
    assert long_runs.running("apnews", tmp_path) == os.getpid()
    states = long_runs.start(["apnews"], repo=tmp_path, dry_run=True)
    assert states["apnews"] == f"already running (apnews: pid {os.getpid()})"

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pid_file.write_text(str(dead.pid))
    assert long_runs.running("apnews", tmp_path) is None
    assert long_runs.start(["apnews"], repo=tmp_path, dry_run=True)["apnews"].startswith(
        "would run")
    pid_file.write_text("garbage")
    assert long_runs.running("apnews", tmp_path) is None


def test_an_unknown_job_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        long_runs.main(["start", "--jobs", "apnews,mutants"])
    assert "--jobs: unknown ['mutants']" in capsys.readouterr().err


def _fake_jobs(monkeypatch, tmp_path, seen):
    """Jobs whose command writes its name to a file (and waits for `gate`, if there)."""
    def job_command(job, repo=None, shared=None, snapshot=True):
        script = ("import pathlib, sys, time\n"
                  f"gate = pathlib.Path({str(tmp_path / 'gate')!r})\n"
                  f"if {job!r} == 'ptb':\n"
                  "    while not gate.exists(): time.sleep(0.05)\n"
                  f"with open({str(seen)!r}, 'a') as f: f.write({job!r} + '\\n')\n")
        return [sys.executable, "-c", script], tmp_path, {}, tmp_path / f"{job}.log"
    monkeypatch.setattr(long_runs, "job_command", job_command)


def test_a_lane_runs_its_jobs_in_turn_and_skips_one_another_lane_runs(tmp_path, monkeypatch):
    seen = tmp_path / "seen.txt"
    _fake_jobs(monkeypatch, tmp_path, seen)
    (tmp_path / "gate").touch()
    assert long_runs.run_lane(["ablation", "ptb"], tmp_path, log=lambda m: None) == {
        "ablation": 0, "ptb": 0}
    assert seen.read_text().split() == ["ablation", "ptb"]
    assert long_runs.running("ptb", tmp_path) is None        # a finished job leaves no pid
    # Another lane holds the ptb lock: this lane runs apnews and skips ptb.
    lock = tmp_path / "runs" / "jobs" / "ptb.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert long_runs.run_lane(["apnews", "ptb"], tmp_path, log=lambda m: None) == {
            "apnews": 0, "ptb": "skipped"}
    assert seen.read_text().split() == ["ablation", "ptb", "apnews"]


def test_two_lanes_ending_in_the_same_job_run_it_once(tmp_path, monkeypatch):
    """The lock is taken before the job starts, so two lanes reaching ptb together run it
    once (the first holds the lock until ptb's process ends)."""
    seen = tmp_path / "seen.txt"
    _fake_jobs(monkeypatch, tmp_path, seen)
    results = {}
    lanes = [threading.Thread(target=lambda k=k, lane=lane: results.__setitem__(
        k, long_runs.run_lane(lane, tmp_path, log=lambda m: None)))
        for k, lane in enumerate((["apnews", "ptb"], ["ablation", "ptb"]))]
    for lane in lanes:
        lane.start()
    deadline = time.time() + 60
    while not results and time.time() < deadline:   # one lane skipped ptb and ended
        time.sleep(0.05)
    (tmp_path / "gate").touch()
    for lane in lanes:
        lane.join(60)
    assert sorted(seen.read_text().split()) == ["ablation", "apnews", "ptb"]
    assert sorted(str(r["ptb"]) for r in results.values()) == ["0", "skipped"]


def test_the_default_lanes_put_ptb_after_both_long_jobs(tmp_path, capsys):
    assert long_runs.main(["start", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "apnews+ptb: " in out and "ablation+ptb: " in out
