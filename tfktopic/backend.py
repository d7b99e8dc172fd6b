"""The one place that asks which Keras backend runs (TensorFlow, JAX or PyTorch).

Model, layer and sampler code is written once in `keras.ops` / `keras.random`.
Where a backend has a faster kernel of its own (TensorFlow's custom-gradient
time loops, `tf.distribute`'s all-reduce), the backend-neutral code asks this
module, the way `keras.layers.LSTM` asks whether cuDNN can run, and falls back
to the `keras.ops` reference everywhere else.

Example:
>>> name() in ("tensorflow", "jax", "torch")
True
>>> is_tensorflow() == (name() == "tensorflow")
True
"""

from tfktopic.errors import TfktopicError

__all__ = ["name", "is_tensorflow", "is_jax", "require_tensorflow", "compile_function"]


def name():
    """The running Keras backend: ``"tensorflow"``, ``"jax"`` or ``"torch"``.

    Keras is imported here, on first use, not with this module: the data modules ask
    which backend runs only when they build a dataset, so `tfktopic prepare` (numpy
    only) never starts Keras and its backend."""
    import keras

    return keras.backend.backend()


def is_tensorflow():
    """True under the TensorFlow backend (tf.data, tf.distribute, SavedModel export)."""
    return name() == "tensorflow"


def is_jax():
    """True under the JAX backend (`keras.distribution`)."""
    return name() == "jax"


def require_tensorflow(feature):
    """Raise a one-line `TfktopicError` unless the TensorFlow backend runs.

    Args:
        feature: what needs TensorFlow, e.g. ``"SavedModel export"``.

    Raises:
        TfktopicError: under another backend, naming the feature and the backend.
    """
    if not is_tensorflow():
        raise TfktopicError(f"{feature} needs the TensorFlow backend; this process runs "
                            f"Keras on {name()} (set KERAS_BACKEND=tensorflow)")


def compile_function(fn):
    """`fn` compiled for the running backend: `tf.function` on TensorFlow (retracing
    reduced, no autograph: `fn` is written in `keras.ops` control flow, as `jax.jit`
    needs; autograph's conversion once called one converted method in place of another in
    a long training process), `jax.jit` on JAX, `fn` itself elsewhere (eager).

    Example:
    >>> import keras
    >>> float(compile_function(lambda x: x * 2.0)(keras.ops.ones(())))
    2.0
    """
    if is_tensorflow():
        import tensorflow as tf
        return tf.function(fn, reduce_retracing=True, autograph=False)
    if is_jax():
        import jax
        return jax.jit(fn)
    return fn
