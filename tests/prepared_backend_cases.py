"""Batches of a prepared directory under the backend of the calling process.

`tests/library/test_train_prepared.py` calls these in-process and in a fresh
``KERAS_BACKEND=jax`` process (`tests.backends.run_in_backend`) and compares them.
"""

import itertools

import numpy as np


def training_chunks(directory, model_name, batch_size, seed, initial_epoch, count):
    """The first `count` batches of a chunk model's training stream from a prepared directory.

    Args:
        directory: the prepared directory (a str).
        model_name: a chunk model.
        batch_size, seed, initial_epoch: as `PreparedData.training_stream`.
        count: batches to return.

    Returns:
        dict: ``steps`` (per epoch) and, per key of the batches, the first `count`
        batches concatenated (numpy).
    """
    from tfktopic import runs
    from tfktopic.runs.prepared import load_prepared

    data = load_prepared(directory, model_name, runs.preset_settings(model_name, "small")["data"])
    stream, steps = data.training_stream(int(batch_size), seed=int(seed),
                                         initial_epoch=int(initial_epoch))
    batches = [{key: np.asarray(value) for key, value in batch.items()}
               for batch in itertools.islice(iter(stream), int(count))]
    return {"steps": steps, **{key: np.concatenate([b[key] for b in batches])
                               for key in batches[0]}}
