"""The Table 7 ablation's settings and table (studies/claims/sgmcmc_ablation.py, issue 15)."""

import json
import math

import keras
import numpy as np
import pytest

from studies.claims.sgmcmc_ablation import (BASE_RUNS, ORDER, RUNS, SEED_RUNS, EpochLog,
                                         _temperature, block_nll, chosen_temperature,
                                         copy_record, record_name, rescore,
                                         seed_run_wanted, seeded_comparisons, split_seed,
                                         stream_blocks, table, train_one)
from tfktopic.bayes import PSGLD
from tfktopic.bayes.setups import ablation_optimizer


def test_paper_setting_is_the_t1_sampler_and_its_rmsprop():
    opt = ablation_optimizer("paper", 1e-3, num_examples=1000)
    assert isinstance(opt, PSGLD)
    assert (opt.temperature, opt.prior_precision, opt.rho, opt.epsilon_placement) == \
        (1.0, 1.0, 0.99, "outside")
    assert opt.clipnorm == 5.0 and opt.normalize_gradients_to is None
    rms = ablation_optimizer("paper", 1e-3, num_examples=1000, temperature=0.0)
    assert rms.temperature == 0.0 and rms.prior_precision == 0.0 and rms.rho == 0.99


def test_authors_code_setting_runs_at_temperature_two_over_n():
    opt = ablation_optimizer("authors_code", 1e-3, num_examples=929_589)
    assert opt.temperature == pytest.approx(2 / 929_589)
    assert opt.normalize_gradients_to == 5.0 and opt.clipnorm is None
    assert (opt.rho, opt.epsilon, opt.epsilon_placement) == (0.9, 1e-6, "inside")
    with pytest.raises(ValueError, match="setting"):
        ablation_optimizer("theano", 1e-3, num_examples=10)


def test_run_temperatures():
    assert [_temperature(r) for r in BASE_RUNS] == [0.0, None, 0.0, None, 0.1, 0.01]
    assert [_temperature(r) for r in SEED_RUNS] == [0.0] * 3 + [0.01] * 2 + [0.1] * 2 + [None] * 2


def test_a_run_name_carries_its_seed_and_a_bad_one_is_refused():
    assert split_seed("paper/rmsprop") == ("paper/rmsprop", 0)
    assert split_seed("paper/psgld_T0.01-s2") == ("paper/psgld_T0.01", 2)
    assert record_name("paper/rmsprop-s3") == "paper_rmsprop-s3.json"
    for bad in ("paper/adam", "paper/rmsprop-sx", "paper/rmsprop-s"):
        with pytest.raises(ValueError, match="unknown run"):
            split_seed(bad)


def test_table_combines_the_runs_and_chooses_t_on_validation():
    records = {
        "paper/rmsprop": {"single_test_ppl": 120.0, "averaged_test_ppl": 118.0},
        "paper/psgld": {"last_sample_test_ppl": 130.0, "averaged_test_ppl": 125.0,
                        "averaged_valid_ppl": 128.0},
        "paper/psgld_T0.1": {"averaged_test_ppl": 112.0, "averaged_valid_ppl": 115.0},
        "paper/psgld_T0.01": {"averaged_test_ppl": 110.0, "averaged_valid_ppl": 116.0},
    }
    out = table(records)
    row = out["table7"]["paper"]
    assert row == {"rmsprop_single": 120.0, "M2_averaged_rmsprop": 118.0,
                   "M1_last_sample": 130.0, "full_averaged_psgld": 125.0,
                   "full_over_rmsprop": 125.0 / 120.0}
    assert out["table7"]["authors_code"] == {}
    # T = 0.01 has the best test perplexity, but T = 0.1 the best validation one.
    assert out["chosen_on_validation"]["temperature"] == 0.1
    assert out["chosen_on_validation"]["over_rmsprop_single"] == pytest.approx(112 / 120)


def test_a_capped_run_is_marked_and_the_sweep_compared_where_it_stopped():
    def logged(values):
        return [{"epoch": k + 1, "valid_avg_ppl": v} for k, v in enumerate(values)]

    records = {
        "paper/rmsprop": {"single_test_ppl": 120.0},
        "paper/psgld": {"averaged_test_ppl": 150.0, "averaged_valid_ppl": 155.0,
                        "stopped": "epoch cap", "epochs_run": 3,
                        "epochs": logged([300.0, 200.0, 155.0])},
        "paper/psgld_T0.1": {"averaged_test_ppl": 112.0, "averaged_valid_ppl": 115.0,
                             "stopped": "early stopping", "epochs_run": 5,
                             "epochs": logged([250.0, 150.0, 130.0, 116.0, 115.0])},
        "paper/psgld_T0.01": {"averaged_test_ppl": 110.0, "averaged_valid_ppl": 116.0},
    }
    out = table(records)
    assert out["table7"]["paper"]["psgld_stopped"] == "epoch cap, 3 epochs"
    # T = 0.01's record predates the epoch log: left out, not guessed
    assert out["sweep_at_epoch"] == {"epoch": 3, "valid": {"1.0": 155.0, "0.1": 130.0}}
    records["paper/psgld"]["stopped"] = "early stopping"
    assert "sweep_at_epoch" not in table(records)
    assert "psgld_stopped" not in table(records)["table7"]["paper"]


def test_t1_psgld_is_capped_to_land_within_a_session_and_says_so(tmp_path, monkeypatch):
    import studies.claims.sgmcmc_ablation as ablation

    monkeypatch.setitem(ablation.EPOCH_CAPS, "paper/psgld_T0.01", 2)
    data = _stream_data(np.random.default_rng(1))
    schedule = {"max_epochs": 4, "burn_in_epochs": 1, "samples_per_epoch": 2, "patience": 9,
                "learning_rate": 3e-3}
    sizes = {"embedding_dim": 8, "hidden_dim": 8, "num_layers": 1}
    capped = train_one("paper/psgld_T0.01", tmp_path / "a", data, 30, sizes, schedule,
                       successive=True, log=lambda *_: None)
    assert (capped["epochs_run"], capped["max_epochs"], capped["stopped"]) == (
        2, 2, "epoch cap")
    full = train_one("paper/rmsprop", tmp_path / "b", data, 30, sizes, schedule,
                     successive=True, log=lambda *_: None)
    assert (full["epochs_run"], full["stopped"]) == (4, "max_epochs")
    from tfktopic.bayes.sgmcmc_presets import ABLATION_SCHEDULE

    assert ablation.EPOCH_CAPS["paper/psgld"] < ABLATION_SCHEDULE["max_epochs"]


def test_default_order_trains_every_run_once_with_t1_psgld_last():
    assert sorted(ORDER) == sorted(RUNS) and len(set(ORDER)) == len(RUNS)
    assert ORDER[-3:] == ("paper/psgld", "paper/psgld-s1", "paper/psgld-s2")
    # the cold seeds come after the cold sweep they follow from
    assert max(ORDER.index(r) for r in ("paper/psgld_T0.1", "paper/psgld_T0.01")) < min(
        ORDER.index(r) for r in SEED_RUNS)


def test_only_the_seeds_of_the_temperature_chosen_on_validation_are_trained():
    cold = {"paper/psgld_T0.01": {"averaged_valid_ppl": 115.6},
            "paper/psgld_T0.1": {"averaged_valid_ppl": 115.2}}
    wanted = [r for r in ORDER if seed_run_wanted(r, cold)]
    assert "paper/psgld_T0.1-s1" in wanted and "paper/psgld_T0.01-s1" not in wanted
    assert "paper/psgld-s1" not in wanted
    assert all(r in wanted for r in BASE_RUNS) and "paper/rmsprop-s3" in wanted
    # T = 1, finished last, takes the choice only if its validation is better
    for valid, t1_seeds in ((140.0, False), (114.0, True)):
        records = {**cold, "paper/psgld": {"averaged_valid_ppl": valid}}
        assert seed_run_wanted("paper/psgld-s2", records) is t1_seeds
        assert seed_run_wanted("paper/psgld_T0.1-s2", records) is not t1_seeds
    # nothing to choose from yet: the run is trained as asked
    assert seed_run_wanted("paper/psgld_T0.01-s1", {})
    assert chosen_temperature({}) is None and chosen_temperature(cold) == 0.1


def _batches(num_batches, rows, steps, masked=()):
    """LM batches (their masks) standing in for a dataset."""
    batches = []
    for k in range(num_batches):
        mask = np.ones((rows, steps), np.float32)
        for (b, r, t) in masked:
            if b == k:
                mask[r, t] = 0
        batches.append({"mask": mask})
    return batches


def test_a_scoring_block_is_one_stream_over_consecutive_batches():
    # 5 batches of 2 streams x 3 steps, blocks of 2 batches: 3 groups x 2 streams
    batches = _batches(5, 2, 3, masked=[(4, 1, 2)])
    ids, counts = stream_blocks(batches, batches_per_block=2)
    assert counts.tolist() == [6, 6, 6, 6, 3, 2]
    # row-major order inside a batch: row 0's 3 targets, then row 1's
    assert ids[:6].tolist() == [0, 0, 0, 1, 1, 1]
    assert ids[6:12].tolist() == [0, 0, 0, 1, 1, 1]
    assert ids[-5:].tolist() == [4, 4, 4, 5, 5]
    log_probs = -np.arange(ids.size, dtype=np.float64)
    np.testing.assert_allclose(block_nll(log_probs, ids).sum(), -log_probs.sum())
    with pytest.raises(ValueError, match="not the same evaluation data"):
        block_nll(log_probs[:-1], ids)


def _tiny_model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.stop_training = False     # what fit sets
    return model


@pytest.mark.parametrize("kill_after", [2, 4])
def test_early_stopping_of_a_resumed_run_remembers_the_best_epoch_and_its_weights(
        tmp_path, kill_after):
    """Keras' EarlyStopping started afresh in every session, so a resumed RMSprop run
    reported the first epoch of its last session as "single"; this log does not."""
    val = [150.0, 140.0, 135.0, 137.0, 139.0, 141.0]    # best: epoch 3; stop after 6
    stopped = []

    def session(epochs):
        log = EpochLog(tmp_path, "val_ppl", patience=3, keep_best=True)
        model = _tiny_model()
        log.set_model(model)
        for epoch in epochs:
            model.layers[0].kernel.assign(np.full((2, 1), float(epoch)))
            log.on_epoch_end(epoch, {"val_ppl": val[epoch]})
            if model.stop_training:
                stopped.append(epoch + 1)
                break
        return log

    session(range(kill_after))
    log = session(range(kill_after, len(val)))
    assert stopped == [6]
    assert log.best_epoch() == 3
    assert [row["val_ppl"] for row in log.rows] == val
    best = _tiny_model()
    best.load_weights(str(log.best_path))
    assert float(best.layers[0].kernel.numpy()[0, 0]) == 2.0   # epoch 3's weights


def test_a_sampler_run_is_not_stopped_during_burn_in(tmp_path):
    log = EpochLog(tmp_path, "valid_avg_ppl", patience=2, ignore_first=3)
    model = _tiny_model()
    log.set_model(model)
    for epoch in range(3):                     # burn-in: no average yet
        log.on_epoch_end(epoch, {"val_ppl": 100.0})
        assert not model.stop_training
    for epoch, value in zip(range(3, 7), (120.0, 118.0, 119.0, 119.5)):
        log.on_epoch_end(epoch, {"val_ppl": 100.0, "valid_avg_ppl": value})
    assert model.stop_training and log.best_epoch() == 5


def _scored(nll, tokens, key="averaged_test_block_nll", **extra):
    return {key: list(nll), "test_block_tokens": list(tokens), **extra}


def test_the_seeded_comparison_pairs_blocks_and_resamples_seeds():
    tokens = [400.0] * 50
    rng = np.random.default_rng(0)
    full = {f"paper/psgld_T0.01{suffix}": _scored(400 * (4.7 + 0.01 * rng.standard_normal(50)),
                                                  tokens)
            for suffix in ("", "-s1", "-s2")}
    rms = {f"paper/rmsprop-s{k}": {**_scored(400 * (4.9 + 0.01 * rng.standard_normal(50)),
                                             tokens, key="single_test_block_nll"),
                                   "averaged_test_block_nll": list(400 * np.full(50, 4.72))}
           for k in (1, 2, 3)}
    records = {**full, **rms, "paper/rmsprop": {"single_test_ppl": 131.0}}
    out = seeded_comparisons(records, 0.01, num_resamples=300)
    single = out["full_vs_rmsprop_single"]
    assert single["seeds_a"] == [0, 1, 2] and single["seeds_b"] == [1, 2, 3]
    assert single["ratio"] == pytest.approx(math.exp(4.7 - 4.9), rel=2e-3)
    assert single["high"] < 1 and single["verdict"] == "A better"
    assert out["full_vs_M2"]["ratio"] == pytest.approx(math.exp(4.7 - 4.72), rel=2e-3)
    # no scored seeds of T = 0.1: nothing to compare
    assert seeded_comparisons(records, 0.1) == {}
    records["paper/rmsprop-s3"]["test_block_tokens"] = [399.0] * 50
    with pytest.raises(ValueError, match="same test blocks"):
        seeded_comparisons(records, 0.01)


def test_rescoring_adds_block_scores_that_sum_to_the_recorded_perplexity(tmp_path):
    from tfktopic.bayes import PredictiveSamples

    batches = _batches(4, 2, 5)
    rng = np.random.default_rng(1)
    run_dir = tmp_path / "paper" / "psgld_T0.01"
    samples_dir = run_dir / "samples"
    samples_dir.mkdir(parents=True)
    files = []
    for k in range(3):
        np.save(samples_dir / f"test_sample_{k:05d}.npy",
                np.log(rng.uniform(0.01, 0.5, 40)).astype(np.float32))
        files.append(f"test_sample_{k:05d}.npy")
    (samples_dir / "samples.json").write_text(json.dumps(
        {"kind": "lm", "steps": [1, 2, 3], "files": {"test": files}, "labels": {}}))
    ppl = PredictiveSamples.load(samples_dir, "test").perplexity()
    (run_dir / "result.json").write_text(json.dumps({"num_samples": 3,
                                                     "averaged_test_ppl": ppl}))
    records = tmp_path / "records"
    assert rescore(tmp_path, {"test": batches}, records, log=None) == ["paper/psgld_T0.01"]
    record = json.loads((records / "paper_psgld_T0.01.json").read_text())
    assert sum(record["test_block_tokens"]) == 40
    assert math.exp(sum(record["averaged_test_block_nll"]) / 40) == pytest.approx(ppl)
    assert rescore(tmp_path, {"test": batches}, records, log=None) == []   # done once
    (run_dir / "result.json").write_text(json.dumps({"num_samples": 3,
                                                     "averaged_test_ppl": ppl * 1.01}))
    with pytest.raises(ValueError, match="the record has 3"):
        rescore(tmp_path, {"test": batches}, None, log=None)


def test_a_finished_record_is_copied_under_its_committed_name(tmp_path):
    result = tmp_path / "runs" / "paper" / "psgld_T0.1" / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text('{"averaged_test_ppl": 112.0}')
    assert record_name("paper/psgld_T0.1") == "paper_psgld_T0.1.json"
    copy_record(result, tmp_path / "records", "paper/psgld_T0.1")
    assert (tmp_path / "records" / "paper_psgld_T0.1.json").read_text() == result.read_text()


def _stream_data(rng, vocab_size=30, batches=6, rows=4, steps=5):
    from tfktopic.data.pipeline import stream_dataset

    def part(num_batches):
        tokens = rng.integers(1, vocab_size, (num_batches, rows, steps + 1))
        return stream_dataset(tokens[..., :-1], tokens[..., 1:])

    return {"train": part(batches), "valid": part(2), "test": part(3),
            "num_train_tokens": batches * rows * steps}


@pytest.mark.parametrize("run", ["paper/rmsprop-s1", "paper/psgld_T0.01"])
def test_a_run_records_block_scores_that_add_up_to_its_perplexities(tmp_path, run):
    data = _stream_data(np.random.default_rng(0))
    schedule = {"max_epochs": 3, "burn_in_epochs": 1, "samples_per_epoch": 2, "patience": 2,
                "learning_rate": 3e-3}
    sizes = {"embedding_dim": 8, "hidden_dim": 8, "num_layers": 1}
    record = train_one(run, tmp_path / run, data, 30, sizes, schedule, successive=True,
                       log=lambda *_: None)
    tokens = sum(record["test_block_tokens"])
    assert tokens == 3 * 4 * 5 and record["seed"] == split_seed(run)[1]
    assert len(record["epochs"]) == 3 and record["epochs"][0]["epoch"] == 1
    total = lambda key: math.exp(sum(record[key]) / tokens)
    if run.startswith("paper/rmsprop"):
        assert record["best_epoch"] == 1 + int(np.argmin([r["val_ppl"]
                                                          for r in record["epochs"]]))
        assert total("single_test_block_nll") == pytest.approx(record["single_test_ppl"],
                                                               rel=1e-4)
    assert total("averaged_test_block_nll") == pytest.approx(record["averaged_test_ppl"],
                                                             rel=1e-6)
    assert total("last_sample_test_block_nll") == pytest.approx(
        record["last_sample_test_ppl"], rel=1e-6)
