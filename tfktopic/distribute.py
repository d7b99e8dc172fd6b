"""Distribution strategies for training every tfktopic model.

Four choices, named as on the command line (`--strategy`):

- `"none"`: the default strategy (`tf.distribute.get_strategy()`), one device.
- `"mirrored"`: `tf.distribute.MirroredStrategy` over all local devices (all
  GPUs if there are any, else every logical CPU: by default Mirrored would use
  only `/cpu:0`, so CPUs are listed explicitly; `split_cpu` makes several).
- `"multiworker"`: `tf.distribute.MultiWorkerMirroredStrategy`; the cluster
  and this process's role come from the `TF_CONFIG` environment variable.
  Create it first thing in the program. It is patched for two Keras 3 `fit`
  incompatibilities (see `_MultiWorkerMirroredStrategy`).
- `"data_parallel"`: data parallelism over every device of the job. Under JAX
  it is `keras.distribution.DataParallel` over all devices of all processes
  (`jax_data_parallel`: made the global distribution with
  `keras.distribution.set_distribution`); under TensorFlow it is `"mirrored"`.

Build and compile the model inside `strategy.scope()`, pass the dataset
through `distribute_dataset` (our datasets come from in-memory tensors, so the
default FILE auto-sharding would fail under multi-worker) and call
`model.fit` as usual: Keras splits every global batch over the replicas.

What makes a model's `train_step` exact under a strategy (the helpers below,
used by every tfktopic model):

- its hand-written mean loss is weighted by the replica's share of the global
  batch (`replica_share`: the replica's predicted tokens, or documents for
  rGBN-RNN, over the total), so the summed replica gradients are the
  single-device gradient of the global batch even when the replicas hold
  different numbers of tokens (dividing by the replica count is not);
- the reported loss is the global-batch mean (`replica_mean`) and the logs
  are computed from all replicas' metric states (`global_logs`), so `loss`,
  `nll` and `ppl` equal the single-device values;
- rGBN-RNN's TLASGR-MCMC draws are keyed on global document positions and
  its augmented counts are summed across replicas before one identical
  Phi/Pi update (`tfktopic.bayes.tlasgr`).

**JAX** (`--strategy data_parallel`, tests/library/test_distribution_jax.py). The jitted
train step is one global-view SPMD program over the device mesh: the batch is
sharded over the devices, but every sum in the step (the loss normalisers, the
metrics, TLASGR's augmented counts and its batch size) is over the global batch,
so the helpers below are identities there and the random draws (threefry,
partitionable) do not depend on the sharding. Tested: 1 and 2 devices give the
same first updates (LSTM, TopicRNN, rGBN-RNN with Phi/Pi), and so do 2 processes on
loopback (LSTM). Several processes (hosts) are joined by
`keras.distribution.initialize`, which reads
``KERAS_DISTRIBUTION_JOB_ADDRESSES`` (comma-separated ``host:port``, the first
is the coordinator), ``KERAS_DISTRIBUTION_NUM_PROCESSES`` and
``KERAS_DISTRIBUTION_PROCESS_ID``; on CPU the processes talk through gloo.
Each process feeds its own part of every global batch: `distribute_dataset` wraps the
numpy batches in `ProcessBatches` (rows ``[p B/n, (p+1) B/n)`` of each global batch, the
split Keras makes of a `tf.data.Dataset`), and a `tfktopic.data.shards.ShardReader`
reads only this process's shards (`process_layout`; a prepared run's pipelines:
`input_workers`, also the TF_CONFIG worker under multi-worker). A last batch the devices
do not divide is padded with mask-zero rows (`pad_rows`; token sums unchanged).

Tested (tests/library/test_distribute.py): on 2 logical CPUs every model family
follows the single-device loss trajectory (dropout 0, theta at its mean) and
Phi/Pi equal the single-device ones; 2 worker processes end with identical
weights. Theta's reparameterisation noise is drawn per replica, so with
sampling on a run is a valid but different draw than on one device. Under
multi-worker, tf.data's auto-shard rewrite also changes the order of a seeded
shuffle (consistently on all workers).

Example:

```python
from tfktopic.distribute import split_cpu, get_strategy, distribute_dataset

split_cpu(2)                      # 2 logical CPUs, before TensorFlow starts
strategy = get_strategy("mirrored")
with strategy.scope():
    model = LSTMLanguageModel(vocab_size=1000, embedding_dim=32, hidden_dim=32)
    model.compile(optimizer="adam")
model.fit(distribute_dataset(train_ds), epochs=2)
```

Multi-worker (one process per worker, same script, different `index`):

```python
os.environ["TF_CONFIG"] = json.dumps({
    "cluster": {"worker": ["127.0.0.1:20001", "127.0.0.1:20002"]},
    "task": {"type": "worker", "index": 0}})
strategy = get_strategy("multiworker")
```
"""

import contextlib
import json
import os

import keras
import numpy as np

from tfktopic import backend

__all__ = ["STRATEGIES", "get_strategy", "split_cpu", "distribute_dataset", "replica_sum",
           "replica_share", "replica_mean", "global_logs", "jax_data_parallel",
           "process_layout", "check_batch_size", "input_workers", "tf_config_worker",
           "pad_rows", "ProcessBatches"]

STRATEGIES = ("none", "mirrored", "multiworker", "data_parallel")

#: The environment variables `keras.distribution.initialize` reads (multi-process JAX).
PROCESS_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                     "KERAS_DISTRIBUTION_PROCESS_ID")


def split_cpu(n):
    """Configure `n` logical CPU devices on the first physical CPU.

    Must run before TensorFlow initialises its runtime (before the first op,
    variable or `list_logical_devices` call). Calling it again with the same
    `n` is a no-op.

    Args:
        n: int >= 1, number of logical CPU devices.

    Returns:
        The list of logical CPU device names, e.g. `["/cpu:0", "/cpu:1"]`.

    Raises:
        ValueError: if `n` is not a positive int.
        RuntimeError: if TensorFlow's runtime is already initialised with a
            different device configuration.

    Example:

    ```python
    split_cpu(2)
    strategy = get_strategy("mirrored")   # 2 replicas on one CPU
    ```
    """
    tf = _tf()
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"split_cpu: n must be an int >= 1, got {n!r}.")
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == n:
        return [f"/cpu:{i}" for i in range(n)]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    except RuntimeError as err:
        have = len(tf.config.list_logical_devices("CPU"))
        raise RuntimeError(
            f"split_cpu({n}): TensorFlow is already initialised with {have} logical "
            "CPU device(s); call split_cpu before creating any tensor, variable or "
            "model (e.g. at the very start of the program).") from err
    return [f"/cpu:{i}" for i in range(n)]


def _local_devices():
    tf = _tf()
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [d.name for d in gpus]
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def _check_tf_config():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ValueError(
            "--strategy multiworker: TF_CONFIG is not set; set it to a JSON object "
            'like {"cluster": {"worker": ["host1:port", "host2:port"]}, '
            '"task": {"type": "worker", "index": 0}}.')
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"--strategy multiworker: TF_CONFIG is not valid JSON ({err.msg} at "
            f"position {err.pos}).") from err
    if (not isinstance(config, dict) or not isinstance(config.get("cluster"), dict)
            or not isinstance(config.get("task"), dict)):
        raise ValueError(
            "--strategy multiworker: TF_CONFIG must be a JSON object with a "
            '"cluster" object and a "task" object.')
    return config


def _multiworker_strategy():
    """A new `_MultiWorkerMirroredStrategy` (the class is made on first use, so that this
    module imports no TensorFlow under another backend)."""
    tf = _tf()

    class _MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        """`MultiWorkerMirroredStrategy` whose `reduce` works for Keras 3's `fit`.

        Two Keras 3 / TF 2.21 incompatibilities break `model.fit` under the
        multi-worker strategy, and `reduce` is where both meet:

        * `fit` reduces the first (dict) batch to build the model
          (`_maybe_symbolic_build`); `MirroredStrategy.reduce` maps over a nested
          structure, the multi-worker one does not (keras-team/keras#20329). Here
          it is reduced leaf by leaf, as `MirroredStrategy` does.
        * `fit` averages a step's scalar logs with `reduce("MEAN", v, axis=0)`,
          which fails for scalars (tensorflow/tensorflow#72388). A scalar has no
          batch axis: it is averaged over replicas (`axis=None`).
        """

        def reduce(self, reduce_op, value, axis):
            if tf.nest.is_nested(value):
                return tf.nest.map_structure(lambda leaf: self.reduce(reduce_op, leaf, axis), value)
            if axis is not None:
                local = self.experimental_local_results(value)
                shape = getattr(local[0], "shape", None) if local else None
                if shape is not None and shape.rank == 0:
                    axis = None
            return super().reduce(reduce_op, value, axis)

    return _MultiWorkerMirroredStrategy()


def get_strategy(name, devices=None):
    """Return the `tf.distribute.Strategy` named `name`.

    Args:
        name: one of `STRATEGIES`: `"none"` (default strategy, one device),
            `"mirrored"` (`MirroredStrategy` over all local GPUs, else all
            logical CPUs), `"multiworker"` (`MultiWorkerMirroredStrategy`,
            configured by the `TF_CONFIG` environment variable) or
            `"data_parallel"` (JAX: `jax_data_parallel`; TensorFlow: `"mirrored"`).
        devices: optional list of device names for `"mirrored"` (e.g.
            `["/cpu:0", "/cpu:1"]`); ignored by the other strategies.

    Returns:
        A `tf.distribute.Strategy`, or under JAX for `"data_parallel"` a
        `keras.distribution.DataParallel`; build and compile the model in its
        `scope()`.

    Raises:
        ValueError: for an unknown name, or `"multiworker"` without a valid
            `TF_CONFIG`.
        TfktopicError: `"mirrored"` / `"multiworker"` under another backend
            than TensorFlow.

    Example:

    ```python
    strategy = get_strategy("mirrored")
    with strategy.scope():
        model = TCNLM(vocab_size=1000, topic_vocab_size=500, num_topics=20)
        model.compile(optimizer="adam")
    model.fit(distribute_dataset(train_ds), epochs=2)
    ```

    Under another backend than TensorFlow, `"none"` gives a strategy whose `scope()`
    does nothing (one device; `keras.distribution` is JAX's way to shard) and the
    others raise the one-line `TfktopicError` of `backend.require_tensorflow`.
    """
    if name is None:
        name = "none"
    if not isinstance(name, str) or name.lower() not in STRATEGIES:
        raise ValueError(
            f"--strategy must be one of {', '.join(STRATEGIES)}; got {name!r}.")
    name = name.lower()
    if name == "data_parallel" and backend.is_jax():
        return jax_data_parallel()
    if name == "none" and not backend.is_tensorflow():
        return _NoStrategy()
    backend.require_tensorflow(f"--strategy {name} (tf.distribute"
                               + ("; use data_parallel)" if name in ("mirrored", "multiworker")
                                  else ")"))
    tf = _tf()
    if name == "none":
        return tf.distribute.get_strategy()
    if name in ("mirrored", "data_parallel"):
        return tf.distribute.MirroredStrategy(
            devices=list(devices) if devices is not None else _local_devices())
    _check_tf_config()
    return _multiworker_strategy()


def _initialize_processes():
    """Join the other processes of the job once (`keras.distribution.initialize`), when
    ``KERAS_DISTRIBUTION_NUM_PROCESSES`` asks for more than one; CPU collectives through
    gloo. Returns the number of processes."""
    import jax

    raw = os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")
    try:
        processes = int(raw)
    except ValueError:
        raise ValueError(f"KERAS_DISTRIBUTION_NUM_PROCESSES must be an integer, got "
                         f"{raw!r}") from None
    if processes <= 1:
        return 1
    missing = [v for v in PROCESS_VARIABLES if not os.environ.get(v)]
    if missing:
        raise ValueError(f"--strategy data_parallel with {processes} processes: set "
                         f"{', '.join(missing)} too (job addresses host:port,..., the first "
                         "the coordinator; this process's id 0..n-1)")
    if jax.distributed.is_initialized():
        return jax.process_count()
    # CPU devices of several processes need a collectives implementation; gloo is
    # jax 0.10's default already (checked), set for builds whose default is none.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize()
    return jax.process_count()


def jax_data_parallel():
    """`keras.distribution.DataParallel` over every device of the job, made global.

    Joins the job's processes first when ``KERAS_DISTRIBUTION_NUM_PROCESSES`` > 1
    (see the module docstring). Under it the jitted train step shards every batch
    over the devices; sums over the batch stay global (SPMD).

    Returns:
        The `keras.distribution.DataParallel` (also set with
        `keras.distribution.set_distribution`); build the model in its `scope()`.

    Raises:
        TfktopicError: under another backend than JAX.
    """
    if not backend.is_jax():
        from tfktopic.errors import TfktopicError
        raise TfktopicError(f"keras.distribution data parallelism runs on JAX here; this "
                            f"process runs Keras on {backend.name()} (set KERAS_BACKEND=jax)")
    _initialize_processes()
    distribution = keras.distribution.DataParallel(
        devices=keras.distribution.list_devices())
    keras.distribution.set_distribution(distribution)
    return distribution


def check_batch_size(distribution, batch_size):
    """Raise a one-line error unless `batch_size` splits evenly over `distribution`'s devices.

    A `keras.distribution.DataParallel` shards every batch over its devices, and JAX
    refuses a batch dimension its devices do not divide (measured: ``--batch-size 7`` on 2
    devices fails in the first step). Other strategies are not checked.

    Args:
        distribution: what `get_strategy` returned.
        batch_size: the global batch size (``--batch-size``).

    Raises:
        ValueError: naming ``--batch-size`` and the device count.
    """
    mesh = getattr(distribution, "device_mesh", None)
    if mesh is None:
        return
    devices = int(np.prod(mesh.shape))
    if int(batch_size) % devices:
        raise ValueError(f"--batch-size {batch_size} does not split over the {devices} devices "
                         f"of --strategy data_parallel; use a multiple of {devices}")


def process_layout():
    """(index of this process, number of processes) of a JAX multi-process job.

    `(0, 1)` under TensorFlow (tf.distribute shards the dataset itself) and for a
    single JAX process. A `tfktopic.data.shards.ShardReader` reads shards
    ``index, index + count, ...``.

    Example:
    >>> process_layout()
    (0, 1)
    """
    if not backend.is_jax():
        return 0, 1
    import jax

    return int(jax.process_index()), int(jax.process_count())


def input_workers(distribution=None):
    """(index, count) of the input pipeline this process feeds: which shard files it reads.

    A prepared directory is split by file (`tfktopic.data.shards.ShardReader`: worker i of n
    reads shards i, i + n, ...):

    * JAX (`keras.distribution`): one pipeline per process (`process_layout`);
    * TensorFlow `MultiWorkerMirroredStrategy`: one per worker of ``TF_CONFIG``
      (`tf_config_worker`);
    * anything else (one process, `MirroredStrategy`): one pipeline, ``(0, 1)``.

    Args:
        distribution: what `get_strategy` returned (TensorFlow: the strategy is checked;
            JAX: the process layout is global, the argument is not needed).

    Returns:
        (index, count) ints, 0 <= index < count.
    """
    if backend.is_jax():
        return process_layout()
    if backend.is_tensorflow() and distribution is not None:
        tf = _tf()
        if isinstance(distribution, tf.distribute.MultiWorkerMirroredStrategy):
            return tf_config_worker()
    return 0, 1


def tf_config_worker(raw=None):
    """(index, count) of this task among the training tasks of ``TF_CONFIG``.

    The training tasks are the ``chief`` (if any) followed by the ``worker`` list, the
    order in which `MultiWorkerMirroredStrategy` numbers them.

    Args:
        raw: the ``TF_CONFIG`` JSON (default: the environment variable).

    Returns:
        (index, count) ints.

    Raises:
        ValueError: ``TF_CONFIG`` is missing or malformed, or this task is not a chief or a
            worker (one line).

    Example:
    >>> tf_config_worker('{"cluster": {"worker": ["a:1", "b:2"]}, '
    ...                  '"task": {"type": "worker", "index": 1}}')
    (1, 2)
    """
    if raw is not None:
        config = json.loads(raw)
    else:
        config = _check_tf_config()
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    chiefs, workers = list(cluster.get("chief") or []), list(cluster.get("worker") or [])
    kind, index = task.get("type"), int(task.get("index", 0))
    if kind not in ("chief", "worker") or index >= len(chiefs if kind == "chief" else workers):
        raise ValueError(f"TF_CONFIG: task {kind!r} {index} is not a training task of the "
                         f"cluster (chief {len(chiefs)}, worker {len(workers)})")
    return (index if kind == "chief" else len(chiefs) + index), len(chiefs) + len(workers)


def _data_parallel_mesh():
    """(devices of the mesh, processes) of the active `keras.distribution.DataParallel`, or
    None when there is none (TensorFlow, or no distribution set)."""
    if not backend.is_jax():
        return None
    distribution = keras.distribution.distribution()
    mesh = getattr(distribution, "device_mesh", None)
    if mesh is None:
        return None
    return int(np.prod(mesh.shape)), process_layout()[1]


def pad_rows(batch, rows):
    """`batch` (a dict of numpy arrays [n, ...]) with zero rows appended up to `rows`.

    A zero row has ``mask`` 0 everywhere (no predicted token, so it adds nothing to a
    token sum: NLL, token counts, perplexity), an empty ``context_bow``, ``doc_targets`` 0
    and, where the batch has one, ``document`` -1 (an idle row,
    `tfktopic.evaluation.evaluate_perplexity`).

    Args:
        batch: dict of numpy arrays with a common leading size n <= `rows`.
        rows: the leading size wanted.

    Returns:
        The padded dict (`batch` itself when n == `rows`).
    """
    n = len(next(iter(batch.values())))
    if n == rows:
        return batch
    if n > rows:
        raise ValueError(f"pad_rows: the batch has {n} rows, more than {rows}")
    out = {}
    for key, value in batch.items():
        value = np.asarray(value)
        fill = np.full((rows - n, *value.shape[1:]), -1 if key == "document" else 0,
                       value.dtype)
        out[key] = np.concatenate([value, fill])
    return out


class ProcessBatches(keras.utils.PyDataset):
    """The numpy batches of one process under `keras.distribution.DataParallel` (JAX).

    Keras' JAX trainer assembles every step's global batch from each process's local
    batch (``jax.make_array_from_process_local_data``): every process must give the same
    number of rows, a number its local devices divide. Batch i here is batch i of `batches`

    * cut to this process's part when `batches` yields global batches (`local` False):
      rows ``[p b, (p + 1) b)`` of the global batch, b = global batch / processes (rounded
      up to a multiple of the process's devices, so no row of a partial batch is left
      out) -- the split Keras itself makes of a `tf.data.Dataset` (``rebatch(b).shard(P, p)``);
    * padded (`pad_rows`, mask-zero rows) to b with several processes, and to a multiple
      of the device count on one -- a last partial batch of an epoch or of an evaluation
      pass. Token sums (NLL, perplexity, an LSTM's loss) are unchanged; a document-level
      term of a topic model's loss (TCNLM's KL of a zero bag of words) counts the padded
      rows as empty documents, at most (devices - 1) rows once per epoch on one host.

    Args:
        batches: a `keras.utils.PyDataset` of model-contract dicts.
        devices: the devices of the mesh (all processes).
        process, processes: this process and the process count.
        local: `batches` already yields this process's part (a prepared directory read
            by file, `tfktopic.runs.prepared`) of ``batch_rows`` rows at most.
    """

    def __init__(self, batches, devices, process=0, processes=1, local=False):
        super().__init__()
        self.batches, self.devices = batches, int(devices)
        self.process, self.processes, self.local = int(process), int(processes), bool(local)

    def __len__(self):
        return len(self.batches)

    @property
    def num_batches(self):
        return self.batches.num_batches

    def on_epoch_begin(self):
        self.batches.on_epoch_begin()

    def on_epoch_end(self):
        self.batches.on_epoch_end()

    def __getitem__(self, index):
        batch = self.batches[index]
        rows = len(next(iter(batch.values())))
        if self.processes == 1:
            return pad_rows(batch, -(-rows // self.devices) * self.devices)
        if self.local:
            return pad_rows(batch, int(self.batches.batch_rows))
        # this process's rows of the global batch: ceil(global / processes), a multiple of
        # its devices (a partial last batch of an odd number of rows lost its last row
        # when this rounded down: measured on a prepared rGBN-RNN epoch)
        size = int(getattr(self.batches, "batch_size", None) or rows)
        local = max(1, self.devices // self.processes)
        part = -(-size // self.processes)                  # rounded up ...
        part = -(-part // local) * local                   # ... to a multiple of its devices
        start = self.process * part
        return pad_rows({k: np.asarray(v)[start:start + part] for k, v in batch.items()},
                        part)


def distribute_dataset(dataset):
    """Prepare a dataset of batches for `model.fit` under the active distribution.

    TensorFlow: our datasets are built from in-memory tensors (or read by file already,
    `tfktopic.runs.prepared`), so the default FILE auto-sharding of
    `MultiWorkerMirroredStrategy` fails; DATA sharding gives each worker every n-th
    element (global batch) instead -- unless the dataset says it is read by file
    (``process_local``: each worker already reads its own shard files), which gets
    `AutoShardPolicy.OFF`. Harmless for the other strategies; `model.fit` splits every
    global batch over the replicas.

    JAX with a `keras.distribution.DataParallel` (`jax_data_parallel`): numpy batches
    (`keras.utils.PyDataset`) become `ProcessBatches` -- this process's part of each
    global batch, partial batches padded with mask-zero rows so that the devices divide
    them -- and with several processes the distribution's ``auto_shard_dataset`` is
    turned off (the batches are this process's part already). Without a distribution the
    dataset is returned as it is.

    Args:
        dataset: a `tf.data.Dataset` (TensorFlow) or a `keras.utils.PyDataset` of global
            batches, or of this process's batches when it has ``process_local`` True.

    Returns:
        The dataset to give `model.fit`.

    Example:

    ```python
    model.fit(distribute_dataset(train_ds), epochs=2)
    ```
    """
    if not backend.is_tensorflow():
        mesh = _data_parallel_mesh()
        if mesh is None or not isinstance(dataset, keras.utils.PyDataset):
            return dataset
        devices, processes = mesh
        process = process_layout()[0]
        if processes > 1:
            keras.distribution.distribution().auto_shard_dataset = False
        return ProcessBatches(dataset, devices, process, processes,
                              local=bool(getattr(dataset, "process_local", False)))
    tf = _tf()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.OFF if getattr(dataset, "process_local", False)
        else tf.data.experimental.AutoShardPolicy.DATA)
    return dataset.with_options(options)


class _NoStrategy:
    """The one-device "strategy" of the other backends: `scope()` is a no-op context."""

    num_replicas_in_sync = 1

    def scope(self):
        return contextlib.nullcontext()


def _tf():
    """TensorFlow, imported on first use (only the TensorFlow backend needs it)."""
    import tensorflow as tf

    return tf


def _replica_context():
    """The tf.distribute replica context when more than one replica runs in sync, else None.

    Under another backend there is none: `keras.distribution` (JAX) works on global
    arrays, so a step's loss and metrics already are the global batch's.
    """
    if not backend.is_tensorflow():
        return None
    ctx = _tf().distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return None
    return ctx


def replica_sum(value):
    """Sum `value` over the replicas in sync (all-reduce); `value` itself on one replica.

    Call it inside a `train_step` / `test_step` (replica context). Outside a
    strategy, or with one replica, it is the identity.

    Args:
        value: a tensor or nested structure of tensors.

    Returns:
        The sum over replicas, identical on every replica.

    Example:

    ```python
    global_tokens = replica_sum(ops.sum(data["mask"]))
    ```
    """
    ctx = _replica_context()
    if ctx is None:
        return value
    tf = _tf()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, value)


def replica_share(count):
    """This replica's share `count / sum of count over replicas` of the global batch.

    A loss that is a mean over the replica's `count` units (tokens or
    documents), multiplied by its share, sums over replicas to the mean over
    the global batch, so the all-reduced (summed) gradients are the
    single-device gradients even when replicas hold different counts. With one
    replica the share is exactly 1.

    Args:
        count: float scalar, the replica's number of units (no gradient).

    Returns:
        float32 scalar in [0, 1] (the shares of all replicas sum to 1).

    Example:

    ```python
    scaled = loss * replica_share(num_tokens)   # loss = nll_sum / num_tokens
    ```
    """
    ctx = _replica_context()
    if ctx is None:
        return keras.ops.convert_to_tensor(1.0, "float32")
    tf = _tf()
    count = tf.stop_gradient(tf.cast(count, tf.float32))
    return tf.math.divide_no_nan(count, ctx.all_reduce(tf.distribute.ReduceOp.SUM, count))


def replica_mean(value, count):
    """The global-batch mean of a per-replica mean `value` over `count` units.

    `sum_r count_r * value_r / sum_r count_r`, identical on every replica, so a
    `keras.metrics.Mean` updated with it reports the global-batch value (the
    metric would otherwise average the replicas' means). With one replica it
    is `value` itself.

    Args:
        value: float scalar, the replica's mean over its `count` units.
        count: float scalar, the replica's number of units.

    Returns:
        float32 scalar.
    """
    ctx = _replica_context()
    if ctx is None:
        return value
    tf = _tf()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                          tf.cast(value, tf.float32) * replica_share(count))


def global_logs(metrics, compute):
    """The logs of a `train_step` / `test_step` computed from all replicas' metric states.

    Keras metrics accumulate per replica (their variables are summed only when
    read across replicas), and `fit` averages a step's per-replica logs, so
    ratios such as perplexity = exp(sum NLL / sum tokens) would come out as a
    mean of the replicas' ratios. This all-reduces the (sum-aggregated)
    variables of `metrics` in one call and evaluates `compute` on the sums, so
    every replica returns the global-batch logs, identical to one device. With
    one replica it simply returns `compute()`.

    Args:
        metrics: the model's metrics (`model.metrics`).
        compute: a function of no arguments returning the logs dict from the
            metrics' results (read inside a `keras.StatelessScope`).

    Returns:
        The logs dict.

    Example:

    ```python
    return global_logs(self.metrics, lambda: {
        "loss": self.loss_tracker.result(), "ppl": self.perplexity.result()})
    ```
    """
    ctx = _replica_context()
    if ctx is None:
        return compute()
    tf = _tf()
    # Keras metric variables are sum-aggregated (totals, counts); any other
    # kind is left at its local value.
    variables = [v for m in metrics for v in m.variables if v.aggregation == "sum"]
    # The all-reduce takes its destination from each value's device; a read of
    # a sync-on-read variable has none under multi-worker, an identity in the
    # replica's device scope has.
    summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                            [tf.identity(v.value) for v in variables])
    with keras.StatelessScope(state_mapping=list(zip(variables, summed))):
        return compute()
