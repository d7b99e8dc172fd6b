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
