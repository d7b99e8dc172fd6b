"""One command that starts or resumes the long jobs (studies/long_runs.py)."""

import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from studies import long_runs


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
    assert argv[1:] == ["-m", "studies.study", "run", "--corpus", "ptb", "--workers", "1"]
    assert cwd == tmp_path and log == tmp_path / "runs" / "study" / "scheduler_ptb.log"
    # adjacent study jobs: one scheduler over both corpora, in that order
    argv, _, _, log = long_runs.job_command("ptb+apnews", repo=tmp_path)
    assert argv[argv.index("--corpus"):] == ["--corpus", "ptb", "apnews", "--workers", "1"]
    assert log == tmp_path / "runs" / "study" / "scheduler_ptb+apnews.log"
    # Not a git checkout: the live code is used (`code_snapshot`).
    argv, cwd, env, log = long_runs.job_command("ablation", repo=tmp_path, shared=tmp_path / "d")
    assert argv[argv.index("--out") + 1] == str(tmp_path / "runs" / "ablation")
    assert argv[argv.index("--ptb-dir") + 1] == str(tmp_path / "d" / "ptb")
    assert argv[argv.index("--records") + 1].endswith(os.path.join("results", "ablation"))
    assert env["TF_NUM_INTRAOP_THREADS"] == "1" and env["PYTHONPATH"] == str(cwd)
    argv, cwd, env, log = long_runs.job_command("defaults_imdb10k", repo=tmp_path)
    assert argv[1:] == ["-m", "studies.claims.defaults", "run", "--corpus", "imdb_10k",
                        "--seeds", "0", "1", "2"]
    assert log == tmp_path / "runs" / "defaults" / "lane_imdb10k.log"
    with pytest.raises(ValueError, match="unknown job 'mutants'"):
        long_runs.job_command("mutants", repo=tmp_path)


def test_a_lane_with_a_live_pid_is_left_alone_and_a_dead_one_is_started(tmp_path):
    pid_file = tmp_path / "runs" / "jobs" / "apnews+ptb.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(str(os.getpid()))
    assert long_runs.running("apnews+ptb", tmp_path) == os.getpid()
    states = long_runs.start([["apnews", "ptb"], ["ptb", "apnews"]], repo=tmp_path,
                             dry_run=True)
    assert states["apnews+ptb"] == f"already running (pid {os.getpid()})"
    assert states["ptb+apnews"].startswith("would run")     # lanes share the study's jobs
    pid_file = pid_file.with_name("apnews.pid")

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pid_file.write_text(str(dead.pid))
    assert long_runs.running("apnews", tmp_path) is None
    assert long_runs.start(["apnews"], repo=tmp_path, dry_run=True)["apnews"].startswith(
        "would run")
    pid_file.write_text("garbage")
    assert long_runs.running("apnews", tmp_path) is None


def test_start_refuses_an_interpreter_without_keras_before_starting_any_lane(tmp_path,
                                                                            monkeypatch):
    real = long_runs.importlib.util.find_spec
    monkeypatch.setattr(long_runs.importlib.util, "find_spec",
                        lambda name: None if name == "keras" else real(name))
    with pytest.raises(SystemExit, match="cannot import keras; activate"):
        long_runs.start([["bleu"]], repo=tmp_path)
    assert not (tmp_path / "runs" / "jobs").exists()


def test_an_unknown_job_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        long_runs.main(["start", "--jobs", "apnews,mutants"])
    assert "--jobs: unknown ['mutants']" in capsys.readouterr().err


def _fake_jobs(monkeypatch, tmp_path, seen):
    """Steps whose command writes its name to a file (the ablation waits for `gate`, if
    there)."""
    def job_command(step, repo=None, shared=None, snapshot=True):
        script = ("import pathlib, sys, time\n"
                  f"gate = pathlib.Path({str(tmp_path / 'gate')!r})\n"
                  f"if {step!r} == 'ablation':\n"
                  "    while not gate.exists(): time.sleep(0.05)\n"
                  f"with open({str(seen)!r}, 'a') as f: f.write({step!r} + '\\n')\n")
        return [sys.executable, "-c", script], tmp_path, {}, tmp_path / f"{step}.log"
    monkeypatch.setattr(long_runs, "job_command", job_command)


def test_a_lanes_adjacent_study_jobs_are_one_scheduler_and_the_ablation_one_step():
    assert long_runs.steps(["ablation", "ptb", "apnews"]) == ["ablation", "ptb+apnews"]
    assert long_runs.steps(["apnews", "ablation", "ptb"]) == ["apnews", "ablation", "ptb"]
    assert long_runs.steps(["apnews", "ptb"]) == ["apnews+ptb"]


def test_a_lane_runs_its_steps_in_turn_and_skips_the_ablation_another_lane_runs(
        tmp_path, monkeypatch):
    seen = tmp_path / "seen.txt"
    _fake_jobs(monkeypatch, tmp_path, seen)
    (tmp_path / "gate").touch()
    assert long_runs.run_lane(["ablation", "ptb", "apnews"], tmp_path, log=lambda m: None) == {
        "ablation": 0, "ptb+apnews": 0}
    assert seen.read_text().split() == ["ablation", "ptb+apnews"]
    # Another lane holds the ablation's lock: this lane skips it; the study step is shared.
    lock = tmp_path / "runs" / "jobs" / "ablation.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert long_runs.run_lane(["ablation", "apnews"], tmp_path, log=lambda m: None) == {
            "ablation": "skipped", "apnews": 0}
    assert seen.read_text().split() == ["ablation", "ptb+apnews", "apnews"]


def test_two_lanes_reaching_the_ablation_run_it_once(tmp_path, monkeypatch):
    """The lock is taken before the ablation starts, so two lanes reaching it together run
    it once (the first holds the lock until its process ends)."""
    seen = tmp_path / "seen.txt"
    _fake_jobs(monkeypatch, tmp_path, seen)
    results = {}
    lanes = [threading.Thread(target=lambda k=k, lane=lane: results.__setitem__(
        k, long_runs.run_lane(lane, tmp_path, log=lambda m: None)))
        for k, lane in enumerate((["ablation", "apnews"], ["ablation", "ptb"]))]
    for lane in lanes:
        lane.start()
    deadline = time.time() + 60
    while not results and time.time() < deadline:   # one lane skipped the ablation and ended
        time.sleep(0.05)
    (tmp_path / "gate").touch()
    for lane in lanes:
        lane.join(60)
    assert sorted(seen.read_text().split()) == ["ablation", "apnews", "ptb"]
    assert sorted(str(r["ablation"]) for r in results.values()) == ["0", "skipped"]


def test_the_default_lanes_start_imdb_10k_and_bleu_on_both_cores_then_the_rest(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TFKTOPIC_LONG_RUNS_REPO", str(tmp_path))   # no live lane there
    assert long_runs.main(["start", "--dry-run"]) == 0
    out = capsys.readouterr().out
    lanes = {line.split(": ", 1)[0]: line for line in out.splitlines()}
    assert sorted(lanes) == ["bleu+defaults_imdb10k+sentiment+imdb",
                             "defaults_imdb10k+bleu+sentiment+imdb"]
    first = lanes["defaults_imdb10k+bleu+sentiment+imdb"]
    order = [first.index(part) for part in ("studies.claims.defaults run --corpus imdb_10k",
                                            "studies.claims.bleu_claim train",
                                            "studies.claims.imdb_sentiment arms",
                                            "studies.study run --corpus imdb")]
    assert order == sorted(order)
    second = lanes["bleu+defaults_imdb10k+sentiment+imdb"]
    assert second.index("bleu_claim train") < second.index("--corpus imdb_10k")


def test_the_claims_jobs_run_their_resumable_commands_with_one_thread_and_share_their_runs(
        tmp_path, monkeypatch):
    argv, cwd, env, log = long_runs.job_command("defaults", repo=tmp_path, shared=tmp_path / "d")
    assert argv[1:] == ["-m", "studies.claims.defaults", "run", "--corpus", "war_and_peace",
                        "imdb", "--seeds", "0", "1", "2"]
    assert cwd == tmp_path and log == tmp_path / "runs" / "defaults" / "lane.log"
    assert env["TF_NUM_INTRAOP_THREADS"] == "1"
    argv, *_ = long_runs.job_command("sentiment", repo=tmp_path)
    assert argv[1:] == ["-m", "studies.claims.imdb_sentiment", "arms", "--protocol", "cpu"]
    argv, *_ = long_runs.job_command("bleu", repo=tmp_path)
    assert argv[1:] == ["-m", "studies.claims.bleu_claim", "train", "--seeds", "1", "2"]
    argv, *_ = long_runs.job_command("imdb", repo=tmp_path)
    assert argv[argv.index("--corpus"):] == ["--corpus", "imdb", "--workers", "1"]
    # Shared: no lane lock is asked for them (a held "defaults.lock" stops nothing).
    seen = tmp_path / "seen.txt"
    _fake_jobs(monkeypatch, tmp_path, seen)
    lock = tmp_path / "runs" / "jobs" / "defaults.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert long_runs.run_lane(["defaults", "bleu"], tmp_path, log=lambda m: None) == {
            "defaults": 0, "bleu": 0}
    assert long_runs.steps(["defaults", "imdb", "apnews"]) == ["defaults", "imdb+apnews"]
