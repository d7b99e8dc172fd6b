"""The settings every arm of the comparison study trains with are pinned.

`studies.study.protocol` runs ``tfktopic train MODEL --preset medium ...`` (APNEWS) and
the PTB arms for hours; a change to a preset, to the ``--set`` resolution or to
rGBN's per-layer sizes would silently change what its later runs compute. Each
arm's command (every grid configuration) is parsed by the command line's own
parser and resolved as ``tfktopic train`` resolves it (`tfktopic.cli.
train_settings`), without reading data, and compared with
``tests/data/study_arm_settings.json``: the resolution recorded before the rGBN
presets moved to the one preset schema (written by ``python
tests/test_study_settings.py --write``, never by hand). For rGBN / GBN arms the
built model's constructor config (the per-layer sizes cut to ``num_layers``) and
for every arm the optimizer config are pinned too.
"""

import json
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "study_arm_settings.json"


def _portable(settings):
    """The settings with the stop-list path reduced to its file name (machine-independent)."""
    settings = json.loads(json.dumps(settings, default=list))
    stopwords = settings["data"]["stopwords"]
    if stopwords not in ("gensim", "none"):
        settings["data"]["stopwords"] = pathlib.Path(stopwords).name
    return settings


def resolve_arm(corpus, arm, config, out):
    """What ``tfktopic train`` resolves the study's command of `arm` / `config` to."""
    from studies.study import protocol as study
    from tfktopic import cli
    from tfktopic.models import registry
    from tfktopic.runs import build_optimizer

    command = study.command(corpus, arm, config, 0, out)
    args, settings = cli.train_settings(command[command.index("train"):])
    optimizer = build_optimizer(settings, num_train_tokens=1000, seed=args.seed).get_config()
    optimizer.pop("name", None)
    record = {"settings": _portable(settings),
              "optimizer": json.loads(json.dumps(optimizer, default=str))}
    model_name = study.arms_of(corpus)[arm][0]
    if registry.get(model_name).hierarchical and config == next(iter(study.full_grid(corpus))):
        model = registry.build_model(model_name, settings["model"], lm_vocab=range(1000),
                                     topic_vocab=range(300), num_documents=100,
                                     seed=args.seed)
        model_config = model.get_config()
        model_config.pop("name", None)
        record["model_config"] = json.loads(json.dumps(model_config))
    return record


def _arms():
    from studies.study import protocol as study

    return [(corpus, arm, config) for corpus in study.STUDIES for arm in study.arms_of(corpus)
            for config in study.full_grid(corpus)]


def _key(corpus, arm, config):
    return f"{corpus}/{arm}/{config}"


@pytest.mark.parametrize("corpus, arm, config", _arms(), ids=lambda v: str(v))
def test_every_study_arm_resolves_to_its_recorded_settings(corpus, arm, config, tmp_path,
                                                           monkeypatch):
    from conftest import shared_file

    shared_file("stopwords/mallet_en.txt")
    shared_file("apnews/apnews.txt" if corpus == "apnews" else "ptb/ptb.train.txt")
    monkeypatch.chdir(REPO)
    recorded = json.loads(FIXTURE.read_text())
    assert _key(corpus, arm, config) in recorded, "a new arm: record it with --write"
    assert resolve_arm(corpus, arm, config, tmp_path / "run") == \
        recorded[_key(corpus, arm, config)]


def test_the_record_covers_exactly_the_study_arms():
    recorded = json.loads(FIXTURE.read_text())
    assert set(recorded) == {_key(*arm) for arm in _arms()}
    # The medium rGBN arms: one 256-unit layer with 100 topics, or 256-128-64 / 100-80-50.
    assert recorded["apnews/rgbn_rnn_1/lr2e-3_do0.3"]["model_config"]["hidden_sizes"] == [256]
    assert recorded["apnews/gbn_rnn_3/lr2e-3_do0.3"]["model_config"]["topic_sizes"] == \
        [100, 80, 50]


def test_the_leak_free_trained_arms_and_only_they_train_on_preceding_contexts():
    """`study.LEAK_FREE_TRAINED`: every other arm has the default, every other sentence
    of the document as a topic model's training context, as the papers trained."""
    from studies.study import protocol as study

    assert study.LEAK_FREE_TRAINED == ("gbn_rnn_1_preceding", "rgbn_rnn_1_preceding",
                                       "gbn_rnn_3", "rgbn_rnn_3")
    recorded = json.loads(FIXTURE.read_text())
    for key, record in recorded.items():
        corpus, arm, _ = key.split("/")
        expected = "preceding" if arm in study.LEAK_FREE_TRAINED else "all_other"
        assert record["settings"]["data"].get("train_context", "all_other") == expected, key


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import os
    import tempfile

    os.chdir(REPO)
    with tempfile.TemporaryDirectory() as tmp:
        records = {_key(*arm): resolve_arm(*arm, pathlib.Path(tmp) / "run") for arm in _arms()}
    FIXTURE.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    print(f"{len(records)} arms written to {FIXTURE}")
