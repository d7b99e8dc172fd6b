"""docs/results/benchmarks.md is rendered from the record files alone (benchmarks/report.py): plain record
lists and record files with their context (``{"records": [...], ...}``) alike."""

import json
import re

import numpy as np

from benchmarks import report


def _record(metric, value, model="lstm"):
    return {"benchmark": "x", "model": model, "metric": metric, "value": value,
            "baseline_model": "keras_lstm", "baseline_value": 2.0, "ratio": value / 2.0,
            "protocol": f"protocol of {metric}", "dataset": "apnews", "config": {}}


def test_both_record_file_forms_reach_their_tables_with_their_protocols(tmp_path):
    (tmp_path / "medium").mkdir()
    (tmp_path / "medium" / "speed.json").write_text(json.dumps([_record("tokens_per_s", 3.0)]))
    (tmp_path / "medium" / "precision.json").write_text(json.dumps(
        {"machine": {"cores": 2}, "records": [_record("roofline_fraction_float32", 0.46)]}))
    (tmp_path / "medium" / "notes.json").write_text(json.dumps({"no": "records"}))
    records = report.load_records(tmp_path)
    assert sorted(r["_file"] for r in records["medium"]) == ["precision.json", "speed.json"]
    text = report.render(records)
    speed, hardware = text.index("### Training speed"), text.index("### Hardware use")
    assert speed < text.index("| tokens_per_s | 3 |") < hardware
    assert hardware < text.index("| roofline_fraction_float32 | 0.46 |")
    assert "protocol of roofline_fraction_float32" in text


def test_the_study_tables_come_first_when_the_study_report_wrote_them(tmp_path):
    (tmp_path / "medium").mkdir()
    (tmp_path / "medium" / "speed.json").write_text(json.dumps([_record("tokens_per_s", 3.0)]))
    assert report.study_sections(tmp_path) == []
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "apnews_summary.md").write_text("### apnews: verdicts\n")
    text = report.render(report.load_records(tmp_path), report.study_sections(tmp_path))
    assert text.index("## The comparison study") < text.index("### apnews: verdicts") \
        < text.index("## Mode `medium`")


def test_the_topic_seeds_table_follows_the_study_when_written(tmp_path):
    (tmp_path / "medium").mkdir()
    (tmp_path / "medium" / "speed.json").write_text(json.dumps([_record("tokens_per_s", 3.0)]))
    assert report.topic_sections(tmp_path) == []
    (tmp_path / "topics" / "seeds").mkdir(parents=True)
    (tmp_path / "topics" / "seeds" / "summary.md").write_text("| tcnlm | coherent |\n")
    text = report.render(report.load_records(tmp_path), [], report.topic_sections(tmp_path))
    assert text.index("## Topic quality over seeds") < text.index("| tcnlm | coherent |") \
        < text.index("## Mode `medium`")


def test_the_ablation_table_shows_finished_runs_and_dashes_for_the_rest(tmp_path):
    assert report.ablation_sections(tmp_path) == []
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation" / "paper_rmsprop.json").write_text(json.dumps(
        {"single_test_ppl": 131.1, "averaged_test_ppl": 115.4}))
    (tmp_path / "ablation" / "paper_psgld_T0.01.json").write_text(json.dumps(
        {"averaged_valid_ppl": 118.0, "averaged_test_ppl": 113.5, "num_samples": 24}))
    header, table = report.ablation_sections(tmp_path)
    assert "Table 7" in header
    assert "| paper | 131.10 | 115.40 | -- | -- | -- |" in table
    assert "| 0.01 | 24 | 118.00 | 113.50 | 0.866 |" in table
    assert "| 1 | -- | -- | -- | -- |" in table
    assert "Chosen on validation: T = 0.01 (1 of 3 temperatures finished)." in table
    assert table in report.render({}, [], [], [header, table])
    assert "Over seeds" not in table          # no run has per-block scores yet


def test_the_ablation_table_marks_a_run_stopped_by_its_epoch_cap(tmp_path):
    (tmp_path / "ablation").mkdir()
    logged = lambda values: [{"epoch": k + 1, "valid_avg_ppl": v} for k, v in enumerate(values)]
    (tmp_path / "ablation" / "paper_rmsprop.json").write_text(json.dumps(
        {"single_test_ppl": 131.1, "averaged_test_ppl": 115.4}))
    (tmp_path / "ablation" / "paper_psgld.json").write_text(json.dumps(
        {"averaged_valid_ppl": 150.0, "averaged_test_ppl": 146.0, "num_samples": 3,
         "last_sample_test_ppl": 190.0, "stopped": "epoch cap", "epochs_run": 2,
         "epochs": logged([200.0, 150.0])}))
    (tmp_path / "ablation" / "paper_psgld_T0.1.json").write_text(json.dumps(
        {"averaged_valid_ppl": 115.0, "averaged_test_ppl": 112.0, "num_samples": 9,
         "stopped": "early stopping", "epochs_run": 3, "epochs": logged([180.0, 130.0, 115.0])}))
    table = report.ablation_sections(tmp_path)[1]
    assert "| paper (pSGLD: epoch cap, 2 epochs) | 131.10 | 115.40 | 190.00 | 146.00 |" in table
    assert "| 1 (epoch cap, 2 epochs) | 3 | 150.00 | 146.00 | 1.114 |" in table
    assert "| 0.1 | 9 | 115.00 |" in table
    assert "at epoch 2, where the capped run stopped (from the runs' epoch logs): " \
           "T = 1: 150.00, T = 0.1: 130.00." in table


def _scored_ablation(root, psgld_seeds=(0,)):
    """Ablation records with per-block test scores (40 blocks of 400 tokens): pSGLD at
    T = 0.01 (4.70 nats per token, seed k adds 0.02 k) and RMSprop seeds 1-2."""
    directory = root / "ablation"
    directory.mkdir()
    tokens = [400] * 40
    write = lambda name, record: (directory / name).write_text(json.dumps(
        {"test_block_tokens": tokens, **record}))
    write("paper_psgld_T0.01.json", {"averaged_valid_ppl": 118.0, "averaged_test_ppl": 113.5,
                                     "averaged_test_block_nll": [400 * 4.7] * 40})
    for seed in psgld_seeds[1:]:
        write(f"paper_psgld_T0.01-s{seed}.json",
              {"averaged_test_block_nll": [400 * (4.7 + 0.02 * seed)] * 40})
    for seed, nats in ((1, 4.9), (2, 4.92)):
        write(f"paper_rmsprop-s{seed}.json", {"single_test_block_nll": [400 * nats] * 40,
                                              "averaged_test_block_nll": [400 * 4.75] * 40})
    return report.ablation_sections(root)[1]


def test_the_ablation_section_shows_the_seeded_comparison_once_runs_are_scored(tmp_path):
    table = _scored_ablation(tmp_path, psgld_seeds=(0, 1))
    assert "| pSGLD averaged, T = 0.01 | 0, 1 |" in table
    assert "| RMSprop single | 1, 2 |" in table
    assert "A better |" in table and "M2: RMSprop iterates averaged" in table


def test_a_side_of_one_seed_shows_its_value_not_a_zero_spread(tmp_path):
    table = _scored_ablation(tmp_path)
    row = next(line for line in table.splitlines() if "| RMSprop single | 1, 2 |" in line)
    assert f"| 0 | {np.exp(4.7):.2f} (one seed) |" in row and "+- 0.00" not in row
    assert re.search(r"\| 1, 2 \| \d+\.\d\d \+- \d+\.\d\d \|", row), row
