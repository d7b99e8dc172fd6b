"""The pretrained models in pretrained/: index, loading, recorded perplexity, offline use."""

import pytest

from conftest import shared_file
from tfktopic import cli, pretrained

MODELS = sorted(pretrained.available())
GENERATING = {"tcnlm", "topicrnn", "doc_topicrnn", "rgbn_rnn", "gbn_rnn"}


def test_index_lists_every_family_small_and_honest():
    index = pretrained.available()
    families = {entry["model"] for entry in index.values()}
    assert families >= {"tcnlm", "lstm"} and families & {"topicrnn", "doc_topicrnn"}
    assert families & {"rgbn_rnn", "gbn_rnn"}       # one model class (`recurrent` or not)
    total_mb = 0.0
    for name, entry in index.items():
        files = list(pretrained.resolve(name).iterdir())
        total_mb += sum(f.stat().st_size for f in files) / 2**20
        assert {f.name for f in files} >= {"model.keras", "lm_vocab.json", "run.json"}
        assert not any(f.is_dir() for f in files), f"{name}: checkpoints were not removed"
        assert entry["command"].startswith(f"tfktopic train {entry['model']} ")
        assert f"--out pretrained/{name}" in entry["command"]
        # Each model learned something: better than the training unigram on its test split.
        assert entry["test_perplexity"] < entry["unigram_perplexity"], name
    assert total_mb < 30, f"pretrained models take {total_mb:.1f} MB (limit 30)"


@pytest.mark.parametrize("name", MODELS)
def test_loads_and_reproduces_its_recorded_perplexity(name):
    from tfktopic.runs import evaluate_run, load_run

    entry = pretrained.info(name)
    check = entry["check"]
    corpus = shared_file(check["corpus"])
    run = load_run(f"pretrained:{name}")
    assert run.name == entry["model"]
    report = evaluate_run(run, corpus=str(corpus), format=check["format"],
                          max_documents=check["max_documents"], num_generated=0, log=None)
    assert report["perplexity"]["perplexity"] == pytest.approx(check["perplexity"], rel=1e-4)


@pytest.mark.parametrize("name", [n for n in MODELS
                                  if pretrained.info(n)["model"] in GENERATING])
def test_generate_from_a_pretrained_name_offline(name, capsys):
    assert cli.main(["generate", f"pretrained:{name}", "--topic", "0", "--num", "2",
                     "--seed", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines, "nothing was generated"


def test_unknown_pretrained_name_is_one_clear_error(capsys):
    assert cli.main(["generate", "pretrained:no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pretrained:no-such-model: no such pretrained model" in err[0]
    assert "tcnlm-apnews" in err[0]


def test_a_replaced_name_says_what_replaced_it(capsys):
    retired = [old for old, new in pretrained.REPLACED.items() if new in MODELS]
    assert retired
    for name in retired:
        assert cli.main(["generate", f"pretrained:{name}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert f"pretrained:{name}: replaced by pretrained:{pretrained.REPLACED[name]}" in err[0]


def test_generated_text_has_no_unk_unless_asked_for(capsys):
    args = ["generate", "pretrained:doc-topicrnn-apnews", "--topic", "3", "--num", "4",
            "--seed", "1"]
    assert cli.main(args + ["--unk"]) == 0
    assert "<unk>" in capsys.readouterr().out      # this model's habit, at this seed
    for extra in ([], ["--no-unk"]):                # the default keeps <unk> out
        assert cli.main(args + extra) == 0
        text = capsys.readouterr().out
        assert text.strip() and "<unk>" not in text
