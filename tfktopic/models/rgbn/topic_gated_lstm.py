"""rGBN-RNN's topic-gated stacked LSTM (Guo et al., ICML 2020, eq. 4).

Layer l of the language model is an LSTM whose output H^l_t is coupled with the
sentence's (max-normalised) topic proportions theta^l_j by a GRU-like gate

    z = sigmoid(theta U_z + H W_z + b_z)
    r = sigmoid(theta U_r + H W_r + b_r)
    h_hat = tanh(theta U_h + (r * H) W_h + b_h)
    a = z * h_hat + (1 - z) * H            (orientation "paper", eq. 4)
    a = (1 - z) * h_hat + z * H            (orientation "code", released code)

The two orientations are the same family up to z -> 1 - z; they differ in how
the bias initialisation reads. The released code starts all biases at 1.0 with
the "code" orientation, so the gate initially passes mostly the LSTM output; the
"paper" orientation reproduces that with b_z = -1 (reference rgbn_rnn.md §3.3).

**Where the recurrence lives** (reference §3.4): LSTM^l's recurrence uses only
its own previous state (h^l_{t-1}, c^l_{t-1}) -- the raw LSTM output, never the
gated a^l_{t-1} -- and the (dropped) gate output of the layer below. The gate
is a pointwise-in-time function of (theta^l_j, H^l_t). So a stack can be run
layer by layer: one LSTM over all steps (`run_lstm`), the gate applied
to all steps at once, the result fed to the next layer (`TopicGatedLSTMStack`).
`TopicGatedLSTMCell` is the same computation one step at a time (generation,
and the reference the fast stack is tested against).

Gate order: each LSTM^l is a `keras.layers.LSTMCell`'s weights, gates (i, f, c, o)
(the package's one order); the topic gate's (z, r, h_hat) are separate.
"""

import keras
from keras import ops

from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.layers.initialization import check_initialization, lstm_initializers

__all__ = ["GATE_ORIENTATIONS", "TopicGate", "TopicGatedLSTMCell", "TopicGatedLSTMStack"]

GATE_ORIENTATIONS = ("paper", "code")


def _default_bias_init(orientation):
    # Released code: all three biases 1.0 with a = (1 - z) h_hat + z H, i.e.
    # z ~ 0.73 keeps mostly the LSTM output. "paper" orientation: b_z = -1 gives
    # the same starting behaviour (reference rgbn_rnn.md §3.3).
    return (1.0, 1.0, 1.0) if orientation == "code" else (-1.0, 1.0, 1.0)


def _check_gate_args(orientation, bias_init, kernel_scale):
    if orientation not in GATE_ORIENTATIONS:
        raise ValueError(f"orientation must be one of {GATE_ORIENTATIONS}, got {orientation!r}")
    if bias_init is not None:
        bias_init = tuple(float(b) for b in bias_init)
        if len(bias_init) != 3:
            raise ValueError(f"bias_init must be (b_z, b_r, b_h), got {bias_init}")
    if not float(kernel_scale) > 0:
        raise ValueError(f"kernel_scale must be > 0, got {kernel_scale}")
    return bias_init


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicGate(keras.layers.Layer):
    """The GRU-like topic coupling a = g(theta, H) of rGBN-RNN (eq. 4).

    Args:
        units: H, the width of the LSTM output (and of a).
        orientation: "paper" (a = z h_hat + (1 - z) H, eq. 4) or "code"
            (a = (1 - z) h_hat + z H, the released code).
        bias_init: initial (b_z, b_r, b_h); `None` picks the released code's
            starting point for the orientation: (1, 1, 1) for "code",
            (-1, 1, 1) for "paper".
        kernel_scale: U and W start uniform in [-scale, scale] (code: 0.05).
        seed: initializer seed.

    Call args:
        hidden: float [..., T, H] or [..., H], the LSTM output.
        theta: float [..., K] (constant over time; broadcast over T when
            `hidden` has one more axis).

    Returns:
        float with the shape of `hidden`.

    Example:
    >>> gate = TopicGate(8)
    >>> tuple(gate(keras.ops.ones((2, 5, 8)), keras.ops.ones((2, 3))).shape)
    (2, 5, 8)
    """

    def __init__(self, units, orientation="paper", bias_init=None, kernel_scale=0.05, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        if int(units) < 1:
            raise ValueError(f"units must be >= 1, got {units}")
        self.units = int(units)
        self.orientation = orientation
        self.bias_init = _check_gate_args(orientation, bias_init, kernel_scale)
        self.kernel_scale = float(kernel_scale)
        self.seed = seed

    def build(self, hidden_shape, theta_shape):
        H, K = self.units, int(theta_shape[-1])
        if hidden_shape[-1] is not None and int(hidden_shape[-1]) != H:
            raise ValueError(f"hidden has {hidden_shape[-1]} features, the gate expects units={H}")
        init = lambda i: keras.initializers.RandomUniform(-self.kernel_scale, self.kernel_scale,
                                                          seed=None if self.seed is None
                                                          else self.seed + i)
        b_z, b_r, b_h = self.bias_init or _default_bias_init(self.orientation)
        # theta -> [z | r | h_hat] pre-activations; H -> [z | r]; (r * H) -> h_hat.
        self.theta_kernel = self.add_weight(shape=(K, 3 * H), initializer=init(0),
                                            name="theta_kernel")
        self.hidden_kernel = self.add_weight(shape=(H, 2 * H), initializer=init(1),
                                             name="hidden_kernel")
        self.candidate_kernel = self.add_weight(shape=(H, H), initializer=init(2),
                                                name="candidate_kernel")
        bias = [b_z] * H + [b_r] * H + [b_h] * H
        self.bias = self.add_weight(shape=(3 * H,), initializer=keras.initializers.Constant(bias),
                                    name="bias")

    def call(self, hidden, theta):
        from_theta = ops.matmul(theta, self.theta_kernel) + self.bias
        if len(hidden.shape) == len(theta.shape) + 1:
            from_theta = ops.expand_dims(from_theta, -2)  # constant over time
        # `split`, not slices: its gradient is one concatenation, where every
        # slice's gradient is a zero-padded full-width copy (~1/3 of the gate's
        # backward time over [N, T, 2H]).
        theta_z, theta_r, theta_h = ops.split(from_theta, 3, axis=-1)
        hidden_z, hidden_r = ops.split(ops.matmul(hidden, self.hidden_kernel), 2, axis=-1)
        z = ops.sigmoid(theta_z + hidden_z)
        r = ops.sigmoid(theta_r + hidden_r)
        candidate = ops.tanh(theta_h + ops.matmul(r * hidden, self.candidate_kernel))
        if self.orientation == "paper":
            return z * candidate + (1.0 - z) * hidden
        return (1.0 - z) * candidate + z * hidden

    def compute_output_shape(self, hidden_shape, theta_shape):
        return tuple(hidden_shape)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "orientation": self.orientation,
                "bias_init": None if self.bias_init is None else list(self.bias_init),
                "kernel_scale": self.kernel_scale, "seed": self.seed}


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicGatedLSTMCell(keras.layers.Layer):
    """One step of one topic-gated LSTM layer: LSTM step, then the gate (eq. 4).

    The per-sentence topic vector enters with the input: the step input is
    ``concat([x_t, theta])`` with theta of width `num_topics` last (Keras 3's
    `RNN` has no `constants`; a tiled constant input is exact). The recurrent
    state is the LSTM's own (h, c); the output is the gated a_t, which is *not*
    fed back (reference rgbn_rnn.md §3.4).

    Args:
        units: LSTM units H.
        num_topics: K, width of theta at the end of each step input.
        orientation, bias_init, kernel_scale, seed: of the `TopicGate`.
        lstm_cell, gate: existing `keras.layers.LSTMCell` / `TopicGate` to
            share weights with (e.g. those of a `TopicGatedLSTMStack`, see
            `TopicGatedLSTMStack.cells`); new ones are created when `None`.

    Call args:
        inputs: float [B, D + K], ``concat([x_t, theta])``.
        states: [h, c], each float [B, H].

    Returns:
        (a_t [B, H], [h_t, c_t]).

    Example:
    >>> cell = TopicGatedLSTMCell(8, num_topics=3)
    >>> layer = keras.layers.RNN(cell, return_sequences=True)
    >>> tuple(layer(keras.ops.ones((2, 5, 4 + 3))).shape)
    (2, 5, 8)
    """

    def __init__(self, units, num_topics, orientation="paper", bias_init=None, kernel_scale=0.05,
                 seed=None, lstm_cell=None, gate=None, **kwargs):
        super().__init__(**kwargs)
        if int(units) < 1:
            raise ValueError(f"units must be >= 1, got {units}")
        if int(num_topics) < 1:
            raise ValueError(f"num_topics must be >= 1, got {num_topics}")
        self.units = int(units)
        self.num_topics = int(num_topics)
        self.orientation = orientation
        self.bias_init = _check_gate_args(orientation, bias_init, kernel_scale)
        self.kernel_scale = float(kernel_scale)
        self.seed = seed
        self.lstm_cell = lstm_cell or keras.layers.LSTMCell(
            self.units, seed=seed, name="lstm_cell", dtype=self.dtype_policy)
        self.gate = gate or TopicGate(self.units, orientation, bias_init, kernel_scale, seed=seed,
                                      name="gate", dtype=self.dtype_policy)
        self.state_size = [self.units, self.units]
        self.output_size = self.units

    def build(self, input_shape):
        input_dim = int(input_shape[-1]) - self.num_topics
        if input_dim < 1:
            raise ValueError(f"step inputs have {input_shape[-1]} features; they must hold the "
                             f"word input followed by num_topics={self.num_topics} topic weights")
        if not self.lstm_cell.built:
            self.lstm_cell.build((input_shape[0], input_dim))
        if not self.gate.built:
            self.gate.build((input_shape[0], self.units), (input_shape[0], self.num_topics))

    def call(self, inputs, states, training=False):
        x, theta = inputs[..., :-self.num_topics], inputs[..., -self.num_topics:]
        hidden, new_states = self.lstm_cell(x, states, training=training)
        return self.gate(hidden, theta), new_states

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), self.compute_dtype) for _ in range(2)]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "num_topics": self.num_topics,
                "orientation": self.orientation,
                "bias_init": None if self.bias_init is None else list(self.bias_init),
                "kernel_scale": self.kernel_scale, "seed": self.seed}


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicGatedLSTMStack(keras.layers.Layer):
    """The fast topic-gated LSTM stack of rGBN-RNN (eq. 4; reference rgbn_rnn.md §3.4).

    Per layer l: one LSTM over all T steps (`run_lstm`: cuDNN on GPU, the
    hoisted, XLA-compiled loops of `HoistedLSTM` on CPU),
    the `TopicGate` applied to all steps at once with theta^l broadcast over
    time, dropout, and the result is the next layer's input. Equal, step for
    step, to running `cells()` (tested). Sentences are independent given theta,
    so callers flatten (B, J, T) to (B*J, T) first.

    Args:
        units: LSTM widths per layer, bottom first (paper: (600,), (600, 512),
            (600, 512, 256)).
        num_topics: K_l per layer (paper: 100, 80, 50); layer l is gated by
            theta^l.
        dropout: dropout rate on every gate output a^l (which is both the next
            layer's input and the softmax input; paper 0.4).
        locked_dropout: one dropout mask per sequence shared over time steps
            (the released code's TF1 seed artefact) instead of i.i.d.
        orientation, bias_init, kernel_scale: of the gates.
        seed: initializer and dropout seed.
        initialization: of the LSTMs: "keras" (their defaults) or "torch"
            (`tfktopic.layers.initialization`); the gates keep ``kernel_scale``.

    Call args:
        inputs: float [N, T, D] (the dropped word embeddings).
        thetas: list of float [N, K_l], the max-normalised topic weights.
        training: apply dropout.

    Returns:
        A list of the L dropped gate outputs, float [N, T, H_l].

    Example:
    >>> stack = TopicGatedLSTMStack(units=(8, 6), num_topics=(4, 3))
    >>> outs = stack(keras.ops.ones((2, 5, 7)), [keras.ops.ones((2, 4)), keras.ops.ones((2, 3))])
    >>> [tuple(a.shape) for a in outs]
    [(2, 5, 8), (2, 5, 6)]
    """

    def __init__(self, units=(600,), num_topics=(100,), dropout=0.0, locked_dropout=False,
                 orientation="paper", bias_init=None, kernel_scale=0.05, seed=None,
                 initialization="keras", **kwargs):
        super().__init__(**kwargs)
        self.initialization = check_initialization(initialization)
        self.units = tuple(int(u) for u in units)
        self.num_topics = tuple(int(k) for k in num_topics)
        if not self.units or min(self.units) < 1:
            raise ValueError(f"units must be a non-empty list of positive sizes, got {units}")
        if len(self.num_topics) != len(self.units) or min(self.num_topics) < 1:
            raise ValueError(f"num_topics must give one positive size per LSTM layer "
                             f"({len(self.units)}), got {num_topics}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        self.locked_dropout = bool(locked_dropout)
        self.orientation = orientation
        self.bias_init = _check_gate_args(orientation, bias_init, kernel_scale)
        self.kernel_scale = float(kernel_scale)
        self.seed = seed
        offset = lambda i: None if seed is None else seed + 10 * i
        # Plain Keras LSTMs (saved files keep their layout), run by `run_lstm`.
        self.lstms = [keras.layers.LSTM(u, return_sequences=True, seed=offset(l), name=f"lstm_{l}",
                                        dtype=self.dtype_policy,
                                        **{"unit_forget_bias": True,
                                           **lstm_initializers(self.initialization, u)})
                      for l, u in enumerate(self.units)]
        self.gates = [TopicGate(u, orientation, bias_init, kernel_scale, seed=offset(l),
                                name=f"gate_{l}", dtype=self.dtype_policy)
                      for l, u in enumerate(self.units)]
        # Locked: one mask per sequence, shared over the time axis.
        self.dropouts = [keras.layers.Dropout(self.dropout, seed=offset(l), name=f"dropout_{l}",
                                              dtype=self.dtype_policy,
                                              noise_shape=(None, 1, u) if self.locked_dropout
                                              else None)
                         for l, u in enumerate(self.units)]

    def build(self, inputs_shape, thetas_shape=None):
        shape = tuple(inputs_shape)
        for l, (lstm, gate) in enumerate(zip(self.lstms, self.gates)):
            lstm.build(shape)
            gate.build(shape[:-1] + (self.units[l],), (shape[0], self.num_topics[l]))
            shape = shape[:-1] + (self.units[l],)

    def call(self, inputs, thetas, training=False):
        if len(thetas) != len(self.units):
            raise ValueError(f"expected {len(self.units)} theta tensors, got {len(thetas)}")
        x, outputs = inputs, []
        for lstm, gate, dropout, theta in zip(self.lstms, self.gates, self.dropouts, thetas):
            hidden = run_lstm(lstm, x, training=training)  # all T steps at once
            gated = gate(hidden, theta)                  # all steps at once
            x = dropout(gated, training=training)
            outputs.append(x)
        return outputs

    def cells(self):
        """Step cells sharing this stack's weights (bottom first).

        Returns:
            A list of `TopicGatedLSTMCell`, one per layer, that use the fused
            LSTMs' `LSTMCell`s and this stack's gates (no copies).
        """
        return [TopicGatedLSTMCell(u, k, self.orientation, self.bias_init, self.kernel_scale,
                                   lstm_cell=lstm.cell, gate=gate, dtype=self.dtype_policy)
                for u, k, lstm, gate in zip(self.units, self.num_topics, self.lstms, self.gates)]

    def compute_output_shape(self, inputs_shape, thetas_shape=None):
        return [tuple(inputs_shape)[:-1] + (u,) for u in self.units]

    def get_config(self):
        return {**super().get_config(), "units": list(self.units),
                "num_topics": list(self.num_topics), "dropout": self.dropout,
                "locked_dropout": self.locked_dropout, "orientation": self.orientation,
                "bias_init": None if self.bias_init is None else list(self.bias_init),
                "kernel_scale": self.kernel_scale, "seed": self.seed,
                "initialization": self.initialization}
