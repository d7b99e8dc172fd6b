"""Scaling efficiency of `keras.distribution` data parallelism over the devices of one host.

JAX on this CPU, one process per setting (the device count is fixed when JAX starts): the
package's LSTM LM (`tfktopic.models.LSTMLanguageModel`) trained with ``model.fit`` on random
windows of a fixed GLOBAL batch, under ``keras.distribution.DataParallel`` over N forced host
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``, each device one thread:
``--xla_cpu_multi_thread_eigen=false``). Efficiency = tokens/s on N devices ÷ (N × tokens/s
on 1 device). Timed epochs alternate between the settings' processes (lock-step, as in
`benchmarks.backend_lockstep`), so a drifting machine load cancels in the ratio.

    python -m benchmarks.data_parallel_scaling --devices 1 2 --rounds 6 --out R.json
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np


def _child(devices, batch, hidden, vocab, batches):
    import keras

    from tfktopic.distribute import jax_data_parallel
    from tfktopic.models import LSTMLanguageModel

    distribution = jax_data_parallel()
    assert len(keras.distribution.list_devices()) == devices, keras.distribution.list_devices()
    rng = np.random.default_rng(0)
    ids = rng.integers(4, vocab, size=(batches * batch, 31)).astype(np.int32)
    data = {"tokens": ids[:, :-1], "targets": ids[:, 1:],
            "mask": np.ones((len(ids), 30), np.float32)}
    with distribution.scope():
        keras.utils.set_random_seed(0)
        model = LSTMLanguageModel(vocab, embedding_dim=hidden, hidden_dim=hidden)
        model.compile(optimizer="adam")
    fit = dict(x=data, batch_size=batch, epochs=1, verbose=0, shuffle=False)
    model.fit(**fit)  # compile
    print("ready", flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        model.fit(**fit)
        print(json.dumps(batches * batch * 30 / (time.perf_counter() - start)), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=64, help="global batch (windows of 30)")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=8, help="batches per timed epoch")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.batch, args.hidden, args.vocab, args.batches)
    root = pathlib.Path(__file__).resolve().parents[1]
    children = {}
    for n in args.devices:
        env = dict(os.environ, KERAS_BACKEND="jax", XLA_FLAGS=(
            f"--xla_force_host_platform_device_count={n} --xla_cpu_multi_thread_eigen=false"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        children[n] = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.data_parallel_scaling", "--child", str(n),
             "--batch", str(args.batch), "--hidden", str(args.hidden), "--vocab",
             str(args.vocab), "--batches", str(args.batches)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=root)
        if children[n].stdout.readline().strip() != "ready":
            raise SystemExit(f"the {n}-device process did not start")
    rounds = []
    for r in range(int(args.rounds)):
        order = args.devices[r % len(args.devices):] + args.devices[:r % len(args.devices)]
        value = {}
        for n in order:
            children[n].stdin.write("go\n")
            children[n].stdin.flush()
            value[n] = json.loads(children[n].stdout.readline())
        rounds.append(value)
        print(r, {n: round(v) for n, v in value.items()}, flush=True)
    for child in children.values():
        child.stdin.close()
        child.wait()
    base = args.devices[0]
    result = {"devices": args.devices, "global_batch": args.batch, "hidden": args.hidden,
              "vocab": args.vocab, "cpu_count": os.cpu_count(), "per_round": rounds,
              "tokens_per_s": {n: float(np.median([v[n] for v in rounds])) for n in args.devices},
              "efficiency": {n: float(np.median([v[n] / (n / base * v[base]) for v in rounds]))
                             for n in args.devices}}
    print(json.dumps({"tokens_per_s": result["tokens_per_s"], "efficiency": result["efficiency"]}))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
