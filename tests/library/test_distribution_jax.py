"""`--strategy data_parallel` on JAX: `keras.distribution.DataParallel` over 2 devices and
over 2 processes gives the single-device first updates; each process reads its own shards.

Every case runs in fresh ``KERAS_BACKEND=jax`` subprocesses whose CPU platform has 2 devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``; fixed when JAX starts), so the
module runs the same under the TensorFlow and the JAX suite.
"""

import json
import os
import pathlib
import pickle
import socket
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from tests.backends import REPO_ROOT, _RUNNER, backend_available, in_the_jax_job, run_in_backend

pytestmark = [pytest.mark.backends, in_the_jax_job()]

TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
#: float32: the 2-device step sums the batch in two partial sums (measured: at most
#: 2e-7 apart on the weights after 2 Adam steps, 1.5e-7 relative on the losses).
ATOL, RTOL = 2e-5, 1e-5


def _assert_same_updates(one, other):
    np.testing.assert_allclose(other["loss"], one["loss"], rtol=RTOL)
    assert len(other["weights"]) == len(one["weights"])
    for path, value, theirs in zip(one["paths"], one["weights"], other["weights"]):
        np.testing.assert_allclose(theirs, value, rtol=RTOL, atol=ATOL, err_msg=str(path))


def _assert_moved(result, family):
    """The compared weights did change (an equivalence of untrained weights proves nothing)."""
    assert np.all(np.isfinite(result["loss"])) and result["loss"][0] != result["loss"][1], family


@pytest.fixture(scope="module")
def updates():
    return run_in_backend("jax", "tests.distribution_jax_cases:first_updates",
                          env=TWO_DEVICES, families=["lstm", "topicrnn", "rgbn_rnn"])


@pytest.mark.parametrize("family", ["lstm", "topicrnn"])
def test_two_devices_give_the_single_device_first_updates(updates, family):
    one, two = updates[family][1], updates[family][2]
    assert one["devices"] == 1 and two["devices"] == 2  # really replicated over 2 devices
    _assert_moved(one, family)
    _assert_same_updates(one, two)


def test_two_devices_give_the_single_device_tlasgr_phi_pi_update(updates):
    one, two = updates["rgbn_rnn"][1], updates["rgbn_rnn"][2]
    assert two["devices"] == 2
    _assert_moved(one, "rgbn_rnn")
    paths = [str(p) for p in one["paths"]]
    assert any(p.endswith("/phi_1") for p in paths), paths  # Phi/Pi are among the compared
    _assert_same_updates(one, two)
    # the TLASGR update ran on every step (its counter, its preconditioner left zero)
    for result in (one, two):
        named = dict(zip(paths, result["weights"]))
        assert [int(v) for p, v in named.items() if p.endswith("/iterations")] == [2]
        assert np.any(named[next(p for p in paths if p.endswith("/phi_preconditioner_1"))] > 0)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_processes(target, count=2, timeout=240, **kwargs):
    """`target` in `count` JAX processes joined on loopback (one CPU device each)."""
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        args = pathlib.Path(tmp, "args.pkl")
        args.write_bytes(pickle.dumps((target, kwargs)))
        running = []
        for index in range(count):
            env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": "",
                   "KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(
                       [f"127.0.0.1:{port}"] * count),
                   "KERAS_DISTRIBUTION_NUM_PROCESSES": str(count),
                   "KERAS_DISTRIBUTION_PROCESS_ID": str(index),
                   "PYTHONPATH": os.pathsep.join([str(REPO_ROOT),
                                                  os.environ.get("PYTHONPATH", "")])}
            out = pathlib.Path(tmp, f"out{index}.pkl")
            running.append((out, subprocess.Popen(
                [sys.executable, "-c", _RUNNER, str(args), str(out)], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)))
        results = []
        try:
            for out, process in running:
                _, err = process.communicate(timeout=timeout)
                assert process.returncode == 0, err[-4000:]
                results.append(pickle.loads(out.read_bytes()))
        finally:
            for _, process in running:
                if process.poll() is None:
                    process.kill()
        return results


@pytest.mark.parametrize("family", ["lstm", "rgbn_rnn"])
def test_two_processes_on_loopback_give_the_single_device_first_updates(updates, family):
    results = _run_processes("tests.distribution_jax_cases:process_first_updates",
                             family=family)
    assert [r["process"] for r in results] == [0, 1]
    assert all(r["processes"] == 2 and r["mesh_devices"] == 2 for r in results)
    for result in results:
        _assert_same_updates(updates[family][1], result)


def test_two_processes_read_disjoint_shards_whose_union_is_the_epoch(tmp_path):
    from tests.conftest import shared_file
    from tfktopic.data import read_tdlm
    from tfktopic.data.shards import ShardReader, prepare_directory

    documents = read_tdlm(shared_file("apnews/toy-train.txt"))
    documents = documents.subset(range(min(len(documents), 150)))
    prepare_directory(lambda: iter(documents.documents), tmp_path, kinds=("sentences",),
                      shard_size=500, min_count=2, stopwords="gensim",
                      max_freq_fraction=0.001, min_doc_freq=1)
    epoch = [[int(r["document_index"]), int(r.get("sentence_index", -1)),
              *[int(t) for t in r["tokens"]]]
             for r in ShardReader(tmp_path, "sentences", shuffle=False)]
    first, second = _run_processes("tests.distribution_jax_cases:shard_keys",
                                   directory=str(tmp_path))
    assert [int(i) for i in first["layout"]] == [0, 2]
    assert [int(i) for i in second["layout"]] == [1, 2]
    a = {tuple(int(i) for i in k) for k in first["keys"]}
    b = {tuple(int(i) for i in k) for k in second["keys"]}
    assert a and b and not a & b
    assert sorted(a | b) == sorted(tuple(k) for k in epoch)
    assert len(first["keys"]) + len(second["keys"]) == len(epoch)


def test_cli_data_parallel_trains_a_tiny_run_on_two_jax_devices(tmp_path):
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    out = tmp_path / "run"
    env = {**os.environ, **TWO_DEVICES, "KERAS_BACKEND": "jax",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "tfktopic", "train", "lstm", "--corpus", "lee",
         "--max-documents", "40", "--epochs", "1", "--verbose", "0", "--batch-size", "32",
         "--set", "hidden_dim=16", "--set", "embedding_dim=16", "--strategy",
         "data_parallel", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads((out / "run.json").read_text())
    assert run["training"]["strategy"] == "data_parallel"
    results = json.loads((out / "results.json").read_text())
    assert np.isfinite(results["test"]["perplexity"]) and results["test"]["num_tokens"] > 0


def test_several_processes_without_their_addresses_is_a_one_line_error():
    with pytest.raises(AssertionError) as failure:
        run_in_backend("jax", "tfktopic.distribute:jax_data_parallel",
                       env={"KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
                            "KERAS_DISTRIBUTION_JOB_ADDRESSES": "",
                            "KERAS_DISTRIBUTION_PROCESS_ID": ""})
    assert ("ValueError: --strategy data_parallel with 2 processes: set "
            "KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_PROCESS_ID too") in str(
                failure.value)


def test_cli_batch_size_that_the_devices_do_not_divide_is_a_one_line_error(tmp_path):
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    env = {**os.environ, **TWO_DEVICES, "KERAS_BACKEND": "jax",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "tfktopic", "train", "lstm", "--corpus", "lee",
         "--max-documents", "40", "--batch-size", "7", "--strategy", "data_parallel",
         "--out", str(tmp_path / "run")],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert ("--batch-size 7 does not split over the 2 devices of --strategy data_parallel; "
            "use a multiple of 2") in done.stderr
    assert not (tmp_path / "run").exists()


# ------------------------------------------------ train --prepared over devices and processes
@pytest.fixture(scope="module")
def small_prepared(tmp_path_factory):
    """The first 110 Lee documents (975 / 153 / 113 windows: odd totals; streams too) prepared
    with 300-example training shards (several shards of unequal total per process; one validation
    and one test shard)."""
    from tfktopic.data import load_corpus
    from tfktopic.data.shards import prepare_corpus

    root = tmp_path_factory.mktemp("prepared")
    path = root / "lee.txt"
    with open(path, "w", encoding="utf-8") as handle:
        for document in list(load_corpus("lee"))[:110]:
            handle.write("\t".join(" ".join(s) for s in document) + "\n")
    prepare_corpus(path, "tdlm", root / "lee", kinds=("sentences", "streams"), min_count=3,
                   shard_size=300)
    return root / "lee"


def _manifest_rows(directory, split):
    manifest = json.loads((directory / split / "manifest.json").read_text())
    return [(s["file"], int(s["count"])) for s in manifest["kinds"]["sentences"]["shards"]]


def _odd_remainder_batch(directory):
    """An even batch size whose last batch of every split has an odd number of rows."""
    totals = [sum(c for _, c in _manifest_rows(directory, p)) for p in ("train", "valid", "test")]
    for size in range(16, 80, 2):
        if all((t % size) % 2 == 1 for t in totals):
            return size
    pytest.skip(f"no batch size gives odd last batches for {totals}")


def test_prepared_partial_last_batches_train_and_evaluate_on_two_devices_as_on_one(
        small_prepared, tmp_path):
    batch = _odd_remainder_batch(small_prepared)
    result = run_in_backend("jax", "tests.distribution_jax_cases:prepared_run", env=TWO_DEVICES,
                            directory=str(small_prepared), out=str(tmp_path),
                            strategies=["none", "data_parallel"], batch_size=batch)
    one, two = result["runs"]["none"], result["runs"]["data_parallel"]
    # one process: every reader reads every shard file
    assert all(count == 1 for _, _, count, _ in two["read"])
    assert one["steps"] == two["steps"]
    assert two["test_tokens"] == one["test_tokens"] > 0
    # float32, the batch summed in two partial sums: measured 3e-8 relative on the test
    # perplexity, 1e-6 on val_ppl and 6e-8 at most on the weights after one epoch (in-memory
    # Lee, 41 documents, the same rule)
    np.testing.assert_allclose(two["test_ppl"], one["test_ppl"], rtol=1e-5)
    np.testing.assert_allclose(two["history"][0]["val_ppl"], one["history"][0]["val_ppl"],
                               rtol=1e-5)
    np.testing.assert_allclose(two["history"][0]["loss"], one["history"][0]["loss"], rtol=1e-5)
    for theirs, ours in zip(two["weights"], one["weights"]):
        np.testing.assert_allclose(theirs, ours, rtol=RTOL, atol=ATOL)


def test_two_processes_train_prepared_reading_disjoint_shard_files_in_equal_steps(
        small_prepared, tmp_path):
    batch = 32
    first, second = _run_processes("tests.distribution_jax_cases:prepared_run", timeout=400,
                                   directory=str(small_prepared), batch_size=batch,
                                   out=str(tmp_path / "p"))
    assert [first["process"], second["process"]] == [0, 1]
    runs = [r["runs"]["data_parallel"] for r in (first, second)]
    for run in runs:  # (split, worker, workers, files) of every reader the run made
        run["read"] = [(str(d), int(w), int(n), tuple(str(x) for x in f))
                       for d, w, n, f in run["read"]]
    for split in ("train", "valid"):
        files = [f for f, _ in _manifest_rows(small_prepared, split)]
        read = [[(w, n, f) for d, w, n, f in run["read"] if d == split] for run in runs]
        assert {r[:2] for r in read[0]} == {(0, 2)} and {r[:2] for r in read[1]} == {(1, 2)}
        mine = [set(r[0][2]) for r in read]
        assert not mine[0] & mine[1] and sorted(mine[0] | mine[1]) == sorted(files)
    # the test split is scored whole by every process
    test_files = sorted(f for f, _ in _manifest_rows(small_prepared, "test"))
    for run in runs:
        assert [sorted(f) for d, _, n, f in run["read"] if d == "test"] == [test_files]
    # the same steps on both: the most either process's files fill with batch / 2 rows
    rows = [sum(c for _, c in _manifest_rows(small_prepared, "train")[w::2]) for w in (0, 1)]
    assert rows[0] != rows[1]  # unequal shares: the shorter one feeds mask-zero rows
    valid = [sum(c for _, c in _manifest_rows(small_prepared, "valid")[w::2]) for w in (0, 1)]
    steps = [{k: [int(v) for v in run["steps"][k]] for k in ("train", "valid")} for run in runs]
    assert steps[0] == steps[1] == {"train": [max(-(-r // (batch // 2)) for r in rows)],
                                    "valid": [max(-(-r // (batch // 2)) for r in valid)]}
    # one SPMD program: the same weights and the same test score on both processes
    for theirs, ours in zip(runs[1]["weights"], runs[0]["weights"]):
        np.testing.assert_array_equal(theirs, ours)
    assert runs[0]["test_ppl"] == runs[1]["test_ppl"] and np.isfinite(runs[0]["test_ppl"])
    for key in ("loss", "val_ppl"):
        assert ([float(h[key]) for h in runs[0]["history"]]
                == [float(h[key]) for h in runs[1]["history"]]), key


def _assert_same_epoch(run, reference):
    """The same training steps, test and validation perplexity and weights after an epoch
    (float32, the batch summed in two partial sums: measured 3e-8 relative on the test
    perplexity, 1e-6 on val_ppl, 6e-8 at most on the weights)."""
    assert [int(v) for v in run["steps"]["train"]] == [int(v) for v in
                                                       reference["steps"]["train"]]
    np.testing.assert_allclose(run["test_ppl"], reference["test_ppl"], rtol=1e-5)
    np.testing.assert_allclose(run["history"][0]["val_ppl"], reference["history"][0]["val_ppl"],
                               rtol=1e-5)
    for theirs, ours in zip(run["weights"], reference["weights"]):
        np.testing.assert_allclose(theirs, ours, rtol=RTOL, atol=ATOL)


#: Tiny sizes of the chunk model (rGBN-RNN) and the stream model (the document LSTM).
READ_WHOLE = {"rgbn_rnn": ("hidden_sizes=[16, 8]", "topic_sizes=[8, 4]", "embedding_dim=16"),
              "doc_lstm": ("hidden_dim=16", "embedding_dim=16")}


@pytest.mark.parametrize("model", sorted(READ_WHOLE))
def test_two_processes_train_a_prepared_chunk_or_stream_model_as_two_devices_of_one_host(
        small_prepared, tmp_path, model):
    """Chunks (rGBN-RNN) and document streams (doc_lstm) are read whole by every process,
    which feeds its cut of every global batch: one epoch on 2 processes equals one on the 2
    devices of one process (the same SPMD program; 2 devices equal 1 device in the first
    updates, above; over a whole rGBN-RNN epoch the sampled counts amplify the float
    rounding of two partial sums: 1.4e-4 relative on the test perplexity, measured)."""
    settings = dict(directory=str(small_prepared), model=model, overrides=READ_WHOLE[model],
                    batch_size=16)
    two = run_in_backend("jax", "tests.distribution_jax_cases:prepared_run", env=TWO_DEVICES,
                         out=str(tmp_path / "two"), strategies=["data_parallel"], **settings)
    two = two["runs"]["data_parallel"]
    first, second = _run_processes("tests.distribution_jax_cases:prepared_run", timeout=600,
                                   out=str(tmp_path / "p"), **settings)
    for result in (first, second):
        run = result["runs"]["data_parallel"]
        assert run["read"] and all(count == 1 for _, _, count, _ in run["read"])  # read whole
        _assert_same_epoch(run, two)


def test_two_processes_train_in_memory_data_with_a_partial_batch_as_one_device(tmp_path):
    """In-memory data (numpy batches) in a 2-process job: each process feeds its half of every
    global batch (Keras refused a PyDataset there before); 41 Lee documents give 377 training
    windows, a last batch of 25 rows at batch size 32."""
    one = run_in_backend("jax", "tests.distribution_jax_cases:prepared_run", directory=None,
                         out=str(tmp_path / "one"), strategies=["none"], max_documents=41)
    first, second = _run_processes("tests.distribution_jax_cases:prepared_run",
                                   directory=None, out=str(tmp_path / "p"), max_documents=41)
    one = one["runs"]["none"]
    for result in (first, second):
        run = result["runs"]["data_parallel"]
        _assert_same_epoch(run, one)
