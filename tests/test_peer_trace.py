"""`benchmarks.peer.trace`: each variant changes exactly its one difference from the study's run."""

import pytest

from benchmarks.peer import trace


def _resolved(name):
    from tfktopic import cli
    from tfktopic.runs import build_optimizer

    command = trace.trace_command(name, "runs/trace/x")
    _, settings = cli.train_settings(command[command.index("train"):])
    config = build_optimizer(settings, num_train_tokens=1000).get_config()
    config.pop("name")
    return settings, config


def test_each_variant_differs_from_its_baseline_only_in_its_overrides():
    base = {arm: _resolved(name) for name, arm in (("keras", "doc_lstm_keras"),
                                                    ("topicrnn_keras", "doc_topicrnn_keras"))}
    assert "initialization" not in base["doc_lstm_keras"][0]["model"]
    expected = {
        "gclip0.5": ({}, {"clipnorm": None, "global_clipnorm": 0.5}),
        "torchinit": ({"initialization": "torch"}, {}),
        "torchinit_gclip0.5": ({"initialization": "torch"},
                               {"clipnorm": None, "global_clipnorm": 0.5}),
        "torchinit_lstm_only": ({"initialization": {"lstm": "torch"}}, {}),
        "torchinit_embedding_softmax": (
            {"initialization": {"embedding": "torch", "softmax": "torch"}}, {}),
        "topicrnn_torchinit": ({"initialization": "torch"}, {}),
        "topicrnn_torchinit_gclip0.5": ({"initialization": "torch"},
                                        {"clipnorm": None, "global_clipnorm": 0.5}),
    }
    assert set(expected) | {"keras", "topicrnn_keras"} == set(trace.VARIANTS)
    for name, (model, optimizer) in expected.items():
        settings, config = _resolved(name)
        base_settings, base_config = base[trace.VARIANTS[name][0]]
        assert settings["model"] == {**base_settings["model"], **model}, name
        assert settings["data"] == base_settings["data"], name
        changed = {k: v for k, v in config.items() if base_config.get(k) != v}
        assert changed == optimizer, name


def test_an_unknown_variant_is_named():
    with pytest.raises(SystemExit):
        trace.main(["run", "no_such"])
