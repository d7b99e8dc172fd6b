"""The command of every shipped model in ``pretrained/index.json`` builds that model.

For each entry, its ``command`` is parsed by the command line's own parser and
resolved as ``tfktopic train`` resolves it (`tfktopic.cli.train_settings`,
without training or reading the corpus); then

* the model the run would build (`tfktopic.models.registry.build_model` on the
  resolved model settings, with the shipped vocabularies' sizes and the shipped
  number of training chunks: what the data would give) has the same
  constructor config as the shipped ``model.keras``;
* the resolved data settings (the vocabulary rules: minimum count, stop list,
  frequency and document-frequency thresholds, window sizes) and training
  settings are the ones the shipped ``run.json`` recorded;
* the command is the one `tools/make_pretrained.py` would run again.

The vocabularies themselves come from a pass over the whole corpus, which
this test avoids: it checks the rules that made them.
"""

import json
import pathlib
import shlex

import pytest

from conftest import shared_file
from tfktopic import cli, pretrained

REPO = pathlib.Path(__file__).resolve().parents[2]
NAMES = sorted(pretrained.available())


def _same_setting(key, resolved, recorded):
    if key == "stopwords" and recorded not in ("gensim", "none"):
        # A stop-list file: the same file, wherever the shared data folder is.
        return pathlib.Path(str(resolved)).name == pathlib.Path(str(recorded)).name
    return json.loads(json.dumps(resolved)) == recorded


@pytest.mark.parametrize("name", NAMES)
def test_the_index_command_builds_the_shipped_model(name, monkeypatch):
    from tfktopic.models import registry
    from tfktopic.runs import load_run

    shared_file("stopwords/mallet_en.txt")      # the commands name the shared stop list
    monkeypatch.chdir(REPO)                     # and are run from the repository root
    entry = pretrained.info(name)
    argv = shlex.split(entry["command"])
    assert argv[0] == "tfktopic"
    args, settings = cli.train_settings(argv[1:])
    assert args.model == entry["model"] and args.out == f"pretrained/{name}"

    shipped = load_run(f"pretrained:{name}")
    recorded = shipped.config
    assert recorded["model"] == args.model and recorded["seed"] == args.seed
    assert recorded["format"] == args.format
    assert pathlib.Path(recorded["corpus"]).name == pathlib.Path(args.corpus).name
    for part in ("data", "training"):
        for key, value in recorded[part].items():
            resolved = args.strategy if key == "strategy" else settings[part].get(key)
            assert _same_setting(key, resolved, value), (name, part, key, resolved, value)

    shipped_config = shipped.model.get_config()
    built = registry.build_model(
        args.model, settings["model"], lm_vocab=shipped.lm_vocab,
        topic_vocab=shipped.topic_vocab, num_documents=shipped_config.get("num_documents"),
        seed=args.seed, training=settings["training"])
    built_config = built.get_config()
    for config in (built_config, shipped_config):
        config.pop("name")
    assert built_config == shipped_config


def test_the_index_commands_are_make_pretrained_s():
    from tools import make_pretrained

    assert set(make_pretrained.MODELS) == set(NAMES)
    for name in NAMES:
        assert pretrained.info(name)["command"] == make_pretrained.command_line(name)


def _finished_run(directory, **changes):
    config = {"status": "finished", "model": "doc_topicrnn", "seed": 0,
              "training": {"learning_rate": 0.004}, "model_config": {"dropout": 0.5},
              "corpus": "/elsewhere/shared/data/apnews/apnews.txt"}
    config.update(changes)
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps(config))
    (directory / "results.json").write_text("{}")
    (directory / "model.keras").write_bytes(b"weights")
    (directory / "backup").mkdir()
    return directory


def test_a_study_run_is_adopted_only_when_its_command_trained_it(tmp_path, monkeypatch):
    from tools import make_pretrained

    shared_file("stopwords/mallet_en.txt")
    monkeypatch.chdir(REPO)
    args = make_pretrained.MODELS["doc-topicrnn-apnews"]["args"]
    from studies.common import SHARED_DATA

    here = f"{SHARED_DATA.resolve()}/apnews/apnews.txt"
    run = _finished_run(tmp_path / "run", corpus=here)
    make_pretrained.adopt(run, tmp_path / "shipped", args)
    assert sorted(p.name for p in (tmp_path / "shipped").iterdir()) == [
        "model.keras", "results.json", "run.json"]          # no backup/
    # the shared data named as the command names it, not as this machine's path
    shipped = json.loads((tmp_path / "shipped" / "run.json").read_text())
    assert shipped["corpus"] == "../shared/data/apnews/apnews.txt"
    with pytest.raises(SystemExit, match="trained with .*'seed': 1"):
        make_pretrained.adopt(_finished_run(tmp_path / "seed1", seed=1), tmp_path / "x", args)
    with pytest.raises(SystemExit, match="not a finished run"):
        make_pretrained.adopt(_finished_run(tmp_path / "cut", status="training"),
                              tmp_path / "y", args)


def test_float16_storage_halves_the_signed_weights_and_keeps_the_nonnegative_ones(tmp_path):
    """`store_float16`: signed tensors (neural weights) are stored as float16, nonnegative
    ones (probabilities, Dirichlet parameters: their logarithms matter) stay float32; the
    file loads as it is, into float32 variables, with outputs within float16 rounding."""
    import io
    import zipfile

    import h5py
    import keras
    import numpy as np

    from tools import make_pretrained

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((40,)), keras.layers.Dense(300),
                              keras.layers.Dense(7)])
    positive = np.abs(np.asarray(model.layers[1].kernel)) + 1e-12        # tiny entries too
    model.layers[1].kernel.assign(positive)
    path = tmp_path / "model.keras"
    model.save(path)
    before = path.stat().st_size
    counts = make_pretrained.store_float16(path)
    assert counts == {"float16": 40 * 300, "float32": 300 + 300 * 7 + 7}  # zero biases too
    assert path.stat().st_size < 0.75 * before

    with zipfile.ZipFile(path) as archive:
        weights = h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
        dtypes = {}
        weights.visititems(lambda name, item: dtypes.__setitem__(name, item.dtype)
                           if isinstance(item, h5py.Dataset) else None)
    assert sorted(str(d) for d in dtypes.values()) == ["float16"] + ["float32"] * 3

    loaded = keras.saving.load_model(path)
    assert all(w.dtype == "float32" for w in loaded.weights)
    np.testing.assert_array_equal(np.asarray(loaded.layers[1].kernel), positive)
    x = np.random.default_rng(0).normal(size=(5, 40)).astype(np.float32)
    np.testing.assert_allclose(loaded(x), model(x), rtol=2e-3, atol=2e-3)
    assert not np.array_equal(np.asarray(loaded.layers[0].kernel),
                              np.asarray(model.layers[0].kernel))
