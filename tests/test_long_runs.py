"""One command that starts or resumes the long jobs (benchmarks/long_runs.py)."""

import json
import os
import subprocess
import sys

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
    assert states["apnews"] == f"already running (pid {os.getpid()})"

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
