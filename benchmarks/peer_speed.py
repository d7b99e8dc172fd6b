"""Training speed side by side: Zheng, Vafa & Blei's own PyTorch code against tfktopic (issue 18).

Training tokens/s of **their** ``LSTM_LM`` and ``TRNN`` (``carolinazheng/revisiting-tglms``,
run from the scratch copy that `studies.study.peer.prepare` makes, in the PyTorch venv) against
**our** study's medium ``doc_lstm`` and ``doc_topicrnn`` (built by `tfktopic.runs` exactly as
``python -m studies.study`` trains them on APNEWS), at the same sizes, batch (64 parallel
streams), window (30 tokens), precision (float32) and thread count, in one benchmark run:

* **theirs** -- their ``train.py`` with the README's run command (``--num_epochs 1``) in a
  subprocess; their loop prints ``| epoch 1 | 200/264 batches | ms/batch X |`` (``log_interval
  = 200``: ``X`` is the mean wall time of batches 1..200, measured by their loop with
  ``time.time()``); the line is read from the streamed stdout and the process is terminated;
* **ours** -- ``python -m benchmarks.peer_speed --side ours`` in a subprocess (so that both
  sides start fresh with the same thread environment): `tfktopic.cli.train_settings` of the
  study's command (`studies.study.protocol.command`), `tfktopic.runs.prepare_data`,
  `tfktopic.runs.build_model` (compiled as ``tfktopic train`` compiles), the training stream of
  `tfktopic.runs.fit_model`; timed by `benchmarks.common.time_train_steps` (Keras' compiled
  train function on batches made beforehand, 200 steps after 5 untimed ones), and once more by
  ``model.fit`` over 200 steps (the input pipeline included, as in their loop).

Tokens per step are B x BPTT = 64 x 30 on both sides (the headline ratio); the real
(non-padding) targets of the timed steps are counted too: ours from the batches' ``mask``,
theirs from their batching of the exported training file (each document's last window is
padded with ``<pad>``, ignored by their loss; `peer_real_targets`).

Threads: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` (torch's intra-op pool follows them:
`probe_torch`) and ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS`` set to ``--threads``
before either framework starts; the CPU time of each OS thread of both processes over the timed
part is recorded (``busy_threads``), which checks the setting took effect.

Rounds are interleaved (theirs, ours, theirs, ours, ...); the record holds every round, the
medians and ours / theirs. See README.md beside this file ("Speed").

Usage::

    python -m benchmarks.peer_speed --threads 1 [--rounds 2] [--models lstm,trnn]
    python -m benchmarks.peer_speed --quick        # smoke test, tiny sizes, 1-2 minutes
    # -> benchmarks/results/peer/speed_<threads>t.json (--out)

Importable without torch: torch runs only in the peer venv's subprocess.
"""

import argparse
import glob
import json
import os
import pathlib
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import REPO_ROOT, portable
from studies.study.peer import prepare

#: Their log interval (train.py, ``log_interval = 200``): the timed batches are 1..200.
TIMED_BATCHES = 200
BATCH_SIZE = 64
BPTT = 30
#: The study's configuration that matches their run command (lr 0.002, dropout 0.3).
CONFIG = "lr2e-3_do0.3"
#: model -> (their run name in `prepare.train_args`, our study arm)
MODELS = {"lstm": ("lstm_lm", "doc_lstm"), "trnn": ("trnn", "doc_topicrnn")}
#: --quick (a smoke test of the pipeline, not a measurement): tiny sizes on both sides and
#: batch 4; theirs on the first 100 documents of each split (their vocabulary still comes from
#: the whole training file), so that their epoch still has more than 200 batches (their only
#: in-loop timing line is at batch 200); ours on the whole split (the same vocabularies), 10
#: timed steps.
QUICK_PEER = {"--num_docs": "100", "--batch_size": "4", "--embedding_dim": "16",
              "--hidden_dim": "16", "--hidden_dim_theta": "16", "--num_topics": "5"}
QUICK_OURS = {"batch_size": 4, "steps": 10,
              "set": {"embedding_dim": 16, "hidden_dim": 16, "num_topics": 5,
                      "encoder_units": [16, 16]}}
RESULT_MARK = "PEER_SPEED_OURS "
_PROGRESS = re.compile(r"\|\s*epoch\s+(\d+)\s*\|\s*(\d+)/(\d+) batches\s*\|\s*ms/batch\s+([\d.]+)")


# ------------------------------------------------------------------------- measuring
def thread_cpu(pid="self"):
    """CPU seconds (user + system) of each OS thread of a process, by thread id (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for path in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            fields = open(path).read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[path.split("/")[-2]] = (int(fields[11]) + int(fields[12])) / tick
    return out


def busy_threads(before, after, share=0.05):
    """Threads that did work between two `thread_cpu` snapshots.

    Returns:
        dict: ``cpu_seconds`` of the process in the interval, ``busy_threads`` (threads with at
        least `share` of it) and ``top_thread_seconds`` (the five busiest).
    """
    spent = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)
    total = sum(spent)
    return {"cpu_seconds": round(total, 2),
            "busy_threads": sum(s >= share * total for s in spent) if total > 0 else 0,
            "top_thread_seconds": [round(s, 2) for s in spent[:5]]}


def thread_env(threads):
    """The environment of both sides: every thread-count variable set to `threads`."""
    n = str(int(threads))
    return {**os.environ, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n,
            "TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": n,
            "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def _loadavg():
    return [round(v, 2) for v in os.getloadavg()]


# ----------------------------------------------------------------------------- theirs
def with_flags(args, flags):
    """`args` with each ``--flag value`` of `flags` replaced (or appended when absent)."""
    args = list(args)
    for flag, value in flags.items():
        if flag in args:
            args[args.index(flag) + 1] = str(value)
        else:
            args += [flag, str(value)]
    return args


def peer_command(model, data_dir, save_dir, python=prepare.PYTHON, quick=False):
    """Their ``train.py`` argument list of a model: the README's run command, one epoch."""
    name = MODELS[model][0]
    args = with_flags(prepare.train_args(name, data_dir, save_dir, python), {"--num_epochs": 1})
    if quick:
        flags = {k: v for k, v in QUICK_PEER.items()
                 if name == "trnn" or k not in ("--hidden_dim_theta", "--num_topics")}
        args = with_flags(args, flags)
    return args


def _flag(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def peer_real_targets(train_file, batch_size, bptt, num_docs=None, first=1, last=TIMED_BATCHES):
    """Non-padding targets of their training batches `first`..`last` (and their batch count).

    Mirrors how their ``data.py`` lays out the training file (our own counting code): a
    document ``<sos> w_1 .. w_N <eos>`` (sentence tabs become spaces) is cut into windows of
    `bptt` tokens, its last window padded with ``<pad>``; the windows of all documents are
    concatenated in file order, the last ``len % (B x bptt)`` tokens dropped, and the stream
    is cut into B contiguous columns (``create_lm_batched``); batch i predicts rows
    ``i bptt + 1 .. (i + 1) bptt`` of the columns. A ``<pad>`` target is ignored by their loss.

    Returns:
        (number of batches of their epoch, real targets in batches `first`..`last`).
    """
    import numpy as np

    real = []
    lines = pathlib.Path(train_file).read_text(encoding="utf-8").splitlines()
    for line in lines[:num_docs]:
        n = len(("<sos> " + line.strip() + " <eos>").replace("\t", " ").split(" "))
        windows = -(-n // bptt)
        mask = np.zeros(windows * bptt, bool)
        mask[:n] = True
        real.append(mask)
    flat = np.concatenate(real)
    extra = len(flat) % (batch_size * bptt)
    last_target = flat[-extra]
    flat = flat[:-extra]
    columns = flat.reshape((-1, batch_size), order="F")
    columns = np.vstack([columns, np.append(columns[0][1:], last_target)])
    count = int(columns[first * bptt + 1:(last + 1) * bptt + 1].sum())
    return len(columns) // bptt, count


def run_theirs(model, threads, data_dir, scratch, python, quick=False, nice=0, timeout=3600):
    """Their ``train.py`` until the ``200/N batches`` line; ms/batch, tokens/s, start-up time."""
    save_dir = tempfile.mkdtemp(prefix="peer_speed_")
    args = peer_command(model, pathlib.Path(data_dir).resolve(), save_dir, python, quick)
    command = (["nice", "-n", str(nice)] if nice else []) + args
    load_before = _loadavg()
    start = time.time()
    process = subprocess.Popen(command, cwd=scratch, env=thread_env(threads),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
    lines, buffer, info = [], b"", {}
    cpu0 = t0 = None
    try:
        while "ms_per_batch" not in info:
            if time.time() - start > timeout:
                raise RuntimeError(f"their {model}: no batch-{TIMED_BATCHES} line after "
                                   f"{timeout} s")
            ready, _, _ = select.select([process.stdout], [], [], 5.0)
            if not ready:
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                tail = "\n".join(lines[-15:])
                raise RuntimeError(f"their {model} ended (exit {process.wait()}) before batch "
                                   f"{TIMED_BATCHES}:\n{tail}")
            buffer += chunk
            *complete, buffer = re.split(rb"[\r\n]", buffer)
            for raw in complete:
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                lines.append(line)
                match = _PROGRESS.search(line)
                if match and int(match.group(2)) == 0:
                    t0, cpu0 = time.time(), thread_cpu(process.pid)
                elif match and int(match.group(2)) == TIMED_BATCHES:
                    cpu1 = thread_cpu(process.pid)
                    info.update(ms_per_batch=float(match.group(4)),
                                batches_per_epoch=int(match.group(3)),
                                seconds_batch0_to_200_by_us=round(time.time() - t0, 2),
                                startup_seconds=round(t0 - start, 2),
                                threads=busy_threads(cpu0, cpu1), progress_line=line)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdout.close()
        shutil.rmtree(save_dir, ignore_errors=True)
    batch, bptt = int(_flag(args, "--batch_size")), int(_flag(args, "--max_seqlen"))
    num_docs = _flag(args, "--num_docs")
    batches, real = peer_real_targets(pathlib.Path(_flag(args, "--data_path")) / "train.txt",
                                      batch, bptt, None if num_docs is None else int(num_docs))
    if batches != info["batches_per_epoch"]:
        raise RuntimeError(f"their {model}: {info['batches_per_epoch']} batches per epoch, but "
                           f"peer_real_targets lays out {batches}: the counting is wrong")
    seconds = info["ms_per_batch"] / 1000.0
    header = [line for line in lines if line.startswith(("Created", "Training", "(inc emb)",
                                                         "(non emb)", "Finished creating"))]
    return {"side": "theirs", "model": model, "ms_per_step": info["ms_per_batch"],
            "tokens_per_s": batch * bptt / seconds,
            "real_targets_per_step": real / TIMED_BATCHES,
            "real_targets_per_s": real / TIMED_BATCHES / seconds,
            "timed_steps": TIMED_BATCHES, "batch_size": batch, "bptt": bptt,
            "startup_seconds": info["startup_seconds"],
            "seconds_batch0_to_200_by_us": info["seconds_batch0_to_200_by_us"],
            "threads": info["threads"], "progress_line": info["progress_line"],
            "log_header": header, "load_before": load_before, "load_after": _loadavg(),
            "command": command, "cwd": str(pathlib.Path(scratch).resolve())}


def probe_torch(python, threads):
    """torch's version and thread pools under `thread_env(threads)` (in the peer venv)."""
    code = ("import json, numpy, torch; print(json.dumps({'torch': torch.__version__, "
            "'numpy': numpy.__version__, 'intra_op_threads': torch.get_num_threads(), "
            "'inter_op_threads': torch.get_num_interop_threads(), "
            "'parallel_backend': torch.__config__.parallel_info().splitlines()[-1].strip()}))")
    out = subprocess.run([python, "-c", code], env=thread_env(threads), capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------- ours
def our_argv(model, out, quick=False):
    """``tfktopic train`` arguments of our arm: the study's command (`studies.study.protocol.command`)."""
    from studies.study import protocol as study

    argv = study.command("apnews", MODELS[model][1], CONFIG, 0, out)[3:]  # after "-m tfktopic"
    if quick:
        argv += ["--batch-size", str(QUICK_OURS["batch_size"])]
        for key, value in QUICK_OURS["set"].items():
            if model == "trnn" or key not in ("num_topics", "encoder_units"):
                argv += ["--set", f"{key}={json.dumps(value)}"]
    return argv


def measure_ours(model, steps, warmup=3, quick=False):
    """Our side, in this process (``--side ours``): seconds per training step of the arm.

    Returns:
        A JSON-ready dict (printed by `main` after `RESULT_MARK`).
    """
    import itertools

    import keras
    import numpy as np
    import tensorflow as tf

    from benchmarks.common import time_train_steps
    from tfktopic import runs
    from tfktopic.cli import train_settings

    stamps = {"process_start": float(os.environ.get("PEER_SPEED_LAUNCH", time.time()))}
    # --out is parsed but never written (nothing here writes a run directory)
    argv = our_argv(model, pathlib.Path(tempfile.gettempdir()) / "peer_speed_unused", quick)
    args, settings = train_settings(argv)
    data = runs.prepare_data(settings, args.corpus, args.format, args.max_documents,
                             args.split_seed)
    stamps["data_ready"] = time.time()
    batch = int(settings["training"]["batch_size"])
    model_obj = runs.build_model(settings, data, int(args.seed))
    dataset = data.dataset("train", batch, seed=int(args.seed))  # fit_model's training stream
    # The batches time_train_steps times: the first `steps` of a fresh iterator of the stream.
    timed = list(itertools.islice(iter(dataset), steps))
    real = float(sum(float(np.sum(b["mask"])) for b in timed))
    bptt = int(timed[0]["tokens"].shape[1])
    stamps["model_built"] = time.time()
    # time_train_steps warms up through `fit` (the tf.data path); its timed loop calls the
    # train function on single batches, whose first call traces the step
    # again -- measured 0.6 s on the quick model --, so one untimed call first (as
    # benchmarks/sgmcmc.py does), then the timed call.
    time_train_steps(model_obj, dataset, 1, warmup=warmup)
    stamps["traced"] = time.time()
    seconds = time_train_steps(model_obj, dataset, steps, warmup=1)
    stamps["compiled_steps_timed"] = time.time()
    cpu0, start = thread_cpu(), time.perf_counter()
    model_obj.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
    fit_seconds = (time.perf_counter() - start) / steps
    threads = busy_threads(cpu0, thread_cpu())
    tokens = batch * bptt
    return {"side": "ours", "model": model, "arm": MODELS[model][1],
            "ms_per_step": 1000.0 * seconds, "tokens_per_s": tokens / seconds,
            "real_targets_per_step": real / steps, "real_targets_per_s": real / steps / seconds,
            "fit_ms_per_step": 1000.0 * fit_seconds, "fit_tokens_per_s": tokens / fit_seconds,
            "timed_steps": steps, "untimed_steps_before": warmup + 2, "batch_size": batch,
            "bptt": bptt,
            # process start to the end of the untimed steps (TF import, data, model, tracing
            # of the step); theirs: to the end of their untimed batch 0
            "startup_seconds": round(stamps["traced"] - stamps["process_start"], 2),
            "stamps": {k: round(v - stamps["process_start"], 2) for k, v in stamps.items()},
            "threads_during_fit": threads,
            "parameters": int(model_obj.count_params()),  # with the carried LSTM states
            "trainable_parameters": int(sum(np.prod(v.shape)
                                            for v in model_obj.trainable_variables)),
            "precision": settings["training"].get("precision", "float32"),
            "global_policy": keras.config.dtype_policy().name,
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__,
                         "numpy": np.__version__, "python": platform.python_version()},
            "tf_threading_api": {"intra": tf.config.threading.get_intra_op_parallelism_threads(),
                                 "inter": tf.config.threading.get_inter_op_parallelism_threads()},
            "argv": ["tfktopic", *argv]}


def run_ours(model, threads, steps, quick=False, nice=0, timeout=3600):
    """`measure_ours` in a fresh subprocess with `thread_env(threads)`."""
    command = ([sys.executable, "-m", "benchmarks.peer_speed", "--side", "ours", "--models",
                model, "--steps", str(steps)] + (["--quick"] if quick else []))
    command = (["nice", "-n", str(nice)] if nice else []) + command
    env = {**thread_env(threads), "PYTHONPATH": str(REPO_ROOT),
           "PEER_SPEED_LAUNCH": repr(time.time())}
    load_before = _loadavg()
    done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)
    found = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or not found:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        raise RuntimeError(f"our {model} failed (exit {done.returncode}):\n{tail}")
    result = json.loads(found[-1][len(RESULT_MARK):])
    result.update(load_before=load_before, load_after=_loadavg(), command=command)
    return result


# ------------------------------------------------------------------------------- main
def cpu_info():
    """``lscpu``'s model name and the vector / matrix instruction sets among its flags."""
    info = {"cpu": platform.processor(), "simd_flags": []}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "Model name":
            info["cpu"] = value.strip()
        elif key == "Flags":
            info["simd_flags"] = sorted(f for f in value.split()
                                        if f.startswith(("avx", "amx", "fma")))
    return info


def summarize(rounds, models):
    """Medians over the rounds of each side and the ratios ours / theirs."""
    summary = {}
    for model in models:
        sides = {side: [r[model][side] for r in rounds] for side in ("theirs", "ours")}
        med = {side: {key: statistics.median(x[key] for x in runs_)
                      for key in ("tokens_per_s", "real_targets_per_s", "ms_per_step")}
               for side, runs_ in sides.items()}
        med["ours"]["fit_tokens_per_s"] = statistics.median(
            x["fit_tokens_per_s"] for x in sides["ours"])
        summary[model] = {
            "median": med,
            "ratio_ours_to_theirs_tokens_per_s": (med["ours"]["tokens_per_s"]
                                                  / med["theirs"]["tokens_per_s"]),
            "ratio_ours_to_theirs_real_targets_per_s": (med["ours"]["real_targets_per_s"]
                                                        / med["theirs"]["real_targets_per_s"]),
            "ratio_ours_fit_to_theirs_tokens_per_s": (med["ours"]["fit_tokens_per_s"]
                                                      / med["theirs"]["tokens_per_s"]),
            "ratio_per_round": [r[model]["ours"]["tokens_per_s"]
                                / r[model]["theirs"]["tokens_per_s"] for r in rounds]}
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="threads of both sides (1, 2)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--models", default="lstm,trnn", help="comma-separated: lstm, trnn")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny sizes, batch 4, their first 100 documents, our "
                             "10 steps")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"our timed steps (default {TIMED_BATCHES}, --quick "
                             f"{QUICK_OURS['steps']}); theirs are always batches 1..200")
    parser.add_argument("--scratch", default=str(prepare.OUTSIDE / "peer-scratch"))
    parser.add_argument("--data", default=str(prepare.OUTSIDE / "peer-data"),
                        help="the export directory (DATA/apnews/*.txt)")
    parser.add_argument("--python", default=prepare.PYTHON, help="the PyTorch venv's python")
    parser.add_argument("--nice", type=int, default=0, help="nice level of both sides")
    parser.add_argument("--note", default="", help="recorded as is (e.g. the machine's load)")
    parser.add_argument("--out", default=None,
                        help="JSON file (default benchmarks/results/peer/speed_<threads>t.json; "
                             "--quick: speed_<threads>t_quick.json)")
    parser.add_argument("--side", choices=["ours"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from {', '.join(MODELS)}")
    steps = args.steps or (QUICK_OURS["steps"] if args.quick else TIMED_BATCHES)
    if args.side == "ours":
        print(RESULT_MARK + json.dumps(measure_ours(models[0], steps, quick=args.quick)),
              flush=True)
        return 0
    for path in (args.scratch, pathlib.Path(args.data) / prepare.DATASET, args.python):
        if not pathlib.Path(path).exists():
            parser.error(f"{path} not found: run `python -m studies.study.peer.prepare` and make "
                         "the venv (studies/study/peer/README.md)")
    out = pathlib.Path(args.out or REPO_ROOT / "benchmarks" / "results" / "peer" / (
        f"speed_{args.threads}t" + ("_quick" if args.quick else "") + ".json"))
    record = {"benchmark": "peer_speed", "about": __doc__.split("\n\n")[0],
              "note": args.note, "quick": args.quick, "threads": args.threads,
              "precision": "float32", "machine": {
                  **cpu_info(), "cpus": os.cpu_count(), "host": platform.node(),
                  "load_before": _loadavg()},
              "torch": probe_torch(args.python, args.threads), "rounds": []}
    for r in range(args.rounds):
        row = {}
        for model in models:
            theirs = run_theirs(model, args.threads, args.data, args.scratch, args.python,
                                args.quick, args.nice)
            print(f"[peer speed] round {r + 1} {model} theirs: {theirs['tokens_per_s']:.0f} "
                  f"tokens/s ({theirs['ms_per_step']:.1f} ms/step)", file=sys.stderr)
            ours = run_ours(model, args.threads, steps, args.quick, args.nice)
            print(f"[peer speed] round {r + 1} {model} ours:   {ours['tokens_per_s']:.0f} "
                  f"tokens/s ({ours['ms_per_step']:.1f} ms/step; fit "
                  f"{ours['fit_tokens_per_s']:.0f})", file=sys.stderr)
            row[model] = {"theirs": theirs, "ours": ours}
        record["rounds"].append(row)
    record["machine"]["load_after"] = _loadavg()
    first = record["rounds"][0][models[0]]["ours"]
    record["versions"] = {**first["versions"], "torch": record["torch"]["torch"]}
    record["summary"] = summarize(record["rounds"], models)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(portable(record), indent=1) + "\n")
    for model, item in record["summary"].items():
        print(f"[peer speed] {model}: ours / theirs = "
              f"{item['ratio_ours_to_theirs_tokens_per_s']:.3f} (tokens/s, medians of "
              f"{args.rounds}); real targets {item['ratio_ours_to_theirs_real_targets_per_s']:.3f}"
              f"; ours with fit {item['ratio_ours_fit_to_theirs_tokens_per_s']:.3f}",
              file=sys.stderr)
    print(f"[peer speed] written {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
