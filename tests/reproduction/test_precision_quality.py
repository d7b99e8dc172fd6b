"""The mixed-precision quality verdict (benchmarks/precision_quality.py): bf16 against
float32 by the paired bootstrap over test documents and seeds (DESIGN §5a)."""

import numpy as np
import pytest

from benchmarks.precision_quality import arm_name, batch_arms, merged, run_command, verdict


def _documents(nats_per_token, seeds=(0, 1), num_docs=60, seed_spread=0.01):
    """Per-document scores of runs whose NLL per token is `nats_per_token` + seed noise."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(20, 200, size=num_docs)
    out = {}
    for precision, nats in nats_per_token.items():
        out[precision] = {}
        for seed in seeds:
            shift = seed_spread * rng.standard_normal()
            per_doc = nats + shift + 0.02 * rng.standard_normal(num_docs)
            out[precision][seed] = {"nll": (per_doc * tokens).tolist(),
                                    "tokens": tokens.tolist()}
    return out


def _ppl(documents):
    return {p: {s: float(np.exp(np.sum(d["nll"]) / np.sum(d["tokens"])))
                for s, d in runs.items()} for p, runs in documents.items()}


@pytest.mark.parametrize("bf16_nats, expected", [
    (4.60, "within seed noise"),
    (4.70, "bf16 worse"),        # 0.1 nats per token: 10% worse, far outside the seed noise
    (4.50, "bf16 better"),       # better is noticed too
])
def test_verdict_is_the_bootstrap_interval_of_the_ratio(bf16_nats, expected):
    documents = _documents({"float32": 4.60, "mixed_bfloat16": bf16_nats})
    ppl = _ppl(documents)
    result = verdict(ppl["float32"], ppl["mixed_bfloat16"], documents)
    assert result["verdict"] == expected
    c = result["comparison"]
    assert c["ratio"] == pytest.approx(np.mean(list(ppl["mixed_bfloat16"].values()))
                                       / np.mean(list(ppl["float32"].values())))
    assert (c["low"] <= 1.0 <= c["high"]) == (expected == "within seed noise")
    assert result["ratios"][0] == pytest.approx(ppl["mixed_bfloat16"][0] / ppl["float32"][0])
    assert result["baseline_spread"] == pytest.approx(max(ppl["float32"].values())
                                                     / min(ppl["float32"].values()))


def test_one_seed_or_no_scores_gives_no_verdict():
    documents = _documents({"float32": 4.6, "mixed_bfloat16": 4.6}, seeds=(0,))
    ppl = _ppl(documents)
    assert verdict(ppl["float32"], ppl["mixed_bfloat16"], documents)["verdict"] \
        == "needs 2 seeds"
    assert verdict({0: 100.0}, {})["verdict"] == "no pair yet"
    assert verdict({0: 100.0, 1: 101.0}, {0: 100.0, 1: 101.0})["verdict"] \
        == "no per-document scores"
    documents = _documents({"float32": 4.6, "mixed_bfloat16": 4.6})
    documents["float32"][1] = None        # a run without its test_documents.json
    ppl = {0: 100.0, 1: 101.0}
    assert verdict(ppl, ppl, documents)["verdict"] == "no per-document scores"


def test_runs_that_scored_different_tokens_are_refused():
    documents = _documents({"float32": 4.6, "mixed_bfloat16": 4.6})
    documents["mixed_bfloat16"][1]["tokens"][0] += 1
    ppl = _ppl(documents)
    with pytest.raises(ValueError, match="same target tokens"):
        verdict(ppl["float32"], ppl["mixed_bfloat16"], documents)


def test_a_batch_size_comparison_names_its_arms():
    arms = (("float32", 64, None), ("float32", 256, None))
    names = {"float32": "float32-b64", "mixed_bfloat16": "float32-b256"}
    documents = {names[k]: v for k, v in _documents({"float32": 4.60,
                                                     "mixed_bfloat16": 4.70}).items()}
    ppl = _ppl(documents)
    result = verdict(ppl["float32-b64"], ppl["float32-b256"], documents, arms)
    assert result["verdict"] == "batch 256 worse"
    assert result["ratios"][1] == pytest.approx(ppl["float32-b256"][1] / ppl["float32-b64"][1])


def test_batch_arms_are_two_different_sizes_with_optional_learning_rates():
    assert batch_arms(["64", "256"]) == (("float32", 64, None), ("float32", 256, None))
    assert batch_arms(["64", "256:0.008"]) == (("float32", 64, None), ("float32", 256, 0.008))
    assert batch_arms(["64", "64:0.004"])[1] == ("float32", 64, 0.004)   # the rate differs
    for specs in (["64"], ["64", "64"], ["64", "128", "256"]):
        with pytest.raises(ValueError, match="two different arms"):
            batch_arms(specs)
    for specs in (["64", "big"], ["64", "256:fast"]):
        with pytest.raises(ValueError, match="is not SIZE or SIZE:LEARNING_RATE"):
            batch_arms(specs)
    assert arm_name(("float32", 256, 0.008)) == "float32-b256-lr0.008"
    assert arm_name(("mixed_bfloat16", None, None)) == "mixed_bfloat16"


def test_only_a_batch_arm_sets_the_batch_size(apnews_path, mallet_stopwords_path):
    command = run_command("lstm", ("float32", 256, 0.008), 0, 3, "out")
    assert command[command.index("--batch-size") + 1] == "256"
    assert command[command.index("--learning-rate") + 1] == "0.008"
    assert command[command.index("--precision") + 1] == "float32"
    command = run_command("lstm", ("mixed_bfloat16", None, None), 0, 3, "out")
    assert "--batch-size" not in command and "--learning-rate" not in command


def test_a_rerun_of_some_models_keeps_the_others_of_the_same_comparison():
    """Rerunning two models into the record keeps the earlier models (a record from before
    ``arms`` was written counts as float32 / bf16) and replaces the rerun ones; a record of
    another comparison (other arms, epochs or seeds) is replaced, not mixed in."""
    old = {"epochs": 3, "seeds": [0, 1], "models": {"lstm": {"verdict": "a"},
                                                    "doc_lstm": {"verdict": "old"}}}
    new = {"epochs": 3, "seeds": [0, 1], "arms": ["float32", "mixed_bfloat16"],
           "models": {"doc_lstm": {"verdict": "new"}, "gbn_rnn": {"verdict": "b"}}}
    assert merged(old, new)["models"] == {"lstm": {"verdict": "a"}, "doc_lstm": {"verdict": "new"},
                                          "gbn_rnn": {"verdict": "b"}}
    assert merged(None, new) is new
    for change in ({"epochs": 2}, {"seeds": [0]}, {"arms": ["float32-b64", "float32-b256"]}):
        assert merged({**old, **change}, new) == new
