"""The training and evaluation steps of `TopicLanguageModel`, one function per backend.

Every model's loss comes from its own `objective(data, training)` (the forward
pass's internals: KL terms, topic samples, per-document ELBOs), not from Keras'
``compute_loss(y, y_pred)``, which sees only the model's output: the stock
steps would need a second forward pass per batch for the objective (twice the
cost of the step's forward half) and could not hand the same topic samples to
`after_optimizer_step`. So the step is written here, around the objective, once
per backend, and `TopicLanguageModel.train_step` / `test_step` dispatch on
`tfktopic.backend.name()`:

* TensorFlow: a `tf.GradientTape`, `optimizer.scale_loss`, and the loss weighted
  by this replica's share of the global batch (`tfktopic.distribute`), so the
  summed replica gradients under a `tf.distribute` strategy are the global
  batch's.
* JAX: Keras' JAX trainer calls ``train_step(state, data)`` with ``state =
  (trainable, non_trainable, optimizer, metrics variable values)`` and expects
  ``(logs, new_state)``. The objective runs in a `keras.StatelessScope` under
  `jax.value_and_grad`; the optimizer's `stateless_apply` makes the new weights;
  `after_optimizer_step` (rGBN-RNN's TLASGR `assign`s to Phi and Pi) and the
  metric updates run in a second scope that maps every variable, and the new
  values of all of them (SeedGenerator states included) are read back out.
"""

import keras

from tfktopic import backend
from tfktopic.distribute import replica_share

__all__ = ["train_step", "test_step"]


def train_step(model, *args):
    """One optimizer step of `model` on its ``objective(...)["loss"]`` (backend's signature).

    Args:
        model: a `TopicLanguageModel`.
        *args: ``(data,)`` under TensorFlow, ``(state, data)`` under JAX.

    Returns:
        The logs dict (JAX: ``(logs, new_state)``).

    Raises:
        NotImplementedError: under PyTorch (not supported yet).
    """
    if backend.is_jax():
        return _jax_train_step(model, *args)
    if backend.is_tensorflow():
        return _tf_train_step(model, *args)
    raise NotImplementedError(f"tfktopic's train_step runs on TensorFlow and JAX, not on "
                              f"Keras' {backend.name()} backend")


def test_step(model, *args):
    """One evaluation step (`objective` with ``training=False``, then the metrics).

    Args:
        model: a `TopicLanguageModel`.
        *args: ``(data,)`` under TensorFlow / PyTorch, ``(state, data)`` under JAX.

    Returns:
        The logs dict (JAX: ``(logs, new_state)``).
    """
    if backend.is_jax():
        return _jax_test_step(model, *args)
    data, _, _ = keras.utils.unpack_x_y_sample_weight(args[0])
    terms = model.objective(data, training=False)
    return model._report(model._loss(terms), terms)


# ---------------------------------------------------------------------- TensorFlow
def _tf_train_step(model, data):
    import tensorflow as tf

    data, _, _ = keras.utils.unpack_x_y_sample_weight(data)
    with tf.GradientTape() as tape:
        terms = model.objective(data, training=True)
        loss = model._loss(terms)
        # Weighted by this replica's share of the global batch's units, the
        # summed replica gradients are the global batch's gradient.
        scaled = model.optimizer.scale_loss(loss * replica_share(terms["units"]))
    gradients = tape.gradient(scaled, model.trainable_weights)
    model.optimizer.apply_gradients(zip(gradients, model.trainable_weights))
    model.after_optimizer_step(data, terms)
    return model._report(loss, terms)


# ----------------------------------------------------------------------------- JAX
def _read_back(scope, variables, fallback):
    """The values `scope` holds for `variables` (the `fallback` value where it holds none)."""
    values = []
    for variable, old in zip(variables, fallback):
        new = scope.get_current_value(variable)
        values.append(old if new is None else new)
    return values


def _jax_objective(model, data, training, trainable, non_trainable, optimizer_values=()):
    """(scaled loss, (loss, terms, new non-trainable values)) of one batch, stateless."""
    mapping = [*zip(model.trainable_variables, trainable),
               *zip(model.non_trainable_variables, non_trainable)]
    if optimizer_values:
        mapping += list(zip(model.optimizer.variables, optimizer_values))
    with keras.StatelessScope(state_mapping=mapping, collect_losses=True) as scope:
        terms = model.objective(data, training=training)
        loss = model._loss(terms)
        # `add_loss` calls inside the scope are collected by it, not by the layers.
        if scope.losses:
            loss = loss + sum(scope.losses)
        scaled = model.optimizer.scale_loss(loss) if training else loss
    return scaled, (loss, terms, _read_back(scope, model.non_trainable_variables,
                                            non_trainable))


def _jax_train_step(model, state, data):
    import jax

    trainable, non_trainable, optimizer_values, metric_values = state
    data, _, _ = keras.utils.unpack_x_y_sample_weight(data)

    def scaled_loss(trainable_values):
        return _jax_objective(model, data, True, trainable_values, non_trainable,
                              optimizer_values)

    (_, (loss, terms, non_trainable)), gradients = jax.value_and_grad(
        scaled_loss, has_aux=True)(trainable)
    trainable, optimizer_values = model.optimizer.stateless_apply(
        optimizer_values, gradients, trainable)
    # The second scope maps every variable: `after_optimizer_step` may assign to any
    # (TLASGR's Phi and Pi, a sampler's SeedGenerator state), the metrics to theirs.
    groups = [(model.trainable_variables, trainable),
              (model.non_trainable_variables, non_trainable),
              (model.optimizer.variables, optimizer_values),
              (model.metrics_variables, metric_values)]
    mapping = [pair for variables, values in groups for pair in zip(variables, values)]
    with keras.StatelessScope(state_mapping=mapping) as scope:
        model.after_optimizer_step(data, terms)
        logs = model._report(loss, terms)
    new = [_read_back(scope, variables, values) for variables, values in groups]
    return logs, tuple(new)


def _jax_test_step(model, state, data):
    trainable, non_trainable, metric_values = state
    data, _, _ = keras.utils.unpack_x_y_sample_weight(data)
    _, (loss, terms, non_trainable) = _jax_objective(model, data, False, trainable,
                                                     non_trainable)
    mapping = [*zip(model.trainable_variables, trainable),
               *zip(model.non_trainable_variables, non_trainable),
               *zip(model.metrics_variables, metric_values)]
    with keras.StatelessScope(state_mapping=mapping) as scope:
        logs = model._report(loss, terms)
    return logs, (trainable, non_trainable,
                  _read_back(scope, model.metrics_variables, metric_values))
