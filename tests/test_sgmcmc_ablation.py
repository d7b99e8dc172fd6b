"""The Table 7 ablation's settings and table (benchmarks/sgmcmc_ablation.py, issue 15)."""

import pytest

from benchmarks.sgmcmc_ablation import (ORDER, RUNS, _temperature, copy_record, record_name,
                                         table)
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
    assert [_temperature(r) for r in RUNS] == [0.0, None, 0.0, None, 0.1, 0.01]


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


def test_default_order_trains_every_run_once_with_t1_psgld_last():
    assert sorted(ORDER) == sorted(RUNS) and len(set(ORDER)) == len(RUNS)
    assert ORDER[-1] == "paper/psgld"


def test_a_finished_record_is_copied_under_its_committed_name(tmp_path):
    result = tmp_path / "runs" / "paper" / "psgld_T0.1" / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text('{"averaged_test_ppl": 112.0}')
    assert record_name("paper/psgld_T0.1") == "paper_psgld_T0.1.json"
    copy_record(result, tmp_path / "records", "paper/psgld_T0.1")
    assert (tmp_path / "records" / "paper_psgld_T0.1.json").read_text() == result.read_text()
