"""Backend-neutral cases of tfktopic.distributions, run in-process (TensorFlow)
and under JAX by tests/test_distributions.py (tests/backends.py run_in_backend).

Each function takes numpy arrays and returns the values and the gradients of
their sum with respect to the float inputs, computed with the running backend's
own autodiff.
"""

import keras
import numpy as np

from tfktopic import distributions


def _value_and_grads(fn, args):
    """fn(*args) and d sum(fn) / d args under the running Keras backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf
        variables = [tf.Variable(a) for a in args]
        with tf.GradientTape() as tape:
            value = fn(*variables)
            total = tf.reduce_sum(value)
        return np.asarray(value), [np.asarray(g) for g in tape.gradient(total, variables)]
    if backend == "jax":
        import jax
        import jax.numpy as jnp
        value = fn(*[jnp.asarray(a) for a in args])
        grads = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=tuple(range(len(args))))(
            *[jnp.asarray(a) for a in args])
        return np.asarray(value), [np.asarray(g) for g in grads]
    raise NotImplementedError(backend)


def weibull_gamma_kl(k, lam, alpha, beta):
    value, grads = _value_and_grads(distributions.weibull_gamma_kl, [k, lam, alpha, beta])
    return {"value": value, "grads": grads}


def weibull_mean(k, lam):
    value, grads = _value_and_grads(distributions.weibull_mean, [k, lam])
    return {"value": value, "grads": grads}


def weibull_sample(u, k, lam):
    value, grads = _value_and_grads(lambda k, lam: distributions.weibull_sample(u, k, lam),
                                    [k, lam])
    return {"value": value, "grads": grads}


def gaussian_standard_kl(mean, log_std):
    value, grads = _value_and_grads(distributions.gaussian_standard_kl, [mean, log_std])
    return {"value": value, "grads": grads}


def poisson_log_prob(x, rate):
    value, grads = _value_and_grads(lambda rate: distributions.poisson_log_prob(x, rate), [rate])
    return {"value": value, "grads": grads}


def bernoulli_log_prob_from_logits(x, logits):
    value, grads = _value_and_grads(
        lambda logits: distributions.bernoulli_log_prob_from_logits(x, logits), [logits])
    return {"value": value, "grads": grads}


def all_cases(cases):
    """Run every (name, kwargs) of `cases` in one process (one JAX start)."""
    return {name: globals()[name](**kwargs) for name, kwargs in cases}
