"""`benchmarks.backend_speed report`: the per-family JAX / TensorFlow table from two
``--families`` records (synthetic records: no training here)."""

import json

import pytest

from benchmarks import backend_speed


def _record(path, backend, rates, error_family=None):
    families = {"plain": {"tokens_per_s": rates[0]}}
    for name, rate in zip(("lstm", "rgbn_rnn"), rates[1:]):
        families[name] = {"tokens_per_s": rate, "vs_plain": rate / rates[0]}
    if error_family:
        families[error_family] = {"error": "NotImplementedError: needs TensorFlow"}
    path.write_text(json.dumps({"backend": backend, "size": "small", "steps": 20,
                                "threads": "1", "families": families}))
    return str(path)


def test_report_tabulates_each_family_per_backend_with_its_ratio_to_plain(tmp_path):
    jax = _record(tmp_path / "jax.json", "jax", [4500.0, 3000.0, 900.0], "doc_topicrnn")
    tf = _record(tmp_path / "tf.json", "tensorflow", [6700.0, 8040.0, 1340.0])
    out = tmp_path / "table.md"
    text = backend_speed.report([jax, tf], out=str(out))
    assert out.read_text() == text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()
            if line.startswith("| ") and "family" not in line}
    assert list(rows) == ["plain", "lstm", "rgbn_rnn", "doc_topicrnn"]
    assert "| jax tokens/s (x plain) | tensorflow tokens/s (x plain) |" in text
    assert rows["lstm"] == "| lstm | 3,000 (0.67) | 8,040 (1.20) |"
    assert rows["plain"] == "| plain | 4,500 | 6,700 |"
    assert "NotImplementedError" in rows["doc_topicrnn"] and rows["doc_topicrnn"].endswith("| - |")


def test_report_refuses_a_record_without_families_naming_the_file(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"backend": "jax", "plain": {"tokens_per_s": 1.0}}))
    with pytest.raises(ValueError, match="old.json: not a --families record"):
        backend_speed.report([str(path)])


def test_families_flag_refuses_an_unknown_family(capsys, tmp_path):
    with pytest.raises(SystemExit):
        backend_speed.main(["--out", str(tmp_path / "x.json"), "--families", "lstm,nonesuch"])
    assert "unknown nonesuch" in capsys.readouterr().err
