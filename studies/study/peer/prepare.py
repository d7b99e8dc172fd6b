"""Prepare a run of Zheng, Vafa & Blei's own PyTorch code on our exact APNEWS split.

``carolinazheng/revisiting-tglms`` (TMLR 2023) is read from its git mirror and
unpacked into a scratch directory **outside** this repository; nothing of it is
copied into tfktopic. This script

1. unpacks the pinned commit (`COMMIT`) into ``--scratch`` (``git archive``),
2. applies the few search/replace edits of `PATCHES` that stop the code from
   running under today's PyTorch (each one described in our own words; the
   pristine text must match, so a different commit fails loudly),
3. writes our own minimal stand-ins for the three imports it cannot get
   (`SHIMS`: ``torchtext.vocab`` -- torchtext has no build for current
   PyTorch --, and stubs for ``wandb`` and ``gensim``, which the code imports
   unconditionally but uses only for W&B logging and word2vec embeddings),
4. exports our split (`tfktopic.runs.prepare_data`, split seed 0) as their
   ``train.txt`` / ``valid.txt`` / ``test.txt`` under ``--data/apnews/``
   (one document per line, sentences joined by a tab, tokens by a space),
5. prints the run commands (``README.md`` beside this file explains them).

It is idempotent: files are only (re)written when their content differs, so it
can run while a peer run reads the scratch copy.

Usage::

    python -m studies.study.peer.prepare --scratch ../peer-scratch --data ../peer-data
"""

import argparse
import hashlib
import io
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tarfile

from studies.common import SHARED_DATA

#: Everything of the peer run lives next to the project, never inside it: the mirror
#: (`fetch github:carolinazheng/revisiting-tglms`; or $TFKTOPIC_PEER_MIRROR), the
#: scratch copy, the exported data, the PyTorch venv and the runs.
OUTSIDE = pathlib.Path(__file__).resolve().parents[3].parent
MIRROR = os.environ.get("TFKTOPIC_PEER_MIRROR",
                        str(OUTSIDE / ".mirror" / "carolinazheng+revisiting-tglms" / "repo"))
#: The commit the patches were written for (the mirror's HEAD, "Create LICENSE").
COMMIT = "104697f392f3c4575b9ed2df1874ce32406a9d7e"
CORPUS = str(SHARED_DATA / "apnews" / "apnews.txt")
DATASET = "apnews"  # one of their supported names (utils.supported_datasets)
PYTHON = str(OUTSIDE / "peer-venv" / "bin" / "python")
RUNS = str(OUTSIDE / "peer-runs")
STOPWORDS = str(SHARED_DATA / "stopwords" / "mallet_en.txt")
MARKER = ".tfktopic-peer.json"

#: (file, pristine text, replacement, expected occurrences, why) -- applied to the
#: pristine file of `COMMIT`, so applying them again gives the same file.
PATCHES = [
    ("utils.py",
     "        return h.detach()\n",
     "        return hidden.detach()\n",
     1,
     "repackage_hidden returns the undefined name `h` (NameError on the first batch); "
     "return the tensor it just zeroed, `hidden`, detached"),
    ("test.py",
     'torch.load(os.path.join(args.load_dir, "final_ckpt.pt"), map_location=device)',
     'torch.load(os.path.join(args.load_dir, "final_ckpt.pt"), map_location=device, '
     'weights_only=False)',
     1,
     "PyTorch >= 2.6 loads only tensors by default; the checkpoint also pickles the "
     "vocabulary object, so load it with weights_only=False (our own checkpoint)"),
    ("test.py",
     "            num_tm_words=model.num_tm_words,\n",
     "            num_tm_words=num_tm_words,\n",
     1,
     "test.py passes model.num_tm_words, which the LSTM_LM does not have (AttributeError); "
     "pass the num_tm_words it computed two lines earlier (0 for LSTM_LM, "
     "model.num_tm_words otherwise)"),
]

_TORCHTEXT_VOCAB = '''\
"""A minimal stand-in for torchtext.vocab (written for tfktopic's peer cross-check).

torchtext has no build for current PyTorch. revisiting-tglms only builds a
vocabulary from an ordered dict and looks tokens and indices up, so this
implements just that part of torchtext's API: `vocab(ordered_dict, min_freq)`
keeps the tokens in the dict's order whose count is >= min_freq; a `Vocab`
maps a token to its index (the default index for an unknown token, once
`set_default_index` was called) and back.
"""

__all__ = ["Vocab", "vocab"]


class Vocab:
    def __init__(self, tokens):
        self._itos = list(tokens)
        self._stoi = {token: index for index, token in enumerate(self._itos)}
        if len(self._stoi) != len(self._itos):
            raise ValueError("duplicate tokens")
        self._default = None

    def __len__(self):
        return len(self._itos)

    def __contains__(self, token):
        return token in self._stoi

    def __getitem__(self, token):
        index = self._stoi.get(token, self._default)
        if index is None:
            raise RuntimeError(f"token {token!r} not found and the default index is not set")
        return index

    def __call__(self, tokens):
        return self.lookup_indices(tokens)

    def set_default_index(self, index):
        self._default = None if index is None else int(index)

    def get_default_index(self):
        return self._default

    def lookup_indices(self, tokens):
        return [self[token] for token in tokens]

    def lookup_token(self, index):
        return self._itos[int(index)]

    def lookup_tokens(self, indices):
        return [self._itos[int(index)] for index in indices]

    def get_itos(self):
        return list(self._itos)

    def get_stoi(self):
        return dict(self._stoi)


def vocab(ordered_dict, min_freq=1, specials=None, special_first=True):
    tokens = [token for token, count in ordered_dict.items() if count >= min_freq]
    specials = [s for s in (specials or []) if s not in tokens]
    tokens = specials + tokens if special_first else tokens + specials
    return Vocab(tokens)
'''

_WANDB = '''\
"""Stub for wandb (tfktopic's peer cross-check): train.py imports it unconditionally but
uses it only with --writer_type wandb. pip install wandb and delete this folder to log to W&B."""


def __getattr__(name):
    raise ImportError("wandb is stubbed in this scratch copy (use --writer_type tensorboard "
                      "or none, or pip install wandb and delete the wandb/ stub)")
'''

_GENSIM_INIT = '''\
"""Stub for gensim (tfktopic's peer cross-check): utils.py imports gensim.models
unconditionally but needs it only for --pretrained_emb_file (word2vec vectors)."""
'''

_GENSIM_MODELS = '''\
"""Stub: gensim.models.KeyedVectors is needed only for --pretrained_emb_file."""


class KeyedVectors:
    @classmethod
    def load_word2vec_format(cls, *args, **kwargs):
        raise ImportError("gensim is stubbed in this scratch copy: pip install gensim and "
                          "delete the gensim/ stub to use --pretrained_emb_file")
'''

#: Our own modules written into the scratch copy (path -> text).
SHIMS = {
    "torchtext/__init__.py": '"""Minimal torchtext stand-in (only torchtext.vocab)."""\n',
    "torchtext/vocab.py": _TORCHTEXT_VOCAB,
    "wandb/__init__.py": _WANDB,
    "gensim/__init__.py": _GENSIM_INIT,
    "gensim/models.py": _GENSIM_MODELS,
}

#: Our study's medium doc_lstm sizes in their train.py's flags (README.md, "Sizes").
LSTM_FLAGS = ["--model_type", "LSTM_LM", "--embedding_dim", "128", "--hidden_dim", "256",
              "--num_layers", "1", "--batch_size", "64", "--max_seqlen", "30",
              "--lm_optimizer", "adam", "--num_epochs", "40", "--patience", "3",
              "--vocab_min_freq", "10", "--seed", "0"]
TRNN_FLAGS = ["--model_type", "TRNN", "--embedding_dim", "128", "--hidden_dim", "256",
              "--num_layers", "1", "--num_topics", "50", "--hidden_dim_theta", "200",
              "--batch_size", "64", "--max_seqlen", "30", "--lm_optimizer", "adam",
              "--num_epochs", "40", "--patience", "3", "--vocab_min_freq", "10",
              "--vocab_max_tm_freq_pct", "0.001", "--vocab_min_tm_doc_freq", "5",
              "--seed", "0"]


def _write_if_changed(path, data):
    """Write bytes `data` to `path` unless it already holds them; True when written."""
    path = pathlib.Path(path)
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def patch_text(name, text):
    """The file `name` of `COMMIT` with `PATCHES` applied (ValueError if a patch does not fit)."""
    for file, old, new, count, _ in PATCHES:
        if file != name:
            continue
        found = text.count(old)
        if found != count:
            raise ValueError(f"{file}: expected {count} occurrence(s) of {old.strip()!r}, found "
                             f"{found} -- the mirror is not at the commit the patches are for")
        text = text.replace(old, new)
    return text


def make_scratch(scratch, mirror=MIRROR, commit=COMMIT, log=print):
    """Unpack `commit` of `mirror` into `scratch`, patch it and add the shims (idempotent)."""
    scratch = pathlib.Path(scratch)
    repo = pathlib.Path(__file__).resolve().parents[3]
    if scratch.resolve() == repo or repo in scratch.resolve().parents:
        raise SystemExit(f"--scratch {scratch} is inside the repository {repo}: choose a "
                         "directory outside it (their code must not be committed)")
    head = subprocess.run(["git", "-C", mirror, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    if head != commit:
        log(f"note: mirror HEAD is {head}; unpacking the pinned commit {commit}")
    archive = subprocess.run(["git", "-C", mirror, "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    written, patched = [], set()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            data = tar.extractfile(member).read()
            if any(p[0] == member.name for p in PATCHES):
                data = patch_text(member.name, data.decode("utf-8")).encode("utf-8")
                patched.add(member.name)
            if _write_if_changed(scratch / member.name, data):
                written.append(member.name)
    missing = {p[0] for p in PATCHES} - patched
    if missing:
        raise ValueError(f"files to patch not in {commit}: {sorted(missing)}")
    for name, text in SHIMS.items():
        if _write_if_changed(scratch / name, text.encode("utf-8")):
            written.append(name)
    marker = {"repository": "carolinazheng/revisiting-tglms", "commit": commit,
              "patches": [{"file": p[0], "why": p[4]} for p in PATCHES],
              "shims": sorted(SHIMS),
              "digest": hashlib.sha256(json.dumps([PATCHES, SHIMS]).encode()).hexdigest()}
    if _write_if_changed(scratch / MARKER, (json.dumps(marker, indent=1) + "\n").encode()):
        written.append(MARKER)
    log(f"scratch copy {scratch}: commit {commit[:12]}, {len(PATCHES)} patches, "
        f"{len(SHIMS)} shim files; {len(written)} file(s) (re)written")
    return written


def document_line(document):
    """One document in their format: sentences joined by a tab, tokens by a space."""
    for sentence in document:
        if not sentence:
            raise ValueError("an empty sentence would become an empty token in their reader")
        for token in sentence:
            if not token or any(c.isspace() for c in token):
                raise ValueError(f"token {token!r} would be split differently by their reader")
    if not document:
        raise ValueError("an empty document would become an <unk> token in their reader")
    return "\t".join(" ".join(sentence) for sentence in document)


def export_split(data_dir, corpus=CORPUS, split_seed=0, dataset=DATASET, log=print):
    """Write our split as ``data_dir/dataset/{train,valid,test}.txt`` (+ ``split.json``)."""
    from tfktopic import runs

    settings = runs.preset_settings("doc_lstm", "medium")
    data = runs.prepare_data(settings, corpus, format="tdlm", seed=split_seed)
    out = pathlib.Path(data_dir) / dataset
    stats = {"corpus": str(corpus), "split_seed": int(split_seed),
             "how": "tfktopic.runs.prepare_data(preset_settings('doc_lstm', 'medium'), corpus, "
                    "format='tdlm', seed=split_seed)",
             "lm_vocab_ours": len(data.lm_vocab), "parts": {}}
    for split in ("train", "valid", "test"):
        part = data.parts[split]
        text = "".join(document_line(doc) + "\n" for doc in part)
        changed = _write_if_changed(out / f"{split}.txt", text.encode("utf-8"))
        words = sum(len(s) for doc in part for s in doc)
        sentences = sum(len(doc) for doc in part)
        stats["parts"][split] = {
            "documents": len(part), "sentences": sentences, "words": words,
            "targets_ours": words + sentences,  # every word + one <eos> per sentence
            "targets_theirs_data": words + len(part),  # every word + one <eos> per document
            "targets_theirs_scored": sum(                # minus their index k = 30, 60, ...
                n + 1 - (n + 1) // 30 for n in (sum(len(s) for s in doc) for doc in part)),
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        log(f"{out / (split + '.txt')}: {len(part)} documents, {words} words"
            + (" (written)" if changed else " (unchanged)"))
    stats["note"] = ("targets_theirs_scored is for --max_seqlen 30: their evaluation drops the "
                     "target at index k = 30, 60, ... of [<sos>, w_1, ..., w_N, <eos>]")
    _write_if_changed(out / "split.json", (json.dumps(stats, indent=1) + "\n").encode())
    return stats


def train_args(name, data_dir, save_dir, python=PYTHON, dataset=DATASET,
                learning_rate="0.002", dropout="0.3"):
    """The argument list of one peer training run (their ``train.py``, run from the scratch copy).

    Args:
        name: "lstm_lm" (their LSTM_LM) or "trnn" (their TRNN, our TopicRNN's sizes).
        data_dir: the export directory (``DATA/<dataset>/*.txt``).
        save_dir: their ``--save_dir``.
        python: the PyTorch venv's python.
        dataset, learning_rate, dropout: their ``--dataset``, ``--lm_lr`` (and
            ``--tm_lr``), ``--dropout``.

    Returns:
        ``[python, "train.py", flags...]`` (the README's "Runs").
    """
    flags = {"lstm_lm": LSTM_FLAGS, "trnn": TRNN_FLAGS}[name]
    data_path = str(pathlib.Path(data_dir) / dataset)
    common = ["--dataset", dataset, "--data_path", data_path, "--dropout", dropout,
              "--lm_lr", learning_rate]
    extra = (["--tm_lr", learning_rate, "--stopwords_file", STOPWORDS]
             if name == "trnn" else [])
    return [python, "train.py", *common, *flags, *extra, "--save_dir", str(save_dir)]


def run_commands(scratch, data_dir, python=PYTHON, runs_dir=RUNS, dataset=DATASET,
                 learning_rate="0.002", dropout="0.3"):
    """The shell commands of the peer runs (LSTM_LM and TRNN) on the export."""
    data_path = str(pathlib.Path(data_dir) / dataset)
    env = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
    commands = {}
    for name in ("lstm_lm", "trnn"):
        args = train_args(name, data_dir, f"{runs_dir}/{name}", python, dataset,
                          learning_rate, dropout)
        commands[name] = (f"mkdir -p {runs_dir} && cd {shlex.quote(str(scratch))} && "
                          f"{{ {env} nohup nice -n 10 {shlex.join(args)} > {runs_dir}/{name}.log "
                          f"2>&1 & echo $! > {runs_dir}/{name}.pid; }}")
    commands["smoke"] = (
        f"cd {shlex.quote(str(scratch))} && {env} {python} train.py --dataset {dataset} "
        f"--data_path {data_path} --model_type LSTM_LM --num_docs 30 --num_epochs 1 "
        f"--embedding_dim 16 --hidden_dim 16 --batch_size 4 --max_seqlen 30 "
        f"--save_dir {runs_dir}/smoke_lstm_lm && {env} {python} test.py --load_dir "
        f"{runs_dir}/smoke_lstm_lm --dataset {dataset} --data_path {data_path} --num_docs 30")
    repo = pathlib.Path(__file__).resolve().parents[3]
    commands["check_targets"] = (
        f"OMP_NUM_THREADS=1 {python} {repo / 'studies/study/peer/check_targets.py'} --scratch "
        f"{shlex.quote(str(scratch))} --data {data_path} --split test")
    return commands


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", required=True, help="scratch copy of their code (outside "
                                                         "the repository)")
    parser.add_argument("--data", required=True, help="export directory (DATA/apnews/*.txt)")
    parser.add_argument("--mirror", default=MIRROR, help="their git mirror (bare)")
    parser.add_argument("--commit", default=COMMIT, help="the commit to unpack (pinned)")
    parser.add_argument("--corpus", default=CORPUS, help="APNEWS in TDLM format")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--python", default=PYTHON, help="the PyTorch venv's python")
    parser.add_argument("--runs", default=RUNS, help="where the printed commands write")
    parser.add_argument("--learning-rate", default="0.002")
    parser.add_argument("--dropout", default="0.3")
    args = parser.parse_args(argv)
    make_scratch(args.scratch, args.mirror, args.commit)
    export_split(args.data, args.corpus, args.split_seed)
    print("\nrun commands:")
    for name, command in run_commands(args.scratch, args.data, args.python, args.runs,
                                      learning_rate=args.learning_rate,
                                      dropout=args.dropout).items():
        print(f"# {name}\n{command}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
