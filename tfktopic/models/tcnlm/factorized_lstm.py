"""Topic-compositional LSTM of TCNLM and the naive mixture of topic experts.

TCNLM (Wang et al., *Topic Compositional Neural Language Model*, AISTATS 2018,
§3.2) makes every LSTM weight a topic mixture, W(t) = sum_k t_k W[k]
(eqs. 9-11), factorised as in SCN-LSTM (Gan et al. 2017) to

    W(t) = W_a diag(W_b t) W_c                                          (12)

so that, for each gate * in (i, f, c, o),

    x~_* = (W_*b t) ⊙ (W_*c x_{m-1}),   h~_* = (U_*b t) ⊙ (U_*c h_{m-1})  (13)
    gate_* = act(W_*a x~_* + U_*a h~_* + b_*)                          (14)
    c_m = f ⊙ c_{m-1} + i ⊙ c~,   h_m = o ⊙ tanh(c_m)                  (15)

with sigmoid for i, f, o and tanh for the candidate c~ (the paper prints a
sigma there; SCN's code and every LSTM use tanh).

* `FactorizedTopicLSTMCell` -- the cell, step by step (the reference path, and
  the owner of the weights).
* `FactorizedTopicLSTM` -- the fast sequence layer (DESIGN.md §4): t is
  constant over a sequence, so the input side W_*a((W_*b t) ⊙ (W_*c x)) + b_*
  of **all** time steps is one batched product before the recurrence; only
  the recurrent side runs per step: on a CPU in XLA-compiled loops with a
  hand-written backward pass (`tfktopic.models.tcnlm.factorized_recurrence`), else
  (a mask, a GPU, JAX, ``fast_path=False``) in one `keras.ops.scan`, the reference.
* `TopicExpertsLSTM` -- K independent LSTMs run as one batched recurrence,
  for the naive mixture of experts p(y) = sum_k t_k softmax(V h^(k)) (eq. 7).

Weights are stored gate-major: ``[4, ...]`` in keras.layers.LSTM's gate order
(i, f, c, o), as every LSTM of the package. Files saved before that change hold
(i, f, o, c): a config without ``gate_order`` (every such file) loads with
``gate_order="ifoc"`` and the cell swaps the c and o blocks of the loaded
weights (`FactorizedTopicLSTMCell.load_own_variables`).
"""

import keras
from keras import ops

from tfktopic import backend
from tfktopic.models.tcnlm.factorized_recurrence import factorized_recurrence
from tfktopic.layers.hoisted_lstm import _gpu_visible

__all__ = ["FactorizedTopicLSTMCell", "FactorizedTopicLSTM", "TopicExpertsLSTM", "lstm_update",
           "GATE_ORDER", "LEGACY_GATE_ORDER", "to_gate_order"]

#: Gate order of every gate-major weight and pre-activation (keras.layers.LSTM's).
GATES = ("input", "forget", "candidate", "output")
#: `gate_order` of new layers: i, f, c, o (keras.layers.LSTM's).
GATE_ORDER = "ifco"
#: The order of files saved before `gate_order` existed (a config without the key).
LEGACY_GATE_ORDER = "ifoc"
_GATE_ORDERS = (GATE_ORDER, LEGACY_GATE_ORDER)


def _check_gate_order(gate_order):
    if gate_order not in _GATE_ORDERS:
        raise ValueError(f"gate_order must be one of {_GATE_ORDERS}, got {gate_order!r}")
    return gate_order


def to_gate_order(weight, gate_order):
    """A gate-major weight [4, ...] stored in `gate_order`, in `GATE_ORDER` (i, f, c, o).

    Args:
        weight: array or tensor [4, ...], the gate blocks in `gate_order`.
        gate_order: "ifco" (returned as is) or "ifoc" (the c and o blocks swapped;
            the swap is its own inverse, so it also converts back).

    Returns:
        the weight with its gate blocks in the order (i, f, c, o).
    """
    if _check_gate_order(gate_order) == GATE_ORDER:
        return weight
    return ops.take(weight, [0, 1, 3, 2], axis=0)

#: SCN-LSTM's initialiser of every factor matrix, U(-0.05, 0.05) (reference §1.2). On Lee
#: it trains markedly better than Glorot/orthogonal factors with W_b = 1 (valid. ppl 77 vs
#: 103-115 for an LM-only run, hidden 64, 8 epochs, Adam 2e-2; a plain LSTM reached 81).
SCN_UNIFORM = {"class_name": "RandomUniform", "config": {"minval": -0.05, "maxval": 0.05}}


def lstm_update(pre_i, pre_f, pre_c, pre_o, c):
    """The LSTM state update from the four gate pre-activations (eq. 15).

    Args:
        pre_i, pre_f, pre_c, pre_o: float [..., n_h] pre-activations of the
            input and forget gates, of the candidate and of the output gate
            (keras.layers.LSTM's order).
        c: float [..., n_h] previous cell state.

    Returns:
        (h, c): the new output and cell state.
    """
    c = ops.sigmoid(pre_f) * c + ops.sigmoid(pre_i) * ops.tanh(pre_c)
    return ops.sigmoid(pre_o) * ops.tanh(c), c


def _recurrence(inputs, mask, h0, c0, step):
    """Run ``(h, c) = step(x_t, h, c)`` over time with `keras.ops.scan` (the
    reference path on every backend).

    Args:
        inputs: time-major per-step inputs (a tensor [T, ...]).
        mask: [T, B] bool or None; at masked steps h and c are carried
            forward unchanged (Keras RNN semantics).
        h0, c0: initial states, batch on the axis that `mask` broadcasts to
            (mask_t is expanded to [B, 1]).
        step: the per-step function.

    Returns:
        (outputs [T, *h.shape], h_T, c_T).
    """
    def body(carry, xs):
        h, c = carry
        x_t, keep = xs
        h_new, c_new = step(x_t, h, c)
        if mask is not None:
            keep = ops.expand_dims(keep, -1)
            h_new, c_new = ops.where(keep, h_new, h), ops.where(keep, c_new, c)
        # keras' TensorFlow scan needs y structured like the carry: c_t rides along.
        return (h_new, c_new), (h_new, c_new)

    keep = mask if mask is not None else ops.ones(ops.shape(inputs)[:1], "bool")
    (h, c), (outputs, _) = ops.scan(body, (h0, c0), (inputs, keep))
    return outputs, h, c


def _stacked_draws(initializer, count, rows, cols, dtype=None):
    """``count`` independent [rows, cols] draws of `initializer`, stacked: [count, rows, cols].

    A Keras 3 initializer instance returns the same values on every call, so
    each slice uses a fresh instance (an integer seed is offset per slice).
    """
    config = keras.initializers.serialize(initializer)
    draws = []
    for i in range(count):
        fresh = dict(config, config=dict(config.get("config") or {}))
        seed = fresh["config"].get("seed")
        if isinstance(seed, int):
            fresh["config"]["seed"] = seed + i
        draws.append(keras.initializers.deserialize(fresh)((rows, cols), dtype=dtype))
    return ops.stack(draws)


def _time_major_mask(mask):
    return None if mask is None else ops.transpose(ops.cast(mask, "bool"))


@keras.saving.register_keras_serializable(package="tfktopic")
class FactorizedTopicLSTMCell(keras.layers.Layer):
    """Topic-compositional LSTM cell (TCNLM eqs. (12)-(15)), one step at a time.

    Parameters per gate * (stored gate-major, ``[4, ...]``, gates in keras'
    order i, f, c, o):
    W_*c [n_x, n_f], W_*b [T, n_f], W_*a [n_f, n_h] on the input side;
    U_*c [n_h, n_f], U_*b [T, n_f], U_*a [n_f, n_h] on the recurrent side;
    one bias b_* [n_h] -- 4 n_f (n_x + 2T + 3 n_h) + 4 n_h parameters (the
    paper's count plus the biases). The input weight of gate * for topic
    proportions t is exactly W_*a^T diag(W_*b^T t) W_*c^T, i.e. eq. (12).

    Follows the Keras RNN-cell API: the per-step input is the concatenation
    ``[x_m, t]`` (t tiled over time), the states are ``[h, c]``; so the cell
    also runs inside `keras.layers.RNN`. Use `FactorizedTopicLSTM` to train.

    Args:
        units: n_h, the hidden size.
        num_topics: T, the length of the topic vector t.
        factor_dim: n_f, the number of factors (default: `units`, as SCN).
        factor_initializer: initializer of the input-side factors W_a, W_c.
        recurrent_initializer: initializer of the recurrent factors U_a, U_c.
        topic_initializer: initializer of the topic factors W_b, U_b.
            All three default to SCN-LSTM's U(-0.05, 0.05) (`SCN_UNIFORM`).
        bias_initializer: initializer of the gate biases.
        unit_forget_bias: add 1 to the forget-gate bias at initialisation.
        gate_order: the gate order of weights loaded from a file
            (`load_own_variables`): "ifco" (new files) or "ifoc" (files saved
            before; `from_config` of a config without the key). The variables
            are always in (i, f, c, o); `get_config` says "ifco".

    Example:
    >>> cell = FactorizedTopicLSTMCell(units=8, num_topics=3)
    >>> step_input = keras.ops.ones((2, 5 + 3))          # [x (n_x = 5), t]
    >>> h, (h, c) = cell(step_input, [keras.ops.zeros((2, 8))] * 2)
    >>> tuple(h.shape)
    (2, 8)
    """

    def __init__(self, units, num_topics, factor_dim=None, factor_initializer=SCN_UNIFORM,
                 recurrent_initializer=SCN_UNIFORM, topic_initializer=SCN_UNIFORM,
                 bias_initializer="zeros", unit_forget_bias=True, gate_order=GATE_ORDER,
                 **kwargs):
        super().__init__(**kwargs)
        self.gate_order = _check_gate_order(gate_order)
        for name, value in (("units", units), ("num_topics", num_topics)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if factor_dim is not None and int(factor_dim) < 1:
            raise ValueError(f"factor_dim must be >= 1 or None, got {factor_dim}")
        self.units = int(units)
        self.num_topics = int(num_topics)
        self.factor_dim = int(factor_dim) if factor_dim is not None else self.units
        self.factor_initializer = keras.initializers.get(factor_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.topic_initializer = keras.initializers.get(topic_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.state_size = [self.units, self.units]
        self.output_size = self.units

    def _gate_weight(self, name, rows, cols, initializer):
        # Each gate's slice is initialised like a stand-alone [rows, cols] matrix.
        def init(shape, dtype=None):
            return _stacked_draws(initializer, 4, rows, cols, dtype)

        return self.add_weight(name=name, shape=(4, rows, cols), initializer=init)

    def build(self, input_shape):
        input_dim = int(input_shape[-1]) - self.num_topics
        if input_dim < 1:
            raise ValueError(
                f"the cell input must be [x, t] with t of size num_topics={self.num_topics}; "
                f"got a last dimension of {input_shape[-1]}")
        self.input_dim = input_dim
        n_h, n_f, n_t = self.units, self.factor_dim, self.num_topics
        self.input_factor_kernel = self._gate_weight("W_c", input_dim, n_f, self.factor_initializer)
        self.input_topic_kernel = self._gate_weight("W_b", n_t, n_f, self.topic_initializer)
        self.input_output_kernel = self._gate_weight("W_a", n_f, n_h, self.factor_initializer)
        self.recurrent_factor_kernel = self._gate_weight("U_c", n_h, n_f,
                                                         self.recurrent_initializer)
        self.recurrent_topic_kernel = self._gate_weight("U_b", n_t, n_f, self.topic_initializer)
        self.recurrent_output_kernel = self._gate_weight("U_a", n_f, n_h,
                                                         self.recurrent_initializer)

        def bias_init(shape, dtype=None):
            bias = self.bias_initializer(shape, dtype=dtype)
            if self.unit_forget_bias:
                bias = bias + ops.cast(ops.arange(4) == 1, bias.dtype)[:, None]
            return bias

        self.bias = self.add_weight(name="bias", shape=(4, n_h), initializer=bias_init)

    # -- the formulas, written once and shared with `FactorizedTopicLSTM` ----------------------

    def input_side(self, x, t):
        """W_*a((W_*b t) ⊙ (W_*c x)) + b_* for every gate (eqs. 13-14, input side).

        Args:
            x: float [B, n_x] (one step) or [B, L, n_x] (all steps).
            t: float [B, T] topic proportions, constant over the sequence.

        Returns:
            float [4, B, n_h] or [4, B, L, n_h] (gate-major).
        """
        shape = ops.shape(x)
        flat = ops.reshape(x, (1, -1, self.input_dim))
        x_factors = ops.matmul(flat, self.input_factor_kernel)                      # [4, N, n_f]
        t_factors = ops.matmul(ops.expand_dims(t, 0), self.input_topic_kernel)     # [4, B, n_f]
        if len(x.shape) == 3:
            x_factors = ops.reshape(x_factors, (4, shape[0], shape[1], self.factor_dim))
            t_factors = ops.expand_dims(t_factors, 2)
        product = ops.reshape(x_factors * t_factors, (4, -1, self.factor_dim))
        side = ops.matmul(product, self.input_output_kernel)                        # [4, N, n_h]
        if len(x.shape) == 3:
            side = ops.reshape(side, (4, shape[0], shape[1], self.units))
            return side + self.bias[:, None, None, :]
        return side + self.bias[:, None, :]

    def recurrent_topic_factors(self, t):
        """U_*b t for every gate: float [4, B, n_f], constant over a sequence."""
        return ops.matmul(ops.expand_dims(t, 0), self.recurrent_topic_kernel)

    def recurrent_side(self, h, topic_factors):
        """U_*a((U_*b t) ⊙ (U_*c h)) for every gate (eqs. 13-14, recurrent side).

        Args:
            h: float [B, n_h] previous output.
            topic_factors: `recurrent_topic_factors(t)`, float [4, B, n_f].

        Returns:
            float [4, B, n_h].
        """
        factors = ops.matmul(ops.expand_dims(h, 0), self.recurrent_factor_kernel) * topic_factors
        return ops.matmul(factors, self.recurrent_output_kernel)

    def gate_preactivations(self, x, h, t):
        """Pre-activations of the four gates at one step, float [4, B, n_h]."""
        return self.input_side(x, t) + self.recurrent_side(h, self.recurrent_topic_factors(t))

    # -- Keras RNN-cell API --------------------------------------------------------------------

    def call(self, inputs, states, training=False):
        x, t = inputs[:, :self.input_dim], inputs[:, self.input_dim:]
        h, c = states[0], states[1]
        pre = self.gate_preactivations(x, h, t)
        h, c = lstm_update(pre[0], pre[1], pre[2], pre[3], c)     # i, f, c, o
        return h, [h, c]

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), self.compute_dtype) for _ in range(2)]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "num_topics": self.num_topics,
                "factor_dim": self.factor_dim,
                "factor_initializer": keras.initializers.serialize(self.factor_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "topic_initializer": keras.initializers.serialize(self.topic_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "unit_forget_bias": self.unit_forget_bias, "gate_order": GATE_ORDER}

    @classmethod
    def from_config(cls, config):
        """A config without ``gate_order`` was saved before it: gates (i, f, o, c)."""
        return cls(**{"gate_order": LEGACY_GATE_ORDER, **config})

    def load_own_variables(self, store):
        """Load the weights, then put their gate blocks in (i, f, c, o) (`gate_order`)."""
        super().load_own_variables(store)
        if self.gate_order != GATE_ORDER:
            for variable in self.weights:
                variable.assign(to_gate_order(variable, self.gate_order))
            self.gate_order = GATE_ORDER   # the variables now hold the new order


@keras.saving.register_keras_serializable(package="tfktopic")
class FactorizedTopicLSTM(keras.layers.Layer):
    """Fast topic-compositional LSTM over whole sequences (DESIGN.md §4).

    The input side of every step is one batched product before the
    recurrence (t is constant per sequence); the loop carries only the
    recurrent side U_*a((U_*b t) ⊙ (U_*c h)) -- with U_*b t also computed once.
    The weights live in `self.cell` (a `FactorizedTopicLSTMCell`), so the fast
    layer and the step-by-step cell compute the same function.

    The loop runs on one of two paths (`takes_fast_path`): on a CPU without a
    mask, `factorized_recurrence` (XLA-compiled loops, hand-written backward
    pass; first-order gradients only); with a mask, when a GPU is visible, or
    with ``fast_path=False``, the reference `keras.ops.scan` differentiated by
    autodiff. Both give the same values and gradients to float round-off.

    Args:
        units, num_topics, factor_dim, factor_initializer, recurrent_initializer,
        topic_initializer, bias_initializer, unit_forget_bias, gate_order: as in
        `FactorizedTopicLSTMCell`.
        return_sequences: return all outputs [B, L, n_h] (else the last one).
        return_state: also return the final states h and c.
        fast_path: take `factorized_recurrence` where it applies (False: always
            the reference while loop).
        jit_compile: compile the fast path's two loops with XLA (each new padded
            batch size or length compiles once); False runs them as `tf.scan`s.

    Call args:
        inputs: float [B, L, n_x] (e.g. word embeddings).
        topic: float [B, T] topic proportions t.
        mask: optional [B, L]; masked steps carry the state forward.
        initial_state: optional ``[h, c]``, each [B, n_h] (default zeros).

    Returns:
        outputs (and ``h, c`` when `return_state`).

    Example:
    >>> layer = FactorizedTopicLSTM(units=8, num_topics=3)
    >>> x, t = keras.ops.ones((2, 6, 5)), keras.ops.full((2, 3), 1 / 3)
    >>> tuple(layer(x, t).shape)
    (2, 6, 8)
    """

    def __init__(self, units, num_topics, factor_dim=None, factor_initializer=SCN_UNIFORM,
                 recurrent_initializer=SCN_UNIFORM, topic_initializer=SCN_UNIFORM,
                 bias_initializer="zeros", unit_forget_bias=True, return_sequences=True,
                 return_state=False, fast_path=True, jit_compile=True, gate_order=GATE_ORDER,
                 **kwargs):
        super().__init__(**kwargs)
        self.fast_path = bool(fast_path)
        self.jit_compile = bool(jit_compile)
        self.cell = FactorizedTopicLSTMCell(
            units, num_topics, factor_dim=factor_dim, factor_initializer=factor_initializer,
            recurrent_initializer=recurrent_initializer, topic_initializer=topic_initializer,
            bias_initializer=bias_initializer, unit_forget_bias=unit_forget_bias,
            gate_order=gate_order, name="cell",
            dtype=self.dtype_policy)
        self.units = self.cell.units
        self.num_topics = self.cell.num_topics
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.supports_masking = True

    def build(self, inputs_shape, topic_shape=None):
        self.cell.build(tuple(inputs_shape[:-1]) + (int(inputs_shape[-1]) + self.num_topics,))

    def call(self, inputs, topic, mask=None, initial_state=None, training=False):
        cell = self.cell
        topic = ops.cast(topic, inputs.dtype)
        # [4, B, L, n_h] -> time-major [L, 4, B, n_h]: one product for all steps.
        input_side = ops.transpose(cell.input_side(inputs, topic), (2, 0, 1, 3))
        topic_factors = cell.recurrent_topic_factors(topic)
        if self.takes_fast_path(mask):
            outputs, h, c = factorized_recurrence(
                input_side, topic_factors, cell.recurrent_factor_kernel,
                cell.recurrent_output_kernel, initial_state=initial_state,
                jit_compile=self.jit_compile)
        else:
            if initial_state is None:
                zeros = ops.zeros((ops.shape(inputs)[0], self.units), inputs.dtype)
                initial_state = [zeros, zeros]

            def step(x_t, h, c):
                pre_i, pre_f, pre_c, pre_o = ops.unstack(
                    x_t + cell.recurrent_side(h, topic_factors))
                return lstm_update(pre_i, pre_f, pre_c, pre_o, c)

            outputs, h, c = _recurrence(input_side, _time_major_mask(mask), initial_state[0],
                                        initial_state[1], step)
        outputs = ops.transpose(outputs, (1, 0, 2)) if self.return_sequences else h
        return (outputs, h, c) if self.return_state else outputs

    def takes_fast_path(self, mask=None):
        """Whether a call with `mask` runs `factorized_recurrence` (TensorFlow's
        custom-gradient kernel): the TensorFlow backend (the one hook,
        `tfktopic.backend.is_tensorflow`), no mask, no GPU visible (there the
        `keras.ops.scan` reference is the path), and ``fast_path``."""
        return (self.fast_path and mask is None and backend.is_tensorflow()
                and not _gpu_visible())

    def compute_mask(self, inputs, topic=None, mask=None, initial_state=None):
        return mask if self.return_sequences else None

    def get_config(self):
        cell = self.cell.get_config()
        keys = ("units", "num_topics", "factor_dim", "factor_initializer",
                "recurrent_initializer", "topic_initializer", "bias_initializer",
                "unit_forget_bias", "gate_order")
        return {**super().get_config(), **{k: cell[k] for k in keys},
                "return_sequences": self.return_sequences, "return_state": self.return_state,
                "fast_path": self.fast_path, "jit_compile": self.jit_compile}

    @classmethod
    def from_config(cls, config):
        """A config without ``gate_order`` was saved before it: gates (i, f, o, c)."""
        return cls(**{"gate_order": LEGACY_GATE_ORDER, **config})


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicExpertsLSTM(keras.layers.Layer):
    """K independent LSTMs ("topic experts") run as one batched recurrence.

    The naive mixture of experts of TCNLM eq. (7) has one RNN per topic,
    h_m^(k) = LSTM_k(x, h_{m-1}^(k)); the output mixes the experts'
    softmaxes with the topic proportions (done by the model). Here the K
    LSTMs share one `keras.ops.scan` with batched matmuls; their weights are
    independent. Expert k's ``kernel[k]``, ``recurrent_kernel[k]`` and
    ``bias[k]`` have the layout (gate order i, f, c, o) of `keras.layers.LSTM`.

    Args:
        units: n_h per expert.
        num_experts: K.
        kernel_initializer, recurrent_initializer, bias_initializer: as in
            `keras.layers.LSTM` (per expert).
        unit_forget_bias: add 1 to the forget-gate bias at initialisation.
        return_state: also return the final states h and c ([K, B, n_h]).

    Call args:
        inputs: float [B, L, n_x] (shared by all experts, first layer) or
            [B, L, K, n_x] (one input per expert, stacked layers).
        mask: optional [B, L].
        initial_state: optional ``[h, c]``, each [K, B, n_h].

    Returns:
        float [B, L, K, n_h] (and ``h, c`` when `return_state`).

    Example:
    >>> layer = TopicExpertsLSTM(units=4, num_experts=3)
    >>> tuple(layer(keras.ops.ones((2, 5, 6))).shape)
    (2, 5, 3, 4)
    """

    def __init__(self, units, num_experts, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, return_state=False, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("units", units), ("num_experts", num_experts)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.units = int(units)
        self.num_experts = int(num_experts)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.return_state = bool(return_state)
        self.supports_masking = True

    def _expert_weight(self, name, rows, cols, initializer):
        def init(shape, dtype=None):
            return _stacked_draws(initializer, self.num_experts, rows, cols, dtype)

        return self.add_weight(name=name, shape=(self.num_experts, rows, cols), initializer=init)

    def build(self, inputs_shape):
        n_h = self.units
        self.input_dim = int(inputs_shape[-1])
        self.kernel = self._expert_weight("kernel", self.input_dim, 4 * n_h, self.kernel_initializer)
        self.recurrent_kernel = self._expert_weight("recurrent_kernel", n_h, 4 * n_h,
                                                    self.recurrent_initializer)

        def bias_init(shape, dtype=None):
            bias = self.bias_initializer(shape, dtype=dtype)
            if self.unit_forget_bias:
                forget = ops.cast((ops.arange(4 * n_h) // n_h) == 1, bias.dtype)
                bias = bias + forget[None, :]
            return bias

        self.bias = self.add_weight(name="bias", shape=(self.num_experts, 4 * n_h),
                                    initializer=bias_init)

    def call(self, inputs, mask=None, initial_state=None, training=False):
        # Input side of all steps and experts at once: time-major [L, K, B, 4 n_h].
        if len(inputs.shape) == 3:
            input_side = ops.einsum("blx,kxg->lkbg", inputs, self.kernel)
        else:
            input_side = ops.einsum("blkx,kxg->lkbg", inputs, self.kernel)
        input_side = input_side + self.bias[None, :, None, :]
        if initial_state is None:
            zeros = ops.zeros((self.num_experts, ops.shape(inputs)[0], self.units), inputs.dtype)
            initial_state = [zeros, zeros]

        def step(x_t, h, c):
            pre = x_t + ops.matmul(h, self.recurrent_kernel)                 # [K, B, 4 n_h]
            pre_i, pre_f, pre_c, pre_o = ops.split(pre, 4, axis=-1)   # keras.layers.LSTM order
            return lstm_update(pre_i, pre_f, pre_c, pre_o, c)

        outputs, h, c = _recurrence(input_side, _time_major_mask(mask), initial_state[0],
                                    initial_state[1], step)
        outputs = ops.transpose(outputs, (2, 0, 1, 3))                        # [B, L, K, n_h]
        return (outputs, h, c) if self.return_state else outputs

    def compute_mask(self, inputs, mask=None, initial_state=None):
        return mask

    def get_config(self):
        return {**super().get_config(), "units": self.units, "num_experts": self.num_experts,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "unit_forget_bias": self.unit_forget_bias, "return_state": self.return_state}
