"""The cases of `tests/test_bayes_backends.py`: functions of numpy inputs that return numpy
results, run in-process (TensorFlow) and under JAX by `tests.backends.run_in_backend`.

Nothing here imports TensorFlow: the same code runs on every Keras backend.
"""

import keras
import numpy as np

from tfktopic.bayes import augmentation
from tfktopic.bayes.augmentation import binomial, crt, multinomial_split
from tfktopic.bayes.counter_random import counter_uniform, random_key, stateless_standard_normal
from tfktopic.bayes.sgmcmc import PSGLD, SGLD
from tfktopic.bayes.tlasgr import TLASGRTopics


def counter_draws(seed, step, stream, counters, shape):
    """Keys, uniforms (one- and two-word counters) and normals (23 and 16 bits)."""
    key = random_key(seed, step, stream)
    counters = np.asarray(counters, np.uint32)
    return {
        "key": np.asarray(key),
        "uniform": np.asarray(counter_uniform(key, counters)),
        "uniform_pair": np.asarray(counter_uniform(key, (counters, counters[::-1]))),
        "normal23": np.asarray(stateless_standard_normal(tuple(shape), seed, stream, bits=23,
                                                         step=step)),
        "normal16": np.asarray(stateless_standard_normal(tuple(shape), seed, stream, bits=16,
                                                         step=step)),
    }


def augmentation_draws(counts, concentration, probs, phi, theta, key, offset, reference=False):
    """CRT, binomial and multinomial split of the same counts under one key.

    `reference=True` runs the keras.ops reference also where the backend has a fast
    kernel (TensorFlow's ragged one).
    """
    ragged = augmentation._ragged
    if reference:
        augmentation._ragged = lambda: False
    try:
        key = random_key(key)
        phi_counts, topic_counts = multinomial_split(counts, phi, theta, key, offset)
        out = {"crt": crt(counts, concentration, key, offset),
               "binomial": binomial(counts, probs, key, offset),
               "phi_counts": phi_counts, "topic_counts": topic_counts}
        if keras.backend.backend() == "jax":
            # The reference compiles under jax.jit (static shapes, while loops).
            import jax
            jitted = jax.jit(lambda c, r, p, f, t: (
                crt(c, r, key, offset), binomial(c, p, key, offset),
                *multinomial_split(c, f, t, key, offset)))(
                counts, concentration, probs, phi, theta)
            out["jit"] = [np.asarray(x) for x in jitted]
    finally:
        augmentation._ragged = ragged
    return {k: (v if k == "jit" else np.asarray(v)) for k, v in out.items()}


def compiled_update(topics):
    """`topics.update` compiled the backend's way: a `tf.function` on TensorFlow; on JAX a
    jax.jit of the stateless update (weights in, new weights out, as Keras' JAX trainer)
    whose results are assigned back."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        return tf.function(topics.update)
    import jax
    weights = topics.weights

    @jax.jit
    def stateless(values, bow, thetas):
        with keras.StatelessScope(state_mapping=list(zip(weights, values))) as scope:
            stats = topics.update(bow, thetas)
        return [scope.get_current_value(v) for v in weights], stats

    def update(bow, thetas):
        values, stats = stateless([v.value for v in weights], bow, thetas)
        for variable, value in zip(weights, values):
            variable.assign(value)
        return stats

    return update


def tlasgr_update(bow, thetas, seed, steps=1):
    """Augmented counts of the first step, then Phi / Pi / preconditioners after `steps`
    TLASGR updates of a 2-layer rGBN; run twice from a fresh sampler (reproducibility)."""
    runs = []
    for _ in range(2):
        topics = TLASGRTopics(vocab_size=bow.shape[-1], topic_sizes=[t.shape[-1] for t in thetas],
                              num_documents=50, seed=int(seed))
        phi_counts, pi_counts = topics.augment(bow, thetas)
        stats = [topics.update(bow, thetas) for _ in range(steps)]
        runs.append({
            "phi_counts": [np.asarray(c) for c in phi_counts],
            "pi_counts": [np.asarray(c) for c in pi_counts],
            "phi": [np.asarray(v) for v in topics.phi],
            "pi": [np.asarray(v) for v in topics.pi],
            "phi_preconditioners": [np.asarray(v) for v in topics.phi_preconditioners],
            "iterations": int(np.asarray(topics.iterations)),
            "change": float(np.asarray(stats[-1]["phi1_change"])),
        })
    out = {"first": runs[0], "second": runs[1]}
    if keras.backend.backend() == "jax":
        out["jit"] = _jitted_tlasgr_updates(bow, thetas, seed, steps)
    return out


def _jitted_tlasgr_updates(bow, thetas, seed, steps):
    """Phi / Pi after `steps` updates, each a jax.jit of the stateless update (the way
    Keras' JAX trainer runs a train step: weights in, new weights out)."""
    import jax

    topics = TLASGRTopics(vocab_size=bow.shape[-1], topic_sizes=[t.shape[-1] for t in thetas],
                          num_documents=50, seed=int(seed))
    weights = topics.weights

    @jax.jit
    def update(values, bow, thetas):
        with keras.StatelessScope(state_mapping=list(zip(weights, values))) as scope:
            topics.update(bow, thetas)
        return [scope.get_current_value(v) for v in weights]

    values = [v.value for v in weights]
    for _ in range(steps):
        values = update(values, bow, thetas)
    by_name = {v.path: np.asarray(value) for v, value in zip(weights, values)}
    return {"phi": [by_name[v.path] for v in topics.phi],
            "pi": [by_name[v.path] for v in topics.pi],
            "iterations": int(by_name[topics.iterations.path])}


def langevin_steps(optimizer, weights, x, y, steps=1):
    """Weights of a tiny Dense model after `steps` SGLD / pSGLD steps, run twice."""
    runs = []
    for _ in range(2):
        model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(y.shape[1]),
                                  keras.layers.Dense(y.shape[1])])
        model.set_weights([np.asarray(w, np.float32) for w in weights])
        cls = {"sgld": SGLD, "psgld": PSGLD}[optimizer]
        model.compile(optimizer=cls(learning_rate=0.05, num_examples=20, seed=7), loss="mse")
        for _ in range(steps):
            model.train_on_batch(x, y)
        runs.append([np.asarray(w) for w in model.get_weights()])
    return {"first": runs[0], "second": runs[1]}
