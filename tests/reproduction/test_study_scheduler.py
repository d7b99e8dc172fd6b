"""Schedulers that share the study's runs (studies/study/scheduler.py: `claim`, `run`).

The scheduler reads the protocol's names as ``protocol.NAME`` at run time, so the fakes of
`pending`, `finished`, `command` and `REPO` replace them on `studies.study.protocol`."""

import sys
import threading
import time

import pytest

from studies.study import protocol, scheduler

APNEWS_RUNS = [("apnews", "lstm", "lr4e-3_do0.5", 0), ("apnews", "lstm", "lr4e-3_do0.5", 1)]
PTB_RUNS = [("ptb", "rnn_100", "lr1e-3_do0.3", 0)]
_sleep = time.sleep       # the real one (the fixture patches `time.sleep`: `scheduler.time` is it)


class _Training:
    """A training process that ends after `polls` polls, its results written."""

    def __init__(self, out, polls):
        self.out, self.polls, self.pid = out, polls, 0

    def poll(self):
        self.polls -= 1
        if self.polls > 0:
            return None
        (self.out / "results.json").write_text("{}")
        return 0


@pytest.fixture()
def fake_runs(tmp_path, monkeypatch):
    """The scheduler around fake runs: which are pending, each start (key, scheduler thread)
    and each landing; the training command and the records are not under test."""
    done, started = set(), []

    def pending(corpus, arms):
        runs = APNEWS_RUNS if corpus == "apnews" else PTB_RUNS
        return [key[1:] for key in runs if key not in done]

    def fake_start(corpus, arm, config, seed, out_root, claimed=None):
        assert claimed is not None          # the scheduler claimed it before starting it
        out = protocol.run_dir(out_root, corpus, arm, config, seed)
        started.append(((corpus, arm, config, seed), threading.current_thread().name))
        return _Training(out, polls=3), out, ["train"], open(out / "train.log", "a")

    def collect(corpus, arm, config, seed, out, cmd):
        done.add((corpus, arm, config, seed))
        return tmp_path / "record.json"

    monkeypatch.setattr(protocol, "pending", pending)
    monkeypatch.setattr(protocol, "finished", lambda *key: key in done)
    monkeypatch.setattr(scheduler, "_start", fake_start)
    monkeypatch.setattr(scheduler, "collect", collect)
    monkeypatch.setattr(scheduler, "_score_other_protocols", lambda corpus, arm, out_root: None)
    monkeypatch.setattr(scheduler, "_log", lambda message: None)
    monkeypatch.setattr(protocol, "REPO", tmp_path)
    monkeypatch.setattr(scheduler.time, "sleep", lambda seconds: _sleep(0.01))
    return done, started


def _scheduler(name, corpora, out_root, results):
    def target():
        results[name] = scheduler.run(corpora, None, 1, out_root)
    return threading.Thread(target=target, name=name)


def test_two_schedulers_share_the_pending_runs_and_start_each_once(fake_runs, tmp_path):
    """One scheduler per core, each with its own corpus first (`long_runs`' default lanes):
    every run starts once, each scheduler starts on its own corpus, and both end when
    nothing is pending."""
    done, started = fake_runs
    results = {}
    lanes = [_scheduler("apnews first", ["apnews", "ptb"], tmp_path / "runs", results),
             _scheduler("ptb first", ["ptb", "apnews"], tmp_path / "runs", results)]
    for lane in lanes:
        lane.start()
    for lane in lanes:
        lane.join(30)
    assert results == {"apnews first": 0, "ptb first": 0}
    keys = [key for key, _ in started]
    assert sorted(keys) == sorted(APNEWS_RUNS + PTB_RUNS)       # each run started once
    assert done == set(APNEWS_RUNS + PTB_RUNS)
    first = {}
    for key, name in started:
        first.setdefault(name, key)
    assert first == {"apnews first": APNEWS_RUNS[0], "ptb first": PTB_RUNS[0]}


def test_a_run_another_scheduler_holds_is_waited_for_and_not_started_when_it_lands(
        fake_runs, tmp_path):
    """While another scheduler holds the only pending run, a scheduler waits (its landing
    may unlock more runs) instead of ending; the run landed, it is not started again."""
    done, started = fake_runs
    out_root = tmp_path / "runs"
    held = {key: scheduler.claim(protocol.run_dir(out_root, *key))
            for key in APNEWS_RUNS + PTB_RUNS}
    assert scheduler.claim(protocol.run_dir(out_root, *PTB_RUNS[0])) is None    # exclusive
    results = {}
    lane = _scheduler("waiting", ["ptb"], out_root, results)
    lane.start()
    _sleep(0.5)
    assert lane.is_alive() and started == []          # waits; starts nothing it cannot claim
    done.add(PTB_RUNS[0])                              # the holder's run lands, then released
    held[PTB_RUNS[0]].close()
    lane.join(30)
    assert results == {"waiting": 0} and started == []
    for handle in held.values():
        handle.close()


def test_a_run_that_lands_between_the_queue_and_its_claim_is_not_started(
        fake_runs, tmp_path, monkeypatch):
    """The queue is read before the claim: a run another scheduler collected (then released)
    in between is pending in the queue, but finished when claimed."""
    done, started = fake_runs
    claim = scheduler.claim

    def claim_after_it_landed(out):
        done.add(PTB_RUNS[0])
        return claim(out)

    monkeypatch.setattr(scheduler, "claim", claim_after_it_landed)
    assert scheduler.run(["ptb"], None, 1, tmp_path / "runs") == 0
    assert started == []


def test_a_released_run_that_has_not_landed_is_taken_over(fake_runs, tmp_path):
    """A run whose scheduler ended without it landing (killed, or the run failed there) is
    started by the scheduler waiting for it."""
    done, started = fake_runs
    out_root = tmp_path / "runs"
    held = scheduler.claim(protocol.run_dir(out_root, *PTB_RUNS[0]))
    results = {}
    lane = _scheduler("waiting", ["ptb"], out_root, results)
    lane.start()
    _sleep(0.3)
    assert started == []
    held.close()
    lane.join(30)
    assert results == {"waiting": 0}
    assert [key for key, _ in started] == PTB_RUNS and PTB_RUNS[0] in done


def test_several_corpora_are_for_run_only_and_without_arms(capsys):
    for argv in (["status", "--corpus", "apnews", "ptb"],
                 ["run", "--corpus", "apnews", "ptb", "--arms", "lstm"]):
        with pytest.raises(SystemExit):
            scheduler.main(argv)
        assert "--corpus: one corpus for" in capsys.readouterr().err
    with pytest.raises(ValueError, match="arms: name them for one corpus"):
        scheduler.run(["apnews", "ptb"], ["lstm"], 1, "unused")


def test_the_training_process_holds_its_runs_claim_until_it_ends(tmp_path, monkeypatch):
    """A scheduler killed alone leaves its run claimed while the training goes on: the
    claim is passed to the training process."""
    gate = tmp_path / "gate"
    monkeypatch.setattr(protocol, "command", lambda *args: [
        sys.executable, "-c",
        f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)"])
    key = ("apnews", "lstm", "lr4e-3_do0.5", 0)
    claimed = scheduler.claim(protocol.run_dir(tmp_path, *key))
    process, out, _, log = scheduler._start(*key, tmp_path, claimed)
    claimed.close()                                    # the scheduler's copy is gone
    assert scheduler.claim(out) is None
    gate.touch()
    assert process.wait(30) == 0
    log.close()
    again = scheduler.claim(out)
    assert again is not None
    again.close()
