"""Distributed training (`tfktopic.distribute`): MirroredStrategy and MultiWorkerMirroredStrategy.

Logical devices must be configured before TensorFlow starts and a multi-worker
cluster needs one process per worker, so the strategy runs happen in
subprocesses. They are started together by one module fixture (they run in
parallel; TF start-up and tracing dominate) and each test reads its own result:

1. every model family trained a few steps on 2 logical CPUs under
   `MirroredStrategy` follows the same loss trajectory and ends with the same
   weights as on 1 device (same initial weights, same global batches);
2. rGBN-RNN / GBN-RNN: Phi and Pi after the TLASGR-MCMC steps are identical on
   both replicas, on the simplex and equal to the single-device run;
3. two worker processes on loopback ports (`TF_CONFIG`) train through
   `model.fit` on the Lee corpus and end with identical weights (equal to one
   device for the LSTM LM).

Making the comparison deterministic: dropout is 0 and the topic encoders use
theta at its mean while training, through their existing ``sample`` argument
(`theta_at_mean` below passes ``sample=False``). Their reparameterisation noise
is drawn per replica (a [B/2, K] draw on each of 2 replicas is not the [B, K]
draw of one device), so with sampling on the trajectories cannot match; those
runs are checked separately for finite losses and replicas that stay identical.
The TLASGR-MCMC draws are keyed on the documents' global positions
(`tfktopic.bayes.tlasgr`), so they need no such treatment.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_ROOT
from tfktopic import distribute
from tfktopic.distribute import (STRATEGIES, distribute_dataset, get_strategy, replica_mean,
                                 replica_share, replica_sum, split_cpu)

TIMEOUT = 300  # seconds per subprocess; a loaded 2-core machine needs ~1-2 min

# ----------------------------------------------------------------------------
# Subprocess scripts
# ----------------------------------------------------------------------------
_MIRRORED_SCRIPT = textwrap.dedent("""
    import functools, json, sys
    import numpy as np
    from tfktopic.distribute import split_cpu, get_strategy
    devices = split_cpu(2)
    import keras
    import tensorflow as tf
    from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
    from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel
    from tfktopic.models.topicrnn.model import TopicRNN
    from tfktopic.models.tcnlm.model import TCNLM
    from tfktopic.models.rgbn import RGBNRNN

    V, VC, T, J, B, STEPS = 40, 15, 6, 3, 8, 3
    rng = np.random.default_rng(0)
    LM_TO_TOPIC = np.full(V, -1, np.int32)
    LM_TO_TOPIC[V - VC:] = np.arange(VC)
    LDA = {"topic_word": rng.gamma(1.0, 1.0, size=(4, VC)), "alpha": np.full(4, 0.25)}

    def dataset(doc):
        # STEPS global batches of B windows ([B, T]) or document chunks ([B, J, T])
        # with random lengths: the two replicas hold different numbers of tokens.
        shape = (STEPS * B, J, T) if doc else (STEPS * B, T)
        tokens = rng.integers(1, V, size=shape).astype(np.int32)
        lengths = rng.integers(1, T + 1, size=shape[:-1])
        mask = (np.arange(T) < lengths[..., None]).astype(np.float32)
        data = {"tokens": tokens * mask.astype(np.int32),
                "targets": np.roll(tokens, -1, -1) * mask.astype(np.int32), "mask": mask,
                "context_bow": rng.poisson(0.5, size=shape[:-1] + (VC,)).astype(np.float32)}
        if not doc:
            data["doc_targets"] = np.full(shape[:1], 20.0, np.float32)
        return tf.data.Dataset.from_tensor_slices(data).batch(B)

    DATA = {False: dataset(False), True: dataset(True)}
    SMALL = dict(embedding_dim=8, hidden_dim=16)
    RGBN = dict(num_documents=50, embedding_dim=8, dropout=0.0, seed=3)
    # name: (document chunks?, constructor, the layer that samples theta)
    FAMILIES = {
        "lstm": (False, lambda: LSTMLanguageModel(V, **SMALL), None),
        "doc_lstm_chunked": (True, lambda: LSTMLanguageModel(V, document_level=True, **SMALL),
                             None),
        "lda_lstm": (False, lambda: LDALSTMLanguageModel(V, VC, num_topics=4, lda=LDA, **SMALL),
                     None),
        "topicrnn": (False, lambda: TopicRNN(V, LM_TO_TOPIC, num_topics=4, encoder_units=(16,),
                                             seed=1, **SMALL), "encoder"),
        "tcnlm": (False, lambda: TCNLM(V, VC, num_topics=4, ntm_units=(16,), seed=1, **SMALL),
                  "topic_model"),
        # K_1 = K_2: Phi^2, Pi^1 and Pi^2 all have the shape (6, 6).
        "rgbn_rnn": (True, lambda: RGBNRNN(V, VC, num_layers=2, hidden_sizes=(16, 12),
                                           topic_sizes=(6, 6), encoder_units=(16, 12), **RGBN),
                     "encoder"),
        "gbn_rnn": (True, lambda: RGBNRNN(V, VC, num_layers=2, recurrent=False,
                                          hidden_sizes=(16, 12), topic_sizes=(6, 4),
                                          encoder_units=(16, 12), **RGBN), "encoder"),
    }

    def theta_at_mean(layer):
        # Train with theta at the mean of q: the encoder's own `sample` argument.
        call = layer.call
        @functools.wraps(call)
        def mean_call(*args, **kwargs):
            kwargs["sample"] = False
            return call(*args, **kwargs)
        layer.call = mean_call

    def max_diff(a, b):
        return max(float(np.abs(np.asarray(x, np.float64) - y).max()) for x, y in zip(a, b))

    def run(name, strategy, init, sample):
        doc, make, sampler = FAMILIES[name]
        ds = DATA[doc]
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = make()
            model(next(iter(ds)))
            if init is not None:
                model.set_weights(init)
            if sampler and not sample:
                theta_at_mean(getattr(model, sampler))
            model.compile(optimizer=keras.optimizers.Adam(0.02))
        start = model.get_weights()
        topics = getattr(model, "phis", []) + getattr(model, "pis", [])
        topics_start = [m.numpy() for m in topics]
        history = model.fit(ds.repeat(), epochs=STEPS, steps_per_epoch=1, verbose=0).history
        gap = 0.0   # largest difference between the replicas' copies of any weight
        for w in model.weights:
            local = strategy.experimental_local_results(w.value)
            gap = max([gap] + [float(np.abs(local[0].numpy() - o.numpy()).max())
                               for o in local[1:]])
        out = {"loss": history["loss"], "ppl": history["ppl"], "gap": gap,
               "replicas": strategy.num_replicas_in_sync}
        if topics:
            mats = [m.numpy() for m in topics]
            out["num_topic_matrices"] = len(mats)
            out["topics_moved"] = max_diff(mats, topics_start)
            out["simplex_min"] = min(float(m.min()) for m in mats)
            out["simplex_sum_err"] = max(float(np.abs(m.sum(0) - 1).max()) for m in mats)
            out["mcmc_steps"] = int(model.topic_model.iterations.numpy())
            out["topics"] = mats
        return start, model.get_weights(), out

    mirrored = get_strategy("mirrored")
    result = {"devices": devices, "replicas": mirrored.num_replicas_in_sync}
    # split_cpu is idempotent, and too late once TensorFlow has started.
    result["split_again"] = split_cpu(2)
    try:
        split_cpu(3)
        result["too_late"] = None
    except RuntimeError as err:
        result["too_late"] = str(err)
    first = next(iter(mirrored.experimental_distribute_dataset(DATA[False])))
    result["tokens_per_replica"] = [
        float(m.numpy().sum()) for m in mirrored.experimental_local_results(first["mask"])]

    for arg in sys.argv[1:]:
        name, sampled = arg.split(":") if ":" in arg else (arg, "")
        init, single, one = run(name, tf.distribute.get_strategy(), None, False)
        _, multi, two = run(name, mirrored, init, False)
        r = {"single": one, "mirrored": two, "weight_diff": max_diff(single, multi),
             "moved": max_diff(single, init)}
        if "topics" in one:
            r["topics_diff"] = max_diff(one.pop("topics"), two.pop("topics"))
        if sampled:
            _, _, r["sampled"] = run(name, mirrored, init, True)
            r["sampled"].pop("topics", None)
        result[name] = r
        print(name, "done", flush=True)
    print("RESULT" + json.dumps(result))
""")

_WORKER_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    index, ports, out_dir = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": index}})
    from tfktopic.distribute import distribute_dataset, get_strategy
    strategy = get_strategy("multiworker")   # first, before any other TF op
    import keras
    import tensorflow as tf
    from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, load_corpus,
                               sentence_examples)
    from tfktopic.data.pipeline import document_dataset, sentence_dataset
    from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel
    from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
    from tfktopic.models.rgbn import RGBNRNN
    from tfktopic.models.tcnlm.model import TCNLM
    from tfktopic.models.topicrnn.model import TopicRNN

    # Real text through the real pipeline: 20 documents of the Lee corpus.
    corpus = load_corpus("lee").subset(range(20))
    lm = Vocabulary.build(corpus, min_count=3)
    topic = TopicVocabulary.build(corpus, lm)
    examples = sentence_examples(corpus, lm, topic, max_len=12, context_len=50)
    # rGBN-RNN reads documents as chunks of J = 3 sentence windows.
    chunks = document_sequences(corpus, lm, topic, 3, max_len=12, context_len=50)
    STEPS, BATCH = 3, 16
    CHUNKED = ("rgbn_rnn",)

    def data(name="lstm"):
        # Not shuffled: tf.data's auto-shard rewrite changes a seeded shuffle's
        # order, and the LSTM run is compared with one device on the same batches.
        if name in CHUNKED:
            ds = document_dataset(chunks, batch_size=4, shuffle=False, drop_remainder=True)
        else:
            ds = sentence_dataset(examples, batch_size=BATCH, shuffle=False,
                                  drop_remainder=True, document_targets=True)
        return distribute_dataset(ds.take(STEPS).repeat())

    # LDA-LSTM's fixed LDA: a seeded random topic-word matrix over the topic vocabulary.
    rng = np.random.default_rng(0)
    LDA = {"topic_word": rng.gamma(1.0, 1.0, size=(4, len(topic))), "alpha": np.full(4, 0.25)}

    FAMILIES = {
        "lstm": lambda: LSTMLanguageModel(len(lm), embedding_dim=8, hidden_dim=16),
        # TopicRNN samples theta (Gaussian noise drawn on each worker).
        "topicrnn": lambda: TopicRNN(len(lm), topic.lm_to_topic, num_topics=4, hidden_dim=16,
                                     embedding_dim=8, encoder_units=(16,), seed=1),
        # The ``-m slow`` families (README: every family trains under multiworker).
        "tcnlm": lambda: TCNLM(len(lm), len(topic), num_topics=4, ntm_units=(16,), seed=1,
                               embedding_dim=8, hidden_dim=16),
        "lda_lstm": lambda: LDALSTMLanguageModel(len(lm), len(topic), num_topics=4, lda=LDA,
                                                 embedding_dim=8, hidden_dim=16),
        # rGBN-RNN samples theta (Weibull) and runs TLASGR-MCMC on Phi and Pi.
        "rgbn_rnn": lambda: RGBNRNN(len(lm), len(topic), num_layers=2, hidden_sizes=(16, 12),
                                    topic_sizes=(6, 4), encoder_units=(16, 12),
                                    num_documents=len(corpus), embedding_dim=8, dropout=0.0,
                                    seed=3),
    }

    def train(name, strat):
        with strat.scope():
            keras.utils.set_random_seed(0)
            model = FAMILIES[name]()
            model(next(iter(data(name))))
            model.compile(optimizer=keras.optimizers.Adam(0.02))
        init = model.get_weights()
        history = model.fit(data(name), epochs=STEPS, steps_per_epoch=1, verbose=0).history
        return init, model.get_weights(), history["loss"]

    result = {"replicas": strategy.num_replicas_in_sync}
    for name in sys.argv[4:]:
        init, weights, loss = train(name, strategy)
        np.savez(os.path.join(out_dir, f"{name}_worker{index}.npz"), *weights)
        r = {"loss": loss,
             "moved": max(float(np.abs(a - b).max()) for a, b in zip(weights, init))}
        if index == 0 and name == "lstm":
            _, single, r["single_loss"] = train(name, tf.distribute.get_strategy())
            np.savez(os.path.join(out_dir, f"{name}_single.npz"), *single)
        result[name] = r
    print("RESULT" + json.dumps(result), flush=True)
""")

MIRRORED_JOBS = {
    # Two processes run in parallel (2 cores); ":sampled" adds a mirrored run
    # with theta sampled (the TopicRNN / TCNLM Gaussian encoder, the rGBN Weibull one).
    "mirrored_lm": ["lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn:sampled", "tcnlm"],
    "mirrored_rgbn": ["rgbn_rnn:sampled", "gbn_rnn"],
}
FAMILY_JOB = {name.split(":")[0]: job for job, names in MIRRORED_JOBS.items() for name in names}
#: The default run: a plain LSTM, the Gaussian topic model and rGBN-RNN (MCMC state);
#: ``-m slow`` adds every other family (each subprocess traces every model it trains).
QUICK_MIRRORED = ("lstm", "topicrnn", "rgbn_rnn")


def _family_params(names):
    return [name if name in QUICK_MIRRORED else pytest.param(name, marks=pytest.mark.slow)
            for name in names]
WORKER_FAMILIES = ["lstm", "topicrnn"]
#: ``-m slow``: the other families in two more worker processes (`slow_workers`).
SLOW_WORKER_FAMILIES = ["tcnlm", "lda_lstm", "rgbn_rnn"]


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class _Job:
    """A subprocess whose last ``RESULT{json}`` line is its result.

    Output goes to files (not pipes, which could fill up while the test waits
    for another job).
    """

    def __init__(self, name, script, args, env, log_dir):
        self.name = name
        self.out, self.err = log_dir / f"{name}.out", log_dir / f"{name}.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(script), *args], env=env,
                                         stdout=out, stderr=err, text=True)
        self._result = None

    def result(self):
        if self._result is None:
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"{self.name} did not finish within {TIMEOUT} s (killed); "
                            f"stderr tail:\n{self.err.read_text()[-3000:]}")
            out, err = self.out.read_text(), self.err.read_text()
            assert self.proc.returncode == 0, f"{self.name} failed:\n{err[-3000:]}"
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT")]
            assert lines, f"{self.name} printed no result:\n{out[-2000:]}\n{err[-2000:]}"
            self._result = json.loads(lines[-1][len("RESULT"):])
        return self._result


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, request):
    """Starts every strategy subprocess at once; tests wait for their own."""
    full = "not slow" not in (request.config.getoption("markexpr") or "")
    root = tmp_path_factory.mktemp("distribute")
    env = _subprocess_env()
    (root / "mirrored.py").write_text(_MIRRORED_SCRIPT)
    started = _start_workers(root, env, WORKER_FAMILIES)
    for job, names in MIRRORED_JOBS.items():
        names = [n for n in names if full or n.split(":")[0] in QUICK_MIRRORED]
        started[job] = _Job(job, root / "mirrored.py", names, env, root)
    yield started
    _kill_unfinished(started)


@pytest.fixture(scope="module")
def slow_workers(tmp_path_factory):
    """Two more worker processes (their own ports) training `SLOW_WORKER_FAMILIES`."""
    root = tmp_path_factory.mktemp("distribute_slow")
    started = _start_workers(root, _subprocess_env(), SLOW_WORKER_FAMILIES)
    yield started
    _kill_unfinished(started)


def _subprocess_env():
    """This tree's package first on the path, quiet TensorFlow, no inherited TF_CONFIG."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("TF_CONFIG", None)
    return env


def _start_workers(root, env, families):
    """Two multi-worker processes on fresh loopback ports training `families`
    (``{"worker0": _Job, "worker1": _Job, "dir": root}``)."""
    (root / "worker.py").write_text(_WORKER_SCRIPT)
    ports = ",".join(str(p) for p in _free_ports(2))
    started = {f"worker{i}": _Job(f"worker{i}", root / "worker.py",
                                  [str(i), ports, str(root), *families], env, root)
               for i in range(2)}
    started["dir"] = root
    return started


def _kill_unfinished(started):
    for job in started.values():
        if isinstance(job, _Job) and job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-12)))


# ----------------------------------------------------------------------------
# 1. MirroredStrategy (2 logical CPUs) == 1 device, every model family
# ----------------------------------------------------------------------------
def test_mirrored_setup_uses_two_logical_cpus_and_splits_tokens_unevenly(jobs):
    result = jobs["mirrored_lm"].result()
    assert result["devices"] == ["/cpu:0", "/cpu:1"]
    assert result["replicas"] == 2
    assert result["split_again"] == ["/cpu:0", "/cpu:1"]      # idempotent
    assert result["too_late"] is not None and "already initialised" in result["too_late"]
    # The replicas hold different numbers of tokens, so weighting a replica's
    # mean loss by 1 / num_replicas would not give the global-batch gradient.
    tokens = result["tokens_per_replica"]
    assert len(tokens) == 2 and tokens[0] != tokens[1], tokens


@pytest.mark.parametrize("family", _family_params(FAMILY_JOB))
def test_mirrored_training_matches_single_device(jobs, family):
    """Same initial weights, same global batches, 3 Adam steps (lr 0.02).

    Tolerance: summing two replicas' gradients instead of one batch's changes
    float32 rounding (~1e-7 relative); Adam's normalisation can carry that to
    ~1e-6 absolute for weights whose gradient is nearly 0. Reported losses and
    perplexities agree to 1e-5 relative, weights to 5e-5, while training moved
    the weights by ~1e-1.
    """
    r = jobs[FAMILY_JOB[family]].result()[family]
    single, mirrored = r["single"], r["mirrored"]
    assert mirrored["replicas"] == 2 and single["replicas"] == 1
    assert len(single["loss"]) == 3 and np.all(np.isfinite(single["loss"]))
    assert _rel(single["loss"], mirrored["loss"]) < 1e-5, (single["loss"], mirrored["loss"])
    assert _rel(single["ppl"], mirrored["ppl"]) < 1e-5, (single["ppl"], mirrored["ppl"])
    assert r["moved"] > 1e-2, r["moved"]            # training did something
    assert r["weight_diff"] < 5e-5, r["weight_diff"]
    assert mirrored["gap"] == 0.0                   # mirrored copies stay bit-identical


@pytest.mark.parametrize("family", ["topicrnn", "rgbn_rnn"])
def test_mirrored_training_with_sampled_theta_runs(jobs, family):
    """Sampling on (Gaussian / Weibull reparameterisation noise per replica):
    finite losses and replicas that stay identical; no single-device match is
    expected (see the module docstring)."""
    sampled = jobs[FAMILY_JOB[family]].result()[family]["sampled"]
    assert sampled["replicas"] == 2
    assert len(sampled["loss"]) == 3 and np.all(np.isfinite(sampled["loss"]))
    assert sampled["gap"] == 0.0
    if "mcmc_steps" in sampled:
        assert sampled["mcmc_steps"] == 3
        assert sampled["simplex_min"] >= 0.0 and sampled["simplex_sum_err"] < 1e-5


# ----------------------------------------------------------------------------
# 2. rGBN TLASGR-MCMC under MirroredStrategy
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("family, matrices", [
    ("rgbn_rnn", 4), pytest.param("gbn_rnn", 2, marks=pytest.mark.slow)])
def test_mirrored_mcmc_keeps_phi_pi_identical_on_the_simplex_and_equal_to_one_device(
        jobs, family, matrices):
    """Phi^1, Phi^2 (and Pi^1, Pi^2) after 3 joint steps.

    The augmentation draws are keyed on (seed, step, global document position)
    and the augmented counts are summed across replicas before the update, so
    the update does not depend on the split: the replicas' copies are
    bit-identical (`gap`, over every weight) and equal to the single-device run
    (`topics_diff`, ~0) while the MCMC moved them by ~1e-1. The draws are
    discrete, so a theta that differed by an ulp (the network weights differ by
    rounding after the first step) could in principle flip one draw and change
    the chain; with these fixed inputs none does (the inputs are seeded, so the
    outcome is reproducible). Regression: `TLASGRTopics.apply_counts` used to
    pass the (mirrored) variables to a shared tf.function, whose first trace
    captured them, so under a MirroredStrategy an update of another matrix of
    the same shape -- here Phi^2, Pi^1, Pi^2 of rGBN-RNN (K_1 = K_2), and every
    matrix of the models built after the first one in this process -- read the
    wrong matrix and left the single-device chain.
    """
    r = jobs[FAMILY_JOB[family]].result()[family]
    for run in (r["single"], r["mirrored"]):
        assert run["num_topic_matrices"] == matrices
        assert run["mcmc_steps"] == 3
        assert run["simplex_min"] >= 0.0
        assert run["simplex_sum_err"] < 1e-5
        assert run["topics_moved"] > 1e-2, run["topics_moved"]
    assert r["mirrored"]["gap"] == 0.0
    assert r["topics_diff"] < 1e-6, r["topics_diff"]


# ----------------------------------------------------------------------------
# 3. MultiWorkerMirroredStrategy: 2 processes on loopback ports
# ----------------------------------------------------------------------------
def test_multi_worker_fit_on_lee_leaves_identical_weights_on_both_workers(jobs):
    results = [jobs[f"worker{i}"].result() for i in range(2)]
    root = jobs["dir"]
    for result in results:
        assert result["replicas"] == 2
    _assert_workers_agree(jobs, WORKER_FAMILIES)
    # The LSTM LM equals one device trained on the same global batches.
    single = np.load(root / "lstm_single.npz")
    worker = np.load(root / "lstm_worker0.npz")
    assert max(float(np.abs(single[k] - worker[k]).max()) for k in single.files) < 5e-5
    assert _rel(results[0]["lstm"]["single_loss"], results[0]["lstm"]["loss"]) < 1e-5


def _assert_workers_agree(jobs, families):
    """Both workers: 2 replicas, 3 finite global losses (equal on both), weights that
    moved and are bit-identical on the two workers."""
    results = [jobs[f"worker{i}"].result() for i in range(2)]
    root = jobs["dir"]
    for result in results:
        assert result["replicas"] == 2
    for name in families:
        losses = [res[name]["loss"] for res in results]
        assert len(losses[0]) == 3 and np.all(np.isfinite(losses[0])), losses
        assert losses[0] == losses[1], losses           # one global loss, reported on both
        assert results[0][name]["moved"] > 1e-2
        w0 = np.load(root / f"{name}_worker0.npz")
        w1 = np.load(root / f"{name}_worker1.npz")
        assert len(w0.files) == len(w1.files) > 0
        for key in w0.files:
            np.testing.assert_array_equal(w0[key], w1[key], err_msg=f"{name} {key}")


@pytest.mark.slow
def test_multi_worker_fit_of_tcnlm_lda_lstm_and_rgbn_leaves_identical_weights(slow_workers):
    """README: every family trains under `--strategy multiworker`. TCNLM (Gaussian
    theta sampled per worker), LDA-LSTM (fixed LDA) and rGBN-RNN (Weibull theta and
    TLASGR-MCMC updates of Phi / Pi) in two worker processes on loopback ports."""
    _assert_workers_agree(slow_workers, SLOW_WORKER_FAMILIES)
    root = slow_workers["dir"]
    # rGBN's Phi / Pi stay columns on the simplex on both workers after the MCMC steps.
    model_weights = np.load(root / "rgbn_rnn_worker0.npz")
    simplex = [model_weights[k] for k in model_weights.files
               if model_weights[k].ndim == 2 and np.all(model_weights[k] >= 0)
               and np.allclose(model_weights[k].sum(0), 1.0, atol=1e-5)]
    assert len(simplex) >= 4, [model_weights[k].shape for k in model_weights.files]


# ----------------------------------------------------------------------------
# 4. The API without a cluster: bad input, helpers outside a strategy
# ----------------------------------------------------------------------------
def test_unknown_strategy_is_a_clear_value_error():
    assert STRATEGIES == ("none", "mirrored", "multiworker", "data_parallel")
    with pytest.raises(ValueError, match=r"--strategy must be one of none, mirrored, "
                                         r"multiworker, data_parallel; got 'foo'"):
        get_strategy("foo")


def test_data_parallel_on_tensorflow_is_mirrored_and_one_process_reads_every_shard():
    from tfktopic.distribute import jax_data_parallel, process_layout
    from tfktopic.errors import TfktopicError

    strategy = get_strategy("data_parallel")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert process_layout() == (0, 1)
    with pytest.raises(TfktopicError, match=r"runs on JAX here; .*\(set KERAS_BACKEND=jax\)"):
        jax_data_parallel()


@pytest.mark.parametrize("value, message", [
    (None, "TF_CONFIG is not set"),
    ("{cluster: 1", "TF_CONFIG is not valid JSON"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}',
     'TF_CONFIG must be a JSON object with a "cluster" object and a "task" object'),
])
def test_multiworker_without_valid_tf_config_is_a_clear_value_error(monkeypatch, value, message):
    if value is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(ValueError, match="--strategy multiworker: " + message):
        get_strategy("multiworker")


def test_none_is_the_default_strategy_and_split_cpu_checks_its_argument():
    assert get_strategy("none") is tf.distribute.get_strategy()
    assert get_strategy(None).num_replicas_in_sync == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="split_cpu"):
            split_cpu(bad)


def test_distribute_dataset_shards_by_data_and_keeps_the_elements():
    dataset = tf.data.Dataset.range(6).batch(2)
    prepared = distribute_dataset(dataset)
    assert (prepared.options().experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.DATA)
    assert [b.numpy().tolist() for b in prepared] == [[0, 1], [2, 3], [4, 5]]


def test_replica_helpers_are_the_identity_on_one_replica():
    assert float(replica_share(tf.constant(7.0))) == 1.0
    assert float(replica_share(tf.constant(0.0))) == 1.0
    assert float(replica_mean(tf.constant(2.5), tf.constant(3.0))) == 2.5
    assert float(replica_sum(tf.constant(4.0))) == 4.0
    assert distribute._replica_context() is None


# ---------------------------------------------------- input pipelines: workers and partial batches
@pytest.mark.parametrize("config, expected", [
    ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}, (1, 2)),
    ({"cluster": {"chief": ["c:0"], "worker": ["a:1", "b:2"]},
      "task": {"type": "chief", "index": 0}}, (0, 3)),
    ({"cluster": {"chief": ["c:0"], "worker": ["a:1", "b:2"]},
      "task": {"type": "worker", "index": 1}}, (2, 3)),
])
def test_tf_config_worker_numbers_the_chief_then_the_workers(monkeypatch, config, expected):
    assert distribute.tf_config_worker(json.dumps(config)) == expected
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    assert distribute.tf_config_worker() == expected


@pytest.mark.parametrize("task", [{"type": "evaluator", "index": 0},
                                  {"type": "worker", "index": 2}])
def test_tf_config_worker_refuses_a_task_that_does_not_train(task):
    config = {"cluster": {"worker": ["a:1", "b:2"], "evaluator": ["e:3"]}, "task": task}
    with pytest.raises(ValueError, match=f"TF_CONFIG: task '{task['type']}' "
                                         f"{task['index']} is not a training task"):
        distribute.tf_config_worker(json.dumps(config))


def test_input_workers_is_one_pipeline_without_a_multi_worker_strategy():
    assert distribute.input_workers() == (0, 1)
    assert distribute.input_workers(get_strategy("none")) == (0, 1)


def test_distribute_dataset_leaves_a_dataset_read_by_file_unsharded():
    dataset = tf.data.Dataset.range(6).batch(2)
    dataset.process_local = True  # each worker reads its own shard files already
    prepared = distribute_dataset(dataset)
    assert (prepared.options().experimental_distribute.auto_shard_policy
            == tf.data.experimental.AutoShardPolicy.OFF)
    assert [b.numpy().tolist() for b in prepared] == [[0, 1], [2, 3], [4, 5]]


def test_pad_rows_appends_rows_that_predict_no_token():
    batch = {"tokens": np.ones((3, 4), np.int32), "mask": np.ones((3, 4), np.float32),
             "context_bow": np.ones((3, 5), np.float32), "document": np.arange(3)}
    padded = distribute.pad_rows(batch, 4)
    assert {k: v.shape[0] for k, v in padded.items()} == {k: 4 for k in batch}
    assert {k: v.dtype for k, v in padded.items()} == {k: v.dtype for k, v in batch.items()}
    assert padded["mask"][3].sum() == 0 and padded["context_bow"][3].sum() == 0
    assert padded["document"].tolist() == [0, 1, 2, -1]
    np.testing.assert_array_equal(padded["tokens"][:3], batch["tokens"])
    assert distribute.pad_rows(batch, 3) is batch
    with pytest.raises(ValueError, match="pad_rows: the batch has 3 rows, more than 2"):
        distribute.pad_rows(batch, 2)


class _Batches(__import__("keras").utils.PyDataset):
    def __init__(self, sizes, batch_size):
        super().__init__()
        self.sizes, self.batch_size = sizes, batch_size
        self.starts = np.concatenate([[0], np.cumsum(sizes)])

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, index):
        rows = np.arange(self.starts[index], self.starts[index + 1])
        return {"tokens": rows[:, None].astype(np.int32),
                "mask": np.ones((len(rows), 1), np.float32)}


def test_process_batches_cut_global_batches_as_keras_shards_a_tf_dataset():
    """Process p of P gets rows [p b, (p + 1) b) of every global batch -- Keras' own split of
    a tf.data.Dataset (`DataParallel.distribute_tf_dataset`: rebatch(b).shard(P, p)) -- and
    the last, partial batch is padded to b with mask-zero rows."""
    sizes, size, processes = [8, 8, 5], 8, 2
    global_batches = _Batches(sizes, size)
    dataset = tf.data.Dataset.range(sum(sizes)).batch(size)
    for process in range(processes):
        ours = distribute.ProcessBatches(global_batches, devices=2, process=process,
                                         processes=processes)
        keras_split = dataset.rebatch(size // processes).shard(processes, process)
        assert len(ours) == len(sizes)
        for i, theirs in enumerate(keras_split):
            batch = ours[i]
            real = batch["mask"][:, 0] > 0
            assert batch["tokens"].shape == (size // processes, 1)
            assert batch["tokens"][real, 0].tolist() == theirs.numpy().tolist()
            assert not np.any(batch["tokens"][~real])


def test_process_batches_keep_every_row_of_an_odd_partial_batch_of_unknown_batch_size():
    """Chunk and stream batches (read whole by every process) carry no ``batch_size``: the
    processes' parts of a 7-row last batch are rows 0-3 and 4-6 (the last row was left out
    when the part was 7 // 2 rows: a prepared rGBN-RNN epoch on 2 processes drifted from
    2 devices)."""
    global_batches = _Batches([8, 7], 8)
    del global_batches.batch_size
    real = []
    for process in range(2):
        ours = distribute.ProcessBatches(global_batches, devices=2, process=process,
                                         processes=2)
        assert [ours[i]["tokens"].shape[0] for i in range(2)] == [4, 4]
        batch = ours[1]
        real += batch["tokens"][batch["mask"][:, 0] > 0, 0].tolist()
    assert real == list(range(8, 15))


def test_process_batches_pad_a_partial_batch_to_a_multiple_of_the_devices_on_one_process():
    batches = distribute.ProcessBatches(_Batches([8, 5, 1], 8), devices=2)
    assert [batches[i]["tokens"].shape[0] for i in range(3)] == [8, 6, 2]
    assert [batches[i]["mask"].sum() for i in range(3)] == [8, 5, 1]
    local = _Batches([4, 3, 0], 8)
    local.batch_rows = 4  # this process's part, read by file
    batches = distribute.ProcessBatches(local, devices=4, process=1, processes=2, local=True)
    assert [batches[i]["tokens"].shape[0] for i in range(3)] == [4, 4, 4]
    assert [batches[i]["mask"].sum() for i in range(3)] == [4, 3, 0]


_PREPARED_WORKER_SCRIPT = textwrap.dedent("""
    import json, logging, os, sys
    index, ports = int(sys.argv[1]), sys.argv[2].split(",")
    directory, out = sys.argv[3], sys.argv[4]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index}})
    read = []

    class Read(logging.Handler):
        def emit(self, record):
            path, worker, count, _, files = record.args
            read.append([os.path.basename(str(path)), worker, count, list(files)])

    logger = logging.getLogger("tfktopic.data.shards")
    logger.addHandler(Read())
    logger.setLevel(logging.DEBUG)
    from tfktopic.cli import main
    status = main(["train", "lstm", "--prepared", directory, "--epochs", "1", "--verbose", "0",
                   "--batch-size", "32", "--set", "hidden_dim=16", "--set", "embedding_dim=16",
                   "--strategy", "multiworker", "--out", out])
    results = json.load(open(os.path.join(out, "results.json")))
    print("RESULT" + json.dumps({"status": status, "read": read,
                                 "test_ppl": results["test"]["perplexity"]}))
""")


def test_multi_worker_prepared_training_reads_each_workers_own_shard_files(tmp_path):
    """`tfktopic train --prepared --strategy multiworker` on 2 TF_CONFIG workers (about a
    minute): each worker's training stream reads only its shard files (TF_CONFIG index i of
    2: files i, i + 2, ...); validation and test are read whole (tf.distribute's DATA
    sharding); both workers end with the same weights and test perplexity."""
    from tfktopic.data import load_corpus
    from tfktopic.data.shards import prepare_corpus

    path = tmp_path / "lee.txt"
    path.write_text("".join("\t".join(" ".join(s) for s in d) + "\n"
                            for d in list(load_corpus("lee"))[:110]), encoding="utf-8")
    prepared = tmp_path / "lee"
    prepare_corpus(path, "tdlm", prepared, kinds=("sentences",), min_count=3, shard_size=300)
    files = {part: [s["file"] for s in json.loads((prepared / part / "manifest.json")
                                                   .read_text())["kinds"]["sentences"]["shards"]]
             for part in ("train", "valid", "test")}
    assert len(files["train"]) >= 3
    script = tmp_path / "worker.py"
    script.write_text(_PREPARED_WORKER_SCRIPT)
    ports = ",".join(str(p) for p in _free_ports(2))
    env = _subprocess_env()
    started = [_Job(f"worker{i}", script, [str(i), ports, str(prepared),
                                           str(tmp_path / f"run{i}")], env, tmp_path)
               for i in range(2)]
    try:
        results = [job.result() for job in started]
    finally:
        _kill_unfinished({job.name: job for job in started})
    mine = []
    for index, result in enumerate(results):
        assert result["status"] == 0
        train = [r for r in result["read"] if r[0] == "train"]
        assert train and all(r[1:3] == [index, 2] for r in train)
        mine.append({f for r in train for f in r[3]})
        assert mine[-1] == set(files["train"][index::2])
        for part in ("valid", "test"):
            reads = [r[1:] for r in result["read"] if r[0] == part]
            assert reads and all(r == [0, 1, files[part]] for r in reads), (part, reads)
    assert not mine[0] & mine[1] and sorted(mine[0] | mine[1]) == sorted(files["train"])
    assert results[0]["test_ppl"] == results[1]["test_ppl"] and np.isfinite(results[0]["test_ppl"])
    import keras

    import tfktopic.models  # noqa: F401  (registers the model classes)

    weights = [keras.saving.load_model(tmp_path / f"run{i}" / "model.keras",
                                       compile=False).get_weights() for i in range(2)]
    for ours, theirs in zip(*weights):
        np.testing.assert_array_equal(ours, theirs)
