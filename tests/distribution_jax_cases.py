"""`keras.distribution` data-parallel cases, run by tests/test_distribution_jax.py in fresh
``KERAS_BACKEND=jax`` subprocesses (tests/backends.py) whose host platform has 2 devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``: the device count is fixed when JAX
starts). Each function takes and returns numpy / plain values only.

The models and batches are those of `tests.models_backend_cases` (small, dropout 0).
"""

import contextlib
import os

import keras
import numpy as np

from tests import models_backend_cases as cases

SEED = 1
STEPS = 2


def _fit_first_steps(family, scope, dataset=False):
    """Build `family` in `scope`, take `STEPS` optimizer steps on its batch (the same batch
    each step, no shuffling): the step losses, every weight (Phi/Pi included) and the number
    of devices the first weight lives on."""
    with scope:
        model, data = cases.build(family, seed=SEED)
        keras.utils.set_random_seed(SEED)
        size = data["tokens"].shape[0]
        if dataset:
            import tensorflow as tf
            inputs = tf.data.Dataset.from_tensor_slices(data).batch(size).repeat(STEPS)
            # one step per epoch, so the history holds each step's loss
            history = model.fit(inputs, epochs=STEPS, steps_per_epoch=1, verbose=0)
        else:
            history = model.fit(data, epochs=STEPS, batch_size=size, verbose=0, shuffle=False)
        devices = len(model.trainable_variables[0].value.sharding.device_set)
        return {"loss": np.asarray(history.history["loss"]),
                # by position: a second model in the process gets other layer names
                "weights": [np.asarray(v.value) for v in model.weights],
                "paths": [v.path for v in model.weights],
                "devices": devices}


def first_updates(families, devices=(1, 2)):
    """Each family's first `STEPS` updates on 1 device (no distribution) and on 2 devices
    (`keras.distribution.DataParallel`): ``{family: {devices: result}}`` (`_fit_first_steps`)."""
    import jax

    out = {}
    for family in families:
        out[family] = {}
        for count in devices:
            scope = contextlib.nullcontext()
            if count > 1:
                scope = keras.distribution.DataParallel(devices=jax.devices()[:count]).scope()
            out[family][count] = _fit_first_steps(family, scope)
    return out


def process_first_updates(family):
    """One process of a multi-process job (`tfktopic.distribute.get_strategy("data_parallel")`
    from the ``KERAS_DISTRIBUTION_*`` variables): the first updates from a tf.data pipeline of
    global batches, which Keras shards per process; with this process's index and count."""
    from tfktopic.distribute import get_strategy, process_layout

    distribution = get_strategy("data_parallel")
    result = _fit_first_steps(family, distribution.scope(), dataset=True)
    index, count = process_layout()
    return {**result, "process": index, "processes": count,
            "mesh_devices": len(distribution.device_mesh.devices.flatten())}


def shard_keys(directory):
    """The (file, row) keys of the examples this process's `ShardReader` reads (the reader's
    default worker layout) and the layout."""
    from tfktopic.data.shards import ShardReader
    from tfktopic.distribute import get_strategy, process_layout

    get_strategy("data_parallel")
    reader = ShardReader(directory, "sentences", shuffle=True, seed=0)
    keys = [[int(row["document_index"]), int(row.get("sentence_index", -1)),
             *[int(t) for t in row["tokens"]]] for row in reader]
    return {"keys": keys, "layout": list(process_layout()),
            "pid": os.getpid()}


def prepared_run(directory, out, strategies=("data_parallel",), batch_size=32, epochs=1,
                 max_documents=None, model="lstm",
                 overrides=("hidden_dim=16", "embedding_dim=16")):
    """`tfktopic.runs.train_run` of a tiny `model` from a prepared directory (None: the first
    `max_documents` of the Lee corpus, in memory), once per strategy
    (in this order, in this process; out/process<id>/<strategy>): for each, the shard files every
    `ShardReader` of the run read (its DEBUG log), the training and validation steps of
    every epoch, the results and the trained weights; with this process's layout."""
    import logging

    from tfktopic import runs
    from tfktopic.distribute import process_layout

    logger = logging.getLogger("tfktopic.data.shards")
    results = {}
    for strategy in strategies:
        read, steps = [], {"train": [], "valid": []}

        class _Read(logging.Handler):
            def emit(self, record):
                directory, worker, count, _, files = record.args
                read.append([os.path.basename(str(directory)), int(worker), int(count),
                             list(files)])

        class _Steps(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                steps["train"].append(0)

            def on_train_batch_end(self, batch, logs=None):
                steps["train"][-1] += 1

            def on_test_begin(self, logs=None):
                steps["valid"].append(0)

            def on_test_batch_end(self, batch, logs=None):
                steps["valid"][-1] += 1

        handler = _Read()
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        try:
            # one run directory per process (a run directory is locked by its process)
            run_out = os.path.join(
                out, f"process{os.environ.get('KERAS_DISTRIBUTION_PROCESS_ID', '0')}", strategy)
            data = ({"prepared": directory} if directory is not None
                    else {"corpus": "lee", "max_documents": max_documents})
            summary = runs.train_run(model, run_out, **data, strategy=strategy,
                                     epochs=epochs, batch_size=batch_size, verbose=0,
                                     log=lambda *a, **k: None, topic_report=False,
                                     overrides=list(overrides),
                                     callbacks=[_Steps()])
        finally:
            logger.removeHandler(handler)
        trained = keras.saving.load_model(os.path.join(run_out, "model.keras"), compile=False)
        import json

        with open(os.path.join(run_out, "run.json"), encoding="utf-8") as handle:
            history = json.load(handle)["progress"]["history"]
        results[strategy] = {
            "read": read, "steps": steps, "test_ppl": float(summary["test"]["perplexity"]),
            "test_tokens": int(summary["test"]["num_tokens"]),
            "history": history, "weights": [np.asarray(w) for w in trained.get_weights()]}
    index, count = process_layout()
    return {"runs": results, "process": index, "processes": count}
