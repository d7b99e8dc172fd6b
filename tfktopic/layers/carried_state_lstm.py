"""A stacked LSTM whose state is carried across calls, per stream, with resets.

Truncated backpropagation through time over parallel document streams
(Zaremba et al. 2014; Zheng, Vafa & Blei 2023, ``train.py``'s
``repackage_hidden``): each call runs its `keras.layers.LSTM` layers (by
`HoistedLSTM`'s path on a CPU, `run_lstm`) over one window of T steps of B streams, starting from the state the previous call
left in row b, zeroed where ``reset[b] = 1`` (a new document starts in that
slot):

    (h_0, c_0)_b = (1 - reset_b) * (h_T, c_T)_b of the previous window

Gate order: the weights are `keras.layers.LSTM`'s, gates (i, f, c, o).

The carried state lives in non-trainable variables of shape
``[max_streams, units]`` per layer, so it works inside `model.fit`,
`model.evaluate` and plain calls, and is saved with the weights. Gradients
stop at the window boundary (a variable read is a constant). There are two
independent state sets: one for ``training=True`` calls and one for
``training=False`` calls, so a validation pass between training epochs does
not disturb the training streams. A batch may have fewer rows than
`max_streams` (rows ``[:B]`` are used). Distribution strategies with several
replicas are not supported (the streams' states are not split across them).
"""

import keras
from keras import ops

from tfktopic import backend
from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.layers.initialization import check_initialization, lstm_initializers

__all__ = ["CarriedStateLSTM"]

_MODES = ("train", "eval")


@keras.saving.register_keras_serializable(package="tfktopic")
class CarriedStateLSTM(keras.layers.Layer):
    """Stacked LSTM layers with state carried between calls (reset per stream).

    Args:
        units: LSTM units per layer.
        num_layers: stacked layers.
        max_streams: the most parallel streams (batch rows) a call may have.
        dropout: dropout on each layer's output (Zaremba-style, non-recurrent).
        initialization: "keras" (Keras' LSTM defaults) or "torch" (PyTorch's:
            every weight and bias U(±1/sqrt(units)), no forget-gate offset;
            `tfktopic.layers.initialization`).

    Call args:
        inputs: float [B, T, D] (B <= max_streams).
        reset: float [B]; 1 zeroes row b's carried state before this window.
        training: dropout, and which state set is used.
        carry: False starts every row from a zero state and leaves the
            carried states untouched (any batch size; e.g. a served model).

    Returns:
        float [B, T, units], the top layer's outputs.

    Example:
    >>> layer = CarriedStateLSTM(8, max_streams=2)
    >>> first = layer(np.ones((2, 3, 4), "float32"), np.ones(2, "float32"))  # doctest: +SKIP
    >>> second = layer(np.ones((2, 3, 4), "float32"), np.zeros(2, "float32"))  # doctest: +SKIP
    """

    def __init__(self, units, num_layers=1, max_streams=64, dropout=0.0, initialization="keras",
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("units", units), ("num_layers", num_layers),
                            ("max_streams", max_streams)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.units = int(units)
        self.num_layers = int(num_layers)
        self.max_streams = int(max_streams)
        self.dropout = float(dropout)
        self.initialization = check_initialization(initialization)
        self.lstms = [keras.layers.LSTM(self.units, return_sequences=True, return_state=True,
                                        name=f"lstm_{i}", dtype=self.dtype_policy,
                                        **lstm_initializers(self.initialization, self.units))
                      for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
                         for _ in range(self.num_layers)]

    def build(self, input_shape):
        strategy = _tf_distribution_strategy()
        if strategy is not None and strategy.num_replicas_in_sync > 1:
            raise ValueError("CarriedStateLSTM: the carried stream states are not split across "
                             f"replicas; train without a distribution strategy "
                             f"(got {type(strategy).__name__} with "
                             f"{strategy.num_replicas_in_sync} replicas)")
        shape = tuple(input_shape)
        for lstm in self.lstms:
            lstm.build(shape)
            shape = shape[:-1] + (self.units,)
        self.states = {
            mode: [[self.add_weight(shape=(self.max_streams, self.units), initializer="zeros",
                                    trainable=False, name=f"{mode}_{kind}_{i}")
                    for kind in ("h", "c")] for i in range(self.num_layers)]
            for mode in _MODES}
        self.built = True

    def call(self, inputs, reset, training=False, carry=True):
        if not carry:  # a fresh start, the carried states untouched (e.g. serving)
            x = inputs
            for lstm, dropout in zip(self.lstms, self.dropouts):
                x = dropout(run_lstm(lstm, x, training=training)[0], training=training)
            return x
        states = self.states["train" if training else "eval"]
        rows = ops.shape(inputs)[0]
        keep = 1.0 - ops.cast(ops.reshape(reset, (-1, 1)), inputs.dtype)
        x = inputs
        for lstm, dropout, layer_states in zip(self.lstms, self.dropouts, states):
            initial = [ops.cast(ops.convert_to_tensor(v)[:rows], x.dtype) * keep
                       for v in layer_states]
            x, h, c = run_lstm(lstm, x, training=training, initial_state=initial)
            for variable, value in zip(layer_states, (h, c)):
                variable.assign(ops.slice_update(variable.value, (0, 0),
                                                 ops.cast(ops.stop_gradient(value),
                                                          variable.dtype)))
            x = dropout(x, training=training)
        return x

    def reset_states(self):
        """Zero every carried state (both sets)."""
        for mode in _MODES:
            for layer_states in self.states[mode]:
                for variable in layer_states:
                    variable.assign(ops.zeros_like(variable.value))

    def compute_output_shape(self, input_shape, reset_shape=None):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "num_layers": self.num_layers,
                "max_streams": self.max_streams, "dropout": self.dropout,
                "initialization": self.initialization}


def _tf_distribution_strategy():
    """The active `tf.distribute` strategy under TensorFlow, else None (JAX's
    `keras.distribution` is not checked here)."""
    if not backend.is_tensorflow():
        return None
    import tensorflow as tf
    return tf.distribute.get_strategy() if tf.distribute.has_strategy() else None
