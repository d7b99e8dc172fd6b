"""SGLD and pSGLD as Keras-3-native optimizers (any Keras model, any backend).

Stochastic-gradient Langevin dynamics (Welling & Teh 2011) and its
RMSprop-preconditioned variant pSGLD (Li et al. 2016), as used for Bayesian
recurrent language models by Gan et al. (2017, ACL, eq. 6 and Algorithm 1).
TFP's `StochasticGradientLangevinDynamics` is a Keras 2 optimizer that cannot
be compiled into a Keras 3 model; these classes replace it. They are written in
`keras.ops` (`build`, `update_step` with `self.assign`) and run on every Keras
backend (TensorFlow, JAX); only the optional XLA fusion of the per-variable
update (`fused_update`) is TensorFlow's (JAX compiles the whole step anyway).

**Gradient convention.** The model's loss is the *mean* mini-batch loss
(Keras' default reduction), so the gradient the optimizer receives is
ḡ = ∇θ mean_m[-log p(d_m | θ)]. With `num_examples` = N training units (the
units the loss is averaged over: tokens, sentences, windows ...) and the
Gaussian prior p(θ) = N(0, I / prior_precision), the mini-batch estimate of
the posterior potential (Gan et al. eq. 4, Welling & Teh eq. 4) has gradient

    ∇Ũ(θ) = N·ḡ + prior_precision·θ.

**Step-size convention.** Both optimizers run exactly the paper's update
(Welling & Teh eq. 4; Li et al. Algorithm 1 without Γ; Gan et al. Algorithm 1
with the sign typo fixed)

    θ ← θ − (ε/2)·G·∇Ũ(θ) + N(0, ε·T·G)

with the paper step size ε = 2·learning_rate / N. Written in the
`learning_rate` η that the optimizers take, this is

    θ ← θ − η·G·(ḡ + (prior_precision / N)·θ) + sqrt(2·η·T·G / N)·ξ,  ξ ~ N(0, I)

so η is on the same scale as the learning rate of SGD (G = I) or RMSprop
(pSGLD), and at T = 0 with `prior_precision=0` SGLD *is* `keras.optimizers.SGD`
and pSGLD is RMSprop (see `PSGLD` for the ε placement). This is the convention
of the authors' Theano code (step "lr" = 1 for PTB SGLD, 1e-3 for pSGLD), with
their prior-sign and noise-scale bugs fixed. Gan et al.'s eq. 6 writes the same
dynamics as θ − η_p·f̃ + sqrt(2·η_p)·ξ with η_p = ε/2 = η/N.

**Noise.** ξ is drawn by `stateless_standard_normal` (Threefry-2x32 bits and
Box-Muller, `tfktopic.bayes.counter_random`) keyed on (seed, iterations,
variable index): a pure function of the optimizer's tracked `iterations`
counter, so a run resumed from a checkpoint draws the same noise as an
uninterrupted one, every replica of a distributed run draws the same noise (the
mirrored weights stay identical), the step is XLA-compilable, and TensorFlow
and JAX draw the same bits. By default (``noise_bits=16``) each 32-bit word
gives two 16-bit uniforms, so a step hashes half the words. The price is a
noise that is N(0, 1) up to a truncation of the tails beyond |ξ| = 4.86 (mass
1.2·10⁻⁶) and a variance 1 − 5·10⁻⁶, far below any chain's Monte Carlo error;
``noise_bits=23`` gives the finer draws (|ξ| ≤ 5.77).

Gradient clipping (`clipnorm`, `clipvalue`, `global_clipnorm`), learning-rate
schedules, gradient accumulation and loss scaling come from the Keras base
class and are applied before the update above. Keras' `weight_decay` is *not*
the prior (it is decoupled and not scaled by 1/N); use `prior_precision`.
"""

import numbers

import keras
import numpy as np
from keras import ops

from tfktopic import backend
from tfktopic.bayes.counter_random import NOISE_BITS, stateless_standard_normal
from tfktopic.xla import xla_loops

__all__ = ["SGLD", "PSGLD"]


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_learning_rate(learning_rate):
    """Validate and normalise a learning rate; ints become floats."""
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        return learning_rate
    if callable(learning_rate):
        return learning_rate
    if not _is_real(learning_rate):
        raise ValueError(
            "`learning_rate` must be a positive float or a "
            f"LearningRateSchedule; received learning_rate={learning_rate!r}")
    if not np.isfinite(learning_rate) or learning_rate <= 0:
        raise ValueError(
            f"`learning_rate` must be positive; received learning_rate={learning_rate!r}")
    return float(learning_rate)


def _check_number(name, value, minimum, strict=False, integer=False):
    ok = _is_real(value) and np.isfinite(value)
    if integer:
        ok = ok and isinstance(value, numbers.Integral)
    if ok:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        relation = ">" if strict else ">="
        kind = "an integer" if integer else "a number"
        raise ValueError(
            f"`{name}` must be {kind} {relation} {minimum}; received {name}={value!r}")
    return value


def _dense(gradient):
    """A dense gradient (TensorFlow's `IndexedSlices` of embedding lookups densified)."""
    if _is_indexed_slices(gradient):
        import tensorflow as tf
        return tf.convert_to_tensor(gradient)
    return gradient


def _value(variable):
    """The current value of a (Keras) variable as a backend tensor (not the variable: a
    variable passed to the XLA-fused `tf.function` would be traced as a resource)."""
    if backend.is_tensorflow():
        import tensorflow as tf   # a Keras or a raw tf.Variable (inside tf.distribute)
        return tf.convert_to_tensor(variable)
    return variable.value if isinstance(variable, keras.Variable) else variable


def _values(gradient):
    """The stored values of a gradient (an `IndexedSlices`' values on TensorFlow)."""
    return gradient.values if _is_indexed_slices(gradient) else gradient


def _scaled(gradient, factor):
    """factor · gradient, an `IndexedSlices` kept sparse."""
    if _is_indexed_slices(gradient):
        import tensorflow as tf
        return tf.IndexedSlices(gradient.values * ops.cast(factor, gradient.values.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient * ops.cast(factor, gradient.dtype)


def _is_indexed_slices(gradient):
    if not backend.is_tensorflow():
        return False
    import tensorflow as tf
    return isinstance(gradient, tf.IndexedSlices)


def _first_square(gradient):
    """V on the first step of `v_init="first_gradient"`: g⊙g where g ≠ 0.

    Coordinates without a first gradient (embedding rows of words absent from
    the first batch) get the mean square of the variable's non-zero gradients
    instead of 0, so their G is on the scale of their neighbours', not 1/λ;
    a variable with no gradient at all gets V = 1.
    """
    square = ops.square(gradient)
    nonzero = ops.cast(ops.greater(square, 0), square.dtype)
    count = ops.sum(nonzero)
    fill = ops.where(count > 0, ops.sum(square) / ops.maximum(count, 1.0), 1.0)
    return ops.where(square > 0, square, fill)


class _LangevinOptimizer(keras.optimizers.Optimizer):
    """Shared machinery of SGLD and pSGLD (drift, prior, seeded noise).

    The update of one variable is the pure function `_step` of (value,
    gradient, slot values, learning rate, step, variable index); subclasses
    provide their slots (`_slots`) and the pure `_precondition` returning the
    denominator D of the diagonal preconditioner G = 1/D (`None` for G = I)
    and the new slot values. With `fused_update=True` and T > 0, `_step` runs
    as one XLA-compiled kernel per variable on TensorFlow (one pass over the
    weights instead of one per elementwise op); the noise ξ is drawn before it
    by plain TF ops, which are faster than XLA's CPU code for log / cos / sin.
    """

    def __init__(
        self,
        learning_rate,
        num_examples,
        temperature,
        prior_precision,
        noise_burnin_steps,
        seed,
        name,
        fused_update=True,
        normalize_gradients_to=None,
        noise_bits=16,
        **kwargs,
    ):
        learning_rate = _check_learning_rate(learning_rate)
        if noise_bits not in NOISE_BITS or isinstance(noise_bits, bool):
            raise ValueError(f"`noise_bits` must be one of {sorted(NOISE_BITS)}; "
                             f"received noise_bits={noise_bits!r}")
        if normalize_gradients_to is not None:
            _check_number("normalize_gradients_to", normalize_gradients_to, 0, strict=True)
        if num_examples is None:
            raise ValueError(
                "`num_examples` (the training-set size N the mean loss is "
                "averaged over) is required; received num_examples=None")
        _check_number("num_examples", num_examples, 1)
        _check_number("temperature", temperature, 0)
        _check_number("prior_precision", prior_precision, 0)
        _check_number("noise_burnin_steps", noise_burnin_steps, 0, integer=True)
        if not isinstance(fused_update, bool):
            raise ValueError(
                f"`fused_update` must be True or False; received fused_update={fused_update!r}")
        if seed is None:
            # Drawn from numpy's global generator, so that
            # keras.utils.set_random_seed makes it reproducible; stored in the
            # config so that a reloaded optimizer continues the same stream.
            seed = int(np.random.randint(0, 2**31 - 1))
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise ValueError(f"`seed` must be an integer or None; received seed={seed!r}")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.num_examples = num_examples
        self.temperature = float(temperature)
        self.prior_precision = float(prior_precision)
        self.noise_burnin_steps = int(noise_burnin_steps)
        self.seed = int(seed)
        self.fused_update = fused_update
        self.noise_bits = int(noise_bits)
        self.normalize_gradients_to = (None if normalize_gradients_to is None
                                       else float(normalize_gradients_to))
        self._fused_step = None

    def _clip_gradients(self, grads):
        """Keras' clipping, then (optionally) the authors' global-norm rescale.

        Gan et al.'s Theano optimizers guard g ← g·c/‖g‖ by an `if` that is
        always true (reference notes A1.2), so the global gradient norm is
        set to c at *every* step; `normalize_gradients_to=c` reproduces it.
        """
        grads = super()._clip_gradients(grads)
        if self.normalize_gradients_to is None:
            return grads
        present = [_values(g) for g in grads if g is not None]
        norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32"))) for g in present))
        factor = self.normalize_gradients_to / ops.maximum(norm, 1e-12)
        return [None if g is None else _scaled(g, factor) for g in grads]

    # -- hooks of the subclasses --------------------------------------------
    def _slots(self, variable):
        """The optimizer variables that belong to `variable` (a list)."""
        return []

    def _precondition(self, gradient, slots, step):
        """Pure: (denominator D of G = 1/D or None, new slot values)."""
        return None, slots

    # -- the update --------------------------------------------------------
    def _noisy_step(self, value, gradient, slots, learning_rate, step, index):
        """`_step` with ξ drawn for (seed, step, variable `index`) (None at T = 0)."""
        xi = None
        if self.temperature > 0:
            xi = stateless_standard_normal(tuple(value.shape), self.seed, index, value.dtype,
                                           bits=self.noise_bits, step=step)
        return self._step(value, gradient, slots, learning_rate, step, xi)

    def _step(self, value, gradient, slots, learning_rate, step, xi):
        """One Langevin step of one variable, as a pure function.

        θ ← θ − η·G·(ḡ + (prior_precision/N)·θ) + sqrt(2·η·T·G/N)·ξ
        (module docstring).

        Args:
            value: the variable's current value.
            gradient: the (clipped, dense) gradient of the mean loss.
            slots: tuple of the variable's optimizer-slot values.
            learning_rate: η (scalar tensor, after schedules).
            step: the optimizer's `iterations` (integer scalar).
            xi: the N(0, I) draw ξ of this step and variable (`None` at T = 0).

        Returns:
            (new value, tuple of new slot values).
        """
        dtype = value.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        denominator, slots = self._precondition(gradient, slots, step)

        drift_gradient = gradient
        if self.prior_precision > 0:
            coefficient = ops.cast(self.prior_precision / self.num_examples, dtype)
            drift_gradient = ops.add(gradient, ops.multiply(coefficient, value))
        if denominator is None:
            increment = ops.multiply(drift_gradient, lr)
        else:
            increment = ops.divide(ops.multiply(lr, drift_gradient), denominator)

        if self.temperature > 0:
            # Per-step noise variance 2·η·T·G/N  (= ε·T·G, ε = 2η/N).
            scale = ops.multiply(
                lr, ops.cast(2.0 * self.temperature / self.num_examples, dtype))
            if denominator is not None:
                scale = ops.divide(scale, denominator)
            noise = ops.multiply(ops.sqrt(scale), xi)
            if self.noise_burnin_steps > 0:
                active = ops.greater_equal(step, self.noise_burnin_steps)
                noise = ops.multiply(noise, ops.cast(active, dtype))
            increment = ops.subtract(increment, noise)
        return ops.subtract(value, increment), tuple(slots)

    def update_step(self, gradient, variable, learning_rate):
        """One Langevin step for one variable (see the module docstring).

        Args:
            gradient: the (already clipped) gradient of the mean loss.
            variable: the model variable to update.
            learning_rate: the current learning rate η (after schedules).
        """
        # The noise perturbs every row (also rows absent from the batch).
        gradient = _dense(gradient)
        slots = self._slots(variable)
        step = ops.convert_to_tensor(_value(self.iterations))
        index = ops.convert_to_tensor(self._get_variable_index(variable), "int32")
        value = ops.convert_to_tensor(_value(variable))
        slot_values = tuple(ops.convert_to_tensor(_value(slot)) for slot in slots)
        learning_rate = ops.convert_to_tensor(_value(learning_rate))
        # At T = 0 there is no noise to generate and the unfused graph keeps
        # the update bit-identical to Keras' SGD / RMSprop (XLA may contract
        # a·b + c into one FMA, which rounds differently).
        if (self.fused_update and self.temperature > 0 and backend.is_tensorflow()
                and xla_loops()):
            if self._fused_step is None:
                import tensorflow as tf
                self._fused_step = tf.function(self._step, jit_compile=True)
            # The noise is drawn outside this XLA program (its Threefry words compiled
            # apart, `counter_words`): measured for 800k 16-bit draws on one CPU thread,
            # 3.5 ms so, 51 ms with Box-Muller compiled too (XLA's CPU log / cos / sin).
            xi = stateless_standard_normal(tuple(value.shape), self.seed, index, value.dtype,
                                           bits=self.noise_bits, step=step)
            value, new_slots = self._fused_step(value, gradient, slot_values, learning_rate,
                                                step, xi)
        else:
            value, new_slots = self._noisy_step(value, gradient, slot_values, learning_rate,
                                                step, index)
        for slot, new in zip(slots, new_slots):
            self.assign(slot, new)
        self.assign(variable, value)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_examples": self.num_examples,
                "temperature": self.temperature,
                "prior_precision": self.prior_precision,
                "noise_burnin_steps": self.noise_burnin_steps,
                "seed": self.seed,
                "fused_update": self.fused_update,
                "normalize_gradients_to": self.normalize_gradients_to,
                "noise_bits": self.noise_bits,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="tfktopic")
class SGLD(_LangevinOptimizer):
    """Stochastic-gradient Langevin dynamics (Welling & Teh 2011, eq. 4).

    Samples the posterior p(θ | D) ∝ p(θ) Π_n p(d_n | θ) of any Keras model
    trained on a mean loss (Gan et al. 2017, eq. 6). Per step, with ḡ the
    gradient of the mean mini-batch loss:

        θ ← θ − η·(ḡ + (prior_precision / N)·θ) + sqrt(2·η·T / N)·ξ,  ξ ~ N(0, I)

    which is the paper's θ ← θ − (ε/2)·∇Ũ + N(0, ε·T) with ε = 2η/N and
    ∇Ũ = N·ḡ + prior_precision·θ. With `temperature=0` and
    `prior_precision=0` this is exactly `keras.optimizers.SGD(learning_rate=η)`.

    Args:
        learning_rate: η, a positive float or a
            `keras.optimizers.schedules.LearningRateSchedule` (SGLD theory
            prefers decreasing steps). Same scale as SGD's learning rate.
        num_examples: N, the number of training units the loss is a mean over
            (e.g. training tokens for a token-averaged LM loss). Required.
        temperature: T ≥ 0. 1 samples the posterior; 0 removes the noise
            (plain SGD with a Gaussian prior); values between give a tempered
            posterior p(θ|D)^(1/T).
        prior_precision: precision 1/σ² of the isotropic Gaussian prior on
            every trainable weight (0 = flat prior). Defaults to 1 (N(0, I)).
        noise_burnin_steps: no noise is added during the first this-many
            optimizer steps. Defaults to 0.
        seed: integer seed of the noise; `None` draws one from numpy's global
            generator (reproducible under `keras.utils.set_random_seed`) and
            stores it in the config.
        fused_update: run each variable's update as one XLA-compiled kernel
            when T > 0 on TensorFlow (default True; equal to the unfused graph up
            to float rounding; off when ``TFKTOPIC_XLA_LOOPS=0``, see
            `tfktopic.xla`; no effect on other backends).
        normalize_gradients_to: rescale the global gradient norm to this value
            at every step (after Keras' clipping), as the authors' code does
            (reference notes A1.2); None (default) leaves the gradients.
        noise_bits: resolution of the uniforms behind ξ, 16 (default: two per
            32-bit word, the faster step) or 23 (one per word); see the module
            docstring.
        name: optimizer name.
        **kwargs: base optimizer arguments: `clipnorm`, `clipvalue`,
            `global_clipnorm`, `loss_scale_factor`,
            `gradient_accumulation_steps`, `use_ema`, ...

    Example (a posterior sample of a linear regression after every step):
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=SGLD(learning_rate=0.1, num_examples=64, seed=0),
    ...               loss="mse")
    >>> x, y = np.ones((64, 3), "float32"), np.zeros((64, 1), "float32")
    >>> history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    >>> int(model.optimizer.iterations)          # 2 epochs x 4 steps
    8

    For a language model: ``SGLD(learning_rate=0.5, num_examples=<training tokens>,
    global_clipnorm=5.0)`` with ``loss="sparse_categorical_crossentropy"``.
    """

    def __init__(
        self,
        learning_rate=0.01,
        num_examples=None,
        temperature=1.0,
        prior_precision=1.0,
        noise_burnin_steps=0,
        seed=None,
        fused_update=True,
        normalize_gradients_to=None,
        noise_bits=16,
        name="sgld",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            num_examples=num_examples,
            temperature=temperature,
            prior_precision=prior_precision,
            noise_burnin_steps=noise_burnin_steps,
            seed=seed,
            name=name,
            fused_update=fused_update,
            normalize_gradients_to=normalize_gradients_to,
            noise_bits=noise_bits,
            **kwargs,
        )

    def build(self, var_list):
        """Create the optimizer state (SGLD has no slots).

        Args:
            var_list: the model's trainable variables.
        """
        if self.built:
            return
        super().build(var_list)


_V_INITS = ("ones", "zeros", "first_gradient")
_EPS_PLACEMENTS = ("outside", "inside")
_SPARSE_V = ("decay", "hold")


@keras.saving.register_keras_serializable(package="tfktopic")
class PSGLD(_LangevinOptimizer):
    """Preconditioned SGLD with an RMSprop preconditioner (Li et al. 2016).

    Gan et al. 2017, Algorithm 1 (with its drift-sign typo fixed). Per step,
    with ḡ the gradient of the mean mini-batch loss:

        V ← ρ·V + (1 − ρ)·ḡ⊙ḡ
        G = 1 / (λ + sqrt(V))            (epsilon_placement="outside", paper)
        G = 1 / sqrt(V + λ)              (epsilon_placement="inside", Keras RMSprop)
        θ ← θ − η·G⊙(ḡ + (prior_precision / N)·θ) + sqrt(2·η·T·G / N)⊙ξ

    i.e. θ ← θ − (ε/2)·G·∇Ũ + N(0, ε·T·G) with ε = 2η/N. V tracks the
    likelihood gradient ḡ only (not the prior term), as in Li et al. The Γ(θ)
    correction term of Li et al. (derivative of G) is dropped, as in Li et
    al.'s experiments and Gan et al.; it vanishes as ρ → 1. Dropping it is
    harmless when V averages over many more steps (1/(1−ρ)) than the chain's
    autocorrelation time, or when V is dominated by mini-batch gradient noise;
    with full-batch gradients and 1/(1−ρ) comparable to the autocorrelation
    time, V follows the chain's position and the samples come out too wide
    (measured: ~15 % excess variance on a 2-d Gaussian posterior).

    With `temperature=0`, `prior_precision=0`, `v_init="zeros"` and
    `epsilon_placement="inside"` this is exactly
    `keras.optimizers.RMSprop(learning_rate=η, rho=ρ, epsilon=λ)`; with
    `epsilon_placement="outside"` (default, the paper's λ + sqrt(V)) it is
    RMSprop with the epsilon outside the square root.

    Initialisation of V. With the paper's V₀ = 0 and a tiny λ, coordinates
    whose first gradients are (near) zero get G ≈ 1/λ and a noise standard
    deviation sqrt(2η/(Nλ)) that makes training diverge (reference notes
    A4.3). `v_init` chooses:
      * `"first_gradient"` (default): V₁ = ḡ₁⊙ḡ₁ on the first step, so G is
        on the gradients' scale from the start; coordinates with a zero first
        gradient get the variable's mean non-zero ḡ₁² instead of 0;
      * `"ones"` (as TFP): V₀ = 1, so G ≤ 1 at the start. Safe, but V then
        decays only as ρ^k towards gradients of typical size 1e-3..1e-2: an
        LSTM LM barely moves for the first few hundred steps (measured on
        the Lee corpus, 7 epochs of 37 steps, η = 4e-3: valid ppl 2,239 with
        `"ones"`, 137 with `"first_gradient"`, 160 for RMSprop);
      * `"zeros"`: the paper's V₀ = 0 (use with `noise_burnin_steps` of about
        1/(1−ρ), or a larger `epsilon`).
    Coordinates that stop receiving gradient (embedding rows of rare words)
    see V decay as ρ^k whatever the initialisation; a larger `epsilon` bounds
    G ≤ 1/λ.

    Args:
        learning_rate: η, a positive float or a LearningRateSchedule, on
            RMSprop's scale (Gan et al. use 1e-3; 2e-3 for War and Peace).
        num_examples: N, the number of training units the loss is a mean over.
            Required.
        temperature: T ≥ 0 (1 = posterior, 0 = no noise).
        prior_precision: precision of the Gaussian prior N(0, I/precision) on
            every weight (0 = flat). Defaults to 1.
        rho: ρ, decay of the squared-gradient average (paper β₁ = 0.99).
        epsilon: λ > 0, the preconditioner's diagonal bias (default 1e-5).
        epsilon_placement: `"outside"` (λ + sqrt(V), paper) or `"inside"`
            (sqrt(V + λ), Keras RMSprop / authors' code / TFP).
        v_init: `"ones"`, `"first_gradient"` or `"zeros"` (see above).
        v_floor: lower bound on V inside G (0 = none): G ≤ 1/(λ + sqrt(v_floor))
            for coordinates whose gradients have faded (rare words' embedding
            rows and softmax columns), so their noise 2·η·T·G/N stays bounded.
        sparse_v: `"decay"` (default, Li et al.: V ← ρ·V + (1 − ρ)·ḡ² on every
            step) or `"hold"` (sparse-aware, lazy RMSprop: V changes only where
            ḡ ≠ 0, so embedding rows of words absent from the batch keep the V
            of their last gradient instead of decaying towards 0).
        noise_burnin_steps: no noise during the first this-many steps.
        seed: integer noise seed (`None`: drawn from numpy, stored in config).
        fused_update: run each variable's update (V, G, drift, noise) as one
            XLA-compiled kernel when T > 0 (default True; a speed option, the
            result equals the unfused graph's up to float rounding; off when
            ``TFKTOPIC_XLA_LOOPS=0``, see `tfktopic.xla`).
        normalize_gradients_to: rescale the global gradient norm to this value
            at every step (after Keras' clipping), as the authors' code does
            (reference notes A1.2); None (default) leaves the gradients.
        noise_bits: resolution of the uniforms behind ξ, 16 (default: two per
            32-bit word, the faster step) or 23 (one per word); see the module
            docstring.
        name: optimizer name.
        **kwargs: base optimizer arguments (`clipnorm`, `clipvalue`,
            `global_clipnorm`, `gradient_accumulation_steps`, ...).

    Example (the same seed and data give the same chain):
    >>> def chain():
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.set_weights([np.full((3, 1), 0.5, "float32"), np.zeros(1, "float32")])
    ...     model.compile(optimizer=PSGLD(learning_rate=1e-3, num_examples=64, seed=3),
    ...                   loss="mse")
    ...     model.fit(np.ones((64, 3), "float32"), np.zeros((64, 1), "float32"),
    ...               batch_size=16, epochs=1, shuffle=False, verbose=0)
    ...     return model.get_weights()[0]
    >>> bool(np.array_equal(chain(), chain()))
    True

    Gan et al. use ``PSGLD(learning_rate=1e-3, num_examples=<training tokens>)`` with
    batches of 50.
    """

    def __init__(
        self,
        learning_rate=0.001,
        num_examples=None,
        temperature=1.0,
        prior_precision=1.0,
        rho=0.99,
        epsilon=1e-5,
        epsilon_placement="outside",
        v_init="first_gradient",
        v_floor=0.0,
        sparse_v="decay",
        noise_burnin_steps=0,
        seed=None,
        fused_update=True,
        normalize_gradients_to=None,
        noise_bits=16,
        name="psgld",
        **kwargs,
    ):
        if not (_is_real(rho) and 0 <= rho < 1):
            raise ValueError(f"`rho` must be in [0, 1); received rho={rho!r}")
        _check_number("epsilon", epsilon, 0, strict=True)
        if epsilon_placement not in _EPS_PLACEMENTS:
            raise ValueError(
                f"`epsilon_placement` must be one of {_EPS_PLACEMENTS}; "
                f"received epsilon_placement={epsilon_placement!r}")
        if v_init not in _V_INITS:
            raise ValueError(
                f"`v_init` must be one of {_V_INITS}; received v_init={v_init!r}")
        _check_number("v_floor", v_floor, 0)
        if sparse_v not in _SPARSE_V:
            raise ValueError(
                f"`sparse_v` must be one of {_SPARSE_V}; received sparse_v={sparse_v!r}")
        super().__init__(
            learning_rate=learning_rate,
            num_examples=num_examples,
            temperature=temperature,
            prior_precision=prior_precision,
            noise_burnin_steps=noise_burnin_steps,
            seed=seed,
            name=name,
            fused_update=fused_update,
            normalize_gradients_to=normalize_gradients_to,
            noise_bits=noise_bits,
            **kwargs,
        )
        self.rho = float(rho)
        self.epsilon = float(epsilon)
        self.epsilon_placement = epsilon_placement
        self.v_init = v_init
        self.v_floor = float(v_floor)
        self.sparse_v = sparse_v

    def build(self, var_list):
        """Create the squared-gradient averages V (one slot per variable).

        Args:
            var_list: the model's trainable variables.
        """
        if self.built:
            return
        super().build(var_list)
        initializer = "ones" if self.v_init == "ones" else "zeros"
        self._sq_averages = self.add_optimizer_variables(
            var_list, "sq_average", initializer=initializer)

    def _slots(self, variable):
        return [self._sq_averages[self._get_variable_index(variable)]]

    def squared_average(self, variable):
        """The running average of squared gradients V of one model variable.

        Args:
            variable: one of the variables the optimizer was built for.

        Returns:
            The optimizer variable holding V (same shape as `variable`).
        """
        return self._slots(variable)[0]

    def _precondition(self, gradient, slots, step):
        """V update and the denominator D of G = 1/D (pure; see the class doc)."""
        (sq_avg,) = slots
        square = ops.square(gradient)
        new_sq_avg = ops.add(ops.multiply(self.rho, sq_avg), ops.multiply(1 - self.rho, square))
        if self.sparse_v == "hold":
            # Lazy (sparse-aware) RMSprop: V of a coordinate moves only on
            # the steps that give it a gradient.
            new_sq_avg = ops.where(ops.not_equal(gradient, 0), new_sq_avg, sq_avg)
        if self.v_init == "first_gradient":
            new_sq_avg = ops.cond(ops.equal(step, 0), lambda: _first_square(gradient),
                                  lambda: new_sq_avg)
        v = ops.maximum(new_sq_avg, self.v_floor) if self.v_floor > 0 else new_sq_avg
        if self.epsilon_placement == "inside":
            return ops.sqrt(ops.add(v, self.epsilon)), (new_sq_avg,)
        return ops.add(ops.sqrt(v), self.epsilon), (new_sq_avg,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "rho": self.rho,
                "epsilon": self.epsilon,
                "epsilon_placement": self.epsilon_placement,
                "v_init": self.v_init,
                "v_floor": self.v_floor,
                "sparse_v": self.sparse_v,
            }
        )
        return config
