"""Train the small pretrained models shipped in ``pretrained/`` and write their index.

    python tools/make_pretrained.py                      # every model (about an hour, 2 cores)
    python tools/make_pretrained.py --models tcnlm-apnews

Each model is trained by the ``tfktopic train`` command listed in `MODELS` (run from
the repository root, with the shared corpora in ``../shared/data``); the command, its
test perplexity (leak-free protocol, the run's own 80/10/10 document split) and the
perplexity on a fixed **check slice** (the first N documents of the corpus file,
which `tests/library/test_pretrained.py` recomputes) go into ``pretrained/index.json``. The
shipped directory keeps only what inference needs: ``model.keras`` saved again
without the optimizer state and with its signed tensors stored as float16
(`store_float16`; the index records the test perplexity with the stored weights next to
the float32 run's), the vocabularies, ``run.json`` and ``results.json`` (the ``backup/``
checkpoints are deleted).
"""

import argparse
import datetime
import json
import pathlib
import shlex
import shutil
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))

DATA = "../shared/data"  # relative to the repository root, as the commands are run

#: name -> description, the `tfktopic` arguments (``--out`` is added) and the check slice.
#: The arguments name the preset and every size explicitly, so that the command builds the
#: shipped model's configuration even after the presets change
#: (`tests/tooling/test_pretrained_commands.py` checks it against the shipped ``model.keras``).
MODELS = {
    "psgld-lstm-ptb": {
        "description": "LSTM LM (64 units) trained by pSGLD on the PTB training file; the "
                       "final sample",
        "args": ["train", "lstm", "--corpus", f"{DATA}/ptb/ptb.train.txt", "--format", "ptb",
                 "--preset", "small", "--optimizer", "psgld", "--set", "min_count=1",
                 "--set", "embedding_dim=32", "--set", "hidden_dim=64", "--set", "dropout=0.0",
                 "--epochs", "2"],
        "check": {"corpus": "ptb/ptb.test.txt", "format": "ptb", "max_documents": 40},
    },
}
#: Converged study runs shipped as they are (`studies.study.protocol`, issue 13): name -> (arm,
#: configuration, seed, description). The seed is the best available by validation
#: perplexity; the command is the study's own, so `--from-run` adopts the study's run
#: directory instead of training it again.
FROM_STUDY = {
    "tcnlm-apnews": ("tcnlm", "lr4e-3_do0.5", 1,
                     "TCNLM (factorised mixture of 50 topic experts, LSTM 256; the study's "
                     "medium preset, lr 4e-3, dropout 0.5, seed 1) on APNEWS, trained to "
                     "convergence"),
    "doc-topicrnn-apnews": ("doc_topicrnn", "lr4e-3_do0.5", 0,
                            "TopicRNN on the streamed document LSTM (LSTM 256, 50 topics; the "
                            "study's medium preset with Zheng et al.'s recipe, lr 4e-3, dropout "
                            "0.5, seed 0) on APNEWS, trained to convergence"),
    "gbn-rnn-apnews": ("gbn_rnn_1", "lr4e-3_do0.5", 1,
                       "GBN-RNN, 1 layer (LSTM 256 with 100 topic gates, Weibull encoder over "
                       "the preceding sentences; the study's medium preset, lr 4e-3, dropout "
                       "0.5, seed 1) on APNEWS, trained to convergence"),
}

#: A shipped name -> the model that replaced it: shipping the new one removes the old one
#: from the index and the folder (`tfktopic.pretrained.REPLACED` names it in errors).
from tfktopic.pretrained import REPLACED  # noqa: E402


def study_args(arm, config, seed):
    """The `tfktopic` arguments of an APNEWS study run, with the shared data named
    relative to the repository root (``../shared/data``) and no ``--out``/``--verbose``."""
    from studies.study import protocol as study

    # after `python -m tfktopic`
    argv = study.command("apnews", arm, config, seed, "OUT", data_root=DATA)[3:]
    for flag in ("--out", "--verbose"):
        cut = argv.index(flag)
        argv = argv[:cut] + argv[cut + 2:]
    return argv


for _name, (_arm, _config, _seed, _description) in FROM_STUDY.items():
    MODELS[_name] = {
        "description": _description,
        "args": study_args(_arm, _config, _seed),
        "check": {"corpus": "apnews/apnews.txt", "format": "tdlm", "max_documents": 30},
    }

KEEP = ("model.keras", "lm_vocab.json", "topic_vocab.json", "run.json", "results.json")


def command_line(name):
    """The shell command that trains `name` (from the repository root), as the index lists it."""
    return shlex.join(["tfktopic", *MODELS[name]["args"], "--out", f"pretrained/{name}",
                       "--verbose", "2"])


def strip(directory):
    """Save model.keras again without optimizer state; delete everything not in KEEP."""
    import keras

    path = directory / "model.keras"
    model = keras.saving.load_model(path, compile=False)
    model.save(path)
    for item in directory.iterdir():
        if item.name not in KEEP:
            shutil.rmtree(item) if item.is_dir() else item.unlink()


def adopt(run, directory, args):
    """Copy the finished run `run` (a ``tfktopic train`` output of `args`) to `directory`.

    Raises:
        SystemExit: the run is not finished, or was trained by another command (its model,
            seed, learning rate or dropout differ from what `args` resolve to; every other
            data and training setting is compared with the index's command by
            ``tests/tooling/test_pretrained_commands.py``).
    """
    from tfktopic import cli

    run = pathlib.Path(run)
    config = json.loads((run / "run.json").read_text())
    if config.get("status") != "finished" or not (run / "results.json").exists():
        sys.exit(f"[pretrained] {run}: not a finished run (status {config.get('status')!r})")
    parsed, settings = cli.train_settings(list(args) + ["--out", str(directory)])
    wanted = {"model": parsed.model, "seed": parsed.seed,
              "learning_rate": settings["training"]["learning_rate"],
              "dropout": settings["model"].get("dropout")}
    found = {"model": config["model"], "seed": config["seed"],
             "learning_rate": config["training"]["learning_rate"],
             "dropout": config["model_config"].get("dropout")}
    if wanted != found:
        sys.exit(f"[pretrained] {run}: trained with {found}, the command says {wanted}")
    from studies.common import SHARED_DATA

    directory.mkdir(parents=True, exist_ok=True)
    shared = str(SHARED_DATA.resolve())
    for name in KEEP:
        if not (run / name).exists():
            continue
        if name.endswith(".json"):   # the shared data named as the command names it
            text = (run / name).read_text()
            (directory / name).write_text(text.replace(shared + "/", DATA + "/"))
        else:
            shutil.copy2(run / name, directory / name)


def _copy_halved(source, target, counts):
    """Copy the HDF5 group `source` into `target`, signed float32 datasets as float16."""
    import h5py
    import numpy as np

    target.attrs.update(source.attrs)
    for key, item in source.items():
        if isinstance(item, h5py.Group):
            _copy_halved(item, target.create_group(key), counts)
            continue
        data = item[()]
        if isinstance(data, np.ndarray) and data.dtype == np.float32 and data.size and \
                (data < 0).any() and np.isfinite(data).all() and \
                np.abs(data).max() <= np.finfo(np.float16).max:
            data = data.astype(np.float16)
            counts["float16"] += data.size
        elif isinstance(data, np.ndarray) and data.dtype == np.float32:
            counts["float32"] += data.size
        target.create_dataset(key, data=data)
        target[key].attrs.update(item.attrs)


def store_float16(path):
    """Store the signed float32 tensors of a ``.keras`` file as float16, in place.

    The neural weights (embeddings, LSTM kernels, softmax, encoders) are signed and take
    the rounding of float16 (relative 2^-11, absolute 2^-25 near zero) without a
    measurable change of perplexity (`main` records both); nonnegative tensors
    (probabilities, Dirichlet / gamma parameters such as LDA's lambda or rGBN's Phi) stay
    float32, since rounding their small entries would move their logarithms. Keras loads
    the file as it is: each variable keeps its own dtype and casts what it is assigned.

    Args:
        path: a ``.keras`` file (a zip holding ``model.weights.h5``).

    Returns:
        dict: elements stored as ``float16`` and kept as ``float32``.
    """
    import io
    import zipfile

    import h5py

    path = pathlib.Path(path)
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    counts = {"float16": 0, "float32": 0}
    rewritten = []
    for info, data in members:
        if info.filename == "model.weights.h5":
            halved = io.BytesIO()
            with h5py.File(io.BytesIO(data), "r") as source, h5py.File(halved, "w") as target:
                _copy_halved(source, target, counts)
            data = halved.getvalue()
        rewritten.append((info, data))
    temporary = path.with_suffix(".tmp")
    with zipfile.ZipFile(temporary, "w") as archive:
        for info, data in rewritten:
            archive.writestr(info, data)
    temporary.replace(path)
    return counts


def add_usage(directory):
    """Store the topic usage of a shipped topic model in its ``results.json``
    (`tfktopic.runs.usage.topic_usage` over its own training split; the corpus must be
    under ../shared/data); returns it, or None for a model whose topic proportions are not
    on the simplex."""
    from tfktopic.runs import load_run
    from tfktopic.runs.files import write_json
    from tfktopic.runs.reports import run_splits
    from tfktopic.models import registry
    from tfktopic.runs.usage import topic_usage

    run = load_run(directory)
    if not registry.get(run.name).simplex_topics:
        return None
    usage = topic_usage(run, run_splits(run.config)["train"])
    path = pathlib.Path(directory) / "results.json"
    write_json(path, {**json.loads(path.read_text()), "topic_usage": usage})
    return usage


def stored_test_perplexity(directory):
    """Perplexity of the run on its own test split (as ``tfktopic evaluate`` scores it)."""
    from tfktopic.runs import evaluate_run, load_run

    report = evaluate_run(load_run(directory), num_generated=0, log=None)
    return report["perplexity"]["perplexity"]


def check_perplexity(directory, check):
    """Perplexity of the run on its check slice (what tests/library/test_pretrained.py recomputes)."""
    from tfktopic.runs import evaluate_run, load_run

    run = load_run(directory)
    report = evaluate_run(run, corpus=str(REPO_ROOT.parent / "shared" / "data" / check["corpus"]),
                          format=check["format"], max_documents=check["max_documents"],
                          num_generated=0, log=None)
    return report["perplexity"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", default=str(REPO_ROOT / "pretrained"))
    parser.add_argument("--quick", action="store_true",
                        help="a dry run: 20 documents, 1 epoch (use with --out elsewhere)")
    parser.add_argument("--from-run", default=None,
                        help="ship this finished run directory of the model's command "
                        "(one of FROM_STUDY, e.g. "
                        "runs/study/apnews/doc_topicrnn/lr4e-3_do0.5-s0) instead of training "
                        "it again")
    parser.add_argument("--float32", action="store_true",
                        help="keep every weight float32 (default: signed tensors are stored "
                        "as float16, `store_float16`, and the test perplexity is measured "
                        "again with the stored weights)")
    parser.add_argument("--usage-only", action="store_true",
                        help="only store the topic usage of the shipped models in their "
                        "results.json (`add_usage`), without training or touching the index")
    args = parser.parse_args(argv)
    if args.from_run and "," in args.models:
        parser.error("--from-run: name the one model it is (--models NAME)")
    from tfktopic import cli
    from tfktopic.version import __version__

    out = pathlib.Path(args.out)
    index_path = out / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    for name in [n.strip() for n in args.models.split(",") if n.strip()]:
        spec = MODELS[name]
        if args.usage_only:
            from tfktopic.runs.usage import unused

            usage = add_usage(out / name)
            print(f"[pretrained] {name}: "
                  + ("no usage (topic proportions not on the simplex)" if usage is None else
                     f"{len(unused(usage))} of {len(usage)} topics unused"))
            continue
        directory = out / name
        print(f"[pretrained] {command_line(name)}", flush=True)
        if args.from_run:
            adopt(args.from_run, directory, spec["args"])
        else:
            extra = ["--max-documents", "20", "--epochs", "1"] if args.quick else []
            status = cli.main(spec["args"] + extra + ["--out", str(directory), "--verbose", "2"])
            if status:
                sys.exit(f"[pretrained] {name}: training failed with status {status}")
        strip(directory)
        add_usage(directory)
        results = json.loads((directory / "results.json").read_text())
        test_perplexity, halved = results["test"]["perplexity"], {}
        if not args.float32:       # the shipped weights are scored again
            halved = {"weights": store_float16(directory / "model.keras"),
                      "test_perplexity_float32": test_perplexity}
            test_perplexity = stored_test_perplexity(directory)
        check = {**spec["check"], "protocol": "preceding",
                 "perplexity": check_perplexity(directory, spec["check"])["perplexity"]}
        index[name] = {
            "description": spec["description"],
            "model": spec["args"][1],
            "command": command_line(name),
            "test_perplexity": test_perplexity,
            **halved,
            "test_protocol": results["test"].get("protocol", "preceding"),
            "unigram_perplexity": results.get("unigram_ppl"),
            "check": check,
            "size_mb": round(sum(f.stat().st_size for f in directory.iterdir()) / 2**20, 2),
            "tfktopic_version": __version__,
            "trained": datetime.date.today().isoformat(),
        }
        for retired in [old for old, new in REPLACED.items() if new == name]:
            index.pop(retired, None)
            if (out / retired).is_dir():
                shutil.rmtree(out / retired)
                print(f"[pretrained] removed {retired} (replaced by {name})", flush=True)
        index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
        print(f"[pretrained] {name}: test perplexity {index[name]['test_perplexity']:.2f}, "
              f"check slice {check['perplexity']:.2f}, {index[name]['size_mb']} MB", flush=True)
    return index


if __name__ == "__main__":
    main()
