"""TLASGR-MCMC for the global topic parameters of (r)GBN-RNN, in keras.ops.

Guo, Chen, Lu, Zhou, *Recurrent Hierarchical Topic-Guided RNN for Language
Generation* (ICML 2020), Algorithm 1; the topic-layer-adaptive stochastic
gradient Riemannian (TLASGR) MCMC of Cong, Chen, Liu, Zhou (ICML 2017);
implementation reference `rgbn_rnn.md` §4 (what the released code computes).

After each gradient step on the networks, the sampler

1. **augments** the bag-of-words counts of the mini-batch with latent counts
   given the encoder's theta samples (reference §4.2), with the samplers of
   `tfktopic.bayes.augmentation`:
   * `multinomial_split` of the word counts over the layer-1 topics;
   * `crt` tables of each layer's latent counts (concentration tau0 × the prior
     shape), which become the counts of the layer above;
   * `binomial`: the tables of a lower layer are split between the temporal
     part (prior shape Pi theta_{j-1}) and the hierarchical part
     (Phi^{l+1} theta^{l+1}_j) with probability ∝ the two shape parts;
   * the temporal tables are allocated to previous-sentence topics with a
     `multinomial_split` through Pi (rows "to" topic k, columns "from" k').
   Only the backward chain over the J sentences of each layer is sequential.
2. **updates** every Phi^l and Pi^l (columns on the simplex) with the
   preconditioned Langevin step on the simplex (reference §4.3,
   `riemannian_simplex_step`), the counts scaled by the corpus/mini-batch ratio,
   and projects back onto the simplex.

**Random numbers** (`tfktopic.bayes.counter_random`). The augmentation draws
are keyed by `random_key(seed, MCMC step, stream)` and, inside a sampler, by
the *global* position of the count in the mini-batch and its occurrence index.
The augmented counts are therefore a pure function of the global batch,
whatever its split across replicas, and an interrupted run resumed from a
checkpoint (the step counter is a weight) redraws exactly the same values. The
Langevin noise of the update is keyed on (seed, step, matrix index)
(`stateless_standard_normal`). Under a
`tf.distribute` strategy the augmented counts are summed across replicas, and
every replica then applies the same deterministic-given-(counts, step) update:
Phi and Pi stay identical on all replicas and equal to the single-device result
for the same global batch.

**Backends.** Everything is `keras.ops`; the backend hook
(`tfktopic.backend.is_tensorflow`) picks TensorFlow's fast paths: the ragged
augmentation kernels (`tfktopic.bayes.augmentation`: one draw per token /
customer, dynamic shapes, so a TensorFlow model calling `TLASGRTopics.update`
in its `train_step` must be compiled with ``jit_compile=False``), the
XLA-fused simplex update and the `tf.distribute` replica layout. Under JAX the
keras.ops reference runs (jit-compilable: static shapes, `ops.fori_loop`s).
The simplex update runs in float64 where the backend has it (TensorFlow; JAX
with ``jax_enable_x64``) and in float32 otherwise; the step counter is int64
on TensorFlow and int32 on JAX without x64.
"""

import numbers

import keras
import numpy as np
from keras import ops

from tfktopic import backend
from tfktopic.bayes.augmentation import binomial, crt, multinomial_split
from tfktopic.bayes.counter_random import random_key, stateless_standard_normal
from tfktopic.xla import xla_loops

__all__ = ["TLASGRTopics", "riemannian_simplex_step", "initial_phi"]

#: Initialisations of Pi: the released code's identity, or uniform columns.
PI_INITS = ("identity", "uniform")
#: The reference code's ``realmin`` (floor of preconditioners and normalisers).
REALMIN = 2.2e-20



def _compute_dtype():
    """float64 where the backend has it (TensorFlow, JAX with x64), else float32."""
    if backend.is_jax():
        import jax
        return "float64" if jax.config.jax_enable_x64 else "float32"
    return "float64"


def _step_dtype():
    """The step counter's dtype: int64 on TensorFlow, int32 where 64-bit is off."""
    return "int64" if _compute_dtype() == "float64" else "int32"

# Augmentation streams (phase of the sampler), combined with layer and sentence.
_MULTINOMIAL, _CRT, _SPLIT, _TEMPORAL = range(4)


# -----------------------------------------------------------------------------
# The Riemannian update on the simplex
# -----------------------------------------------------------------------------
def riemannian_simplex_step(x, counts, preconditioner, prior, step_size, forgetting_rate,
                            scale, preconditioner_floor, noise):
    """One TLASGR step of a column-stochastic matrix (reference §4.3).

    With C' = scale · counts, P = C' + prior, the per-column preconditioner
    M ← (1 - kappa_t) M + kappa_t colsum(C') (kappa_0 = 1 sets M = colsum(C')),
    M̄ = max(M, floor):

        X' = X + eps_t (P - colsum(P) ⊙ X) / M̄ + sqrt(2 eps_t X / M̄) ⊙ noise

    then the projection X'' = X' - (colsum(X') - 1) ⊙ X, negative entries
    clipped to 0 and the columns renormalised (Cong et al. 2017;
    the released ``ProjSimplexSpecial``). A column whose projection has no
    positive mass keeps its old value.

    Args:
        x: [R, K] float (float64 on TensorFlow) current matrix (columns on the simplex).
        counts: [R, K] augmented counts of the mini-batch (summed over replicas).
        preconditioner: [K] running M.
        prior: Dirichlet prior concentration (scalar).
        step_size: eps_t (scalar).
        forgetting_rate: kappa_t (scalar).
        scale: corpus / mini-batch size ratio rho (scalar).
        preconditioner_floor: floor of M (scalar or [K]).
        noise: [R, K] standard normal draws.

    Returns:
        (new_x [R, K], new_preconditioner [K]) in x's dtype.
    """
    scaled = scale * counts
    new_m = (1.0 - forgetting_rate) * preconditioner + forgetting_rate * ops.sum(scaled, 0)
    m_bar = ops.maximum(new_m, preconditioner_floor)
    posterior = scaled + prior
    drift = (posterior - ops.sum(posterior, 0, keepdims=True) * x) / m_bar
    diffusion = ops.sqrt(2.0 * step_size * ops.maximum(x, 0.0) / m_bar) * noise
    proposal = x + step_size * drift + diffusion
    projected = proposal - (ops.sum(proposal, 0, keepdims=True) - 1.0) * x
    projected = ops.maximum(projected, 0.0)
    total = ops.sum(projected, 0, keepdims=True)
    new_x = ops.where(total > REALMIN, projected / ops.maximum(total, REALMIN), x)
    return new_x, new_m


def _simplex_update(x, counts, preconditioner, noise, step_size, forgetting_rate, scale, prior,
                    floor):
    """`riemannian_simplex_step` of one matrix in `noise`'s dtype (float64 where the
    backend has it), cast back to x's dtype.

    Returns:
        (new x in x's dtype, new preconditioner in its dtype, float32 max |change|).
    """
    dtype = noise.dtype
    x64 = ops.cast(x, dtype)
    new_x, new_m = riemannian_simplex_step(
        x64, ops.cast(counts, dtype), ops.cast(preconditioner, dtype), prior,
        ops.cast(step_size, dtype), ops.cast(forgetting_rate, dtype), ops.cast(scale, dtype),
        floor, noise)
    change = ops.cast(ops.max(ops.abs(new_x - x64)), "float32")
    return ops.cast(new_x, x.dtype), ops.cast(new_m, preconditioner.dtype), change


# The step of a [R, K] matrix is ~20 element-wise float64 passes (drift,
# diffusion, projection, renormalisation); XLA fuses them into a few loops
# (~4x faster for Phi^1 at V = 8k, K = 100 on CPU). Shapes are static per
# matrix, so each compiles once; the noise is drawn outside (its Threefry +
# Box-Muller took 18 ms as plain TF ops and 61 ms under XLA for a float64
# 8000 x 100 draw on one CPU thread; TF's Philox normals 26 ms) and the
# dynamic-shape augmentation stays outside XLA too. ``TFKTOPIC_XLA_LOOPS=0`` runs the same function without XLA
# (`tfktopic.xla`). TensorFlow only (`_simplex_update_function`); JAX compiles the
# whole train step anyway.
_FUSED = []


def _simplex_update_function():
    """The XLA-fused `_simplex_update` on TensorFlow with `xla_loops()`, else the plain one."""
    if not (backend.is_tensorflow() and xla_loops()):
        return _simplex_update
    if not _FUSED:
        import tensorflow as tf
        _FUSED.append(tf.function(_simplex_update, jit_compile=True, autograph=False))
    return _FUSED[0]


def _replica_layout(local_batch):
    """(replica context or None, global offset of this replica's docs, global batch).

    A `tf.distribute` replica context exists only on TensorFlow; elsewhere the batch is
    the global one (keras.distribution shards the data of one jitted step).
    """
    if not backend.is_tensorflow():
        return None, 0, ops.cast(local_batch, "float32")
    import tensorflow as tf
    local_batch = tf.cast(local_batch, tf.float32)
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return None, tf.constant(0, tf.int64), local_batch
    num = ctx.num_replicas_in_sync
    replica = tf.cast(ctx.replica_id_in_sync_group, tf.int32)
    sizes = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                           tf.one_hot(replica, num, dtype=tf.float32) * local_batch)
    before = tf.cast(tf.range(num) < replica, tf.float32)
    offset = tf.cast(tf.round(tf.reduce_sum(sizes * before)), tf.int64)
    return ctx, offset, tf.reduce_sum(sizes)


def initial_phi(topic_word, vocab_size, num_topics, floor=1e-10):
    """A start of Phi^1 from a topic-word matrix (e.g. an LDA's, ``phi_init``).

    Args:
        topic_word: [num_topics, vocab_size] nonnegative rows (gensim's
            ``LdaModel.get_topics()``) or [vocab_size, num_topics] columns.
        vocab_size, num_topics: the shape of Phi^1.
        floor: entries are floored here (a zero entry would never get counts).

    Returns:
        float64 numpy [vocab_size, num_topics] with columns on the simplex.

    Raises:
        ValueError: a wrong shape, a negative or non-finite entry (named).
    """
    matrix = np.asarray(topic_word, np.float64)
    if matrix.shape == (num_topics, vocab_size) and num_topics != vocab_size:
        matrix = matrix.T
    if matrix.shape != (vocab_size, num_topics):
        raise ValueError(f"phi_init must have shape ({num_topics}, {vocab_size}) (topics x "
                         f"words) or ({vocab_size}, {num_topics}), got {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or matrix.min() < 0:
        raise ValueError("phi_init must hold finite nonnegative numbers")
    matrix = np.maximum(matrix, floor)
    return matrix / matrix.sum(0, keepdims=True)


def _positive(name, value, integer=False, allow_zero=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok and integer:
        ok = float(value) == int(value)
    if ok:
        ok = value >= 0 if allow_zero else value > 0
    if not ok:
        kind = "an integer" if integer else "a number"
        relation = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {kind} {relation}, got {value!r}")
    return int(value) if integer else float(value)


@keras.saving.register_keras_serializable(package="tfktopic")
class TLASGRTopics(keras.layers.Layer):
    """The global parameters Phi^l, Pi^l of an (r)GBN and their TLASGR-MCMC sampler.

    Owns, as **non-trainable** weights (so they are saved and checkpointed with
    the model, and never touched by the optimizer):

    * ``phi[l]``: Phi^{l+1} of shape [K_{l-1}, K_l] (K_0 = vocab_size),
      initialised i.i.d. U(0, 1) and column-normalised (reference §1.1);
    * ``pi[l]``: Pi^{l+1} of shape [K_l, K_l] (``recurrent=True`` only),
      initialised uniform (or to the released code's identity, `pi_init`);
      column k' is p(next topic | previous k');
    * ``phi_preconditioners[l]``, ``pi_preconditioners[l]``: the per-column
      running preconditioners M (reference §4.3);
    * ``iterations``: the MCMC step counter t (int64; int32 under JAX without x64).

    All columns stay on the simplex. Generative model (Guo et al. 2020;
    reference §1.1), per document and sentence j:
    theta^L_1 ~ Gam(1, tau0), theta^L_j ~ Gam(Pi^L theta^L_{j-1}, tau0) (j > 1),
    theta^l_j ~ Gam(Phi^{l+1} theta^{l+1}_j + Pi^l theta^l_{j-1}, tau0) (no Pi
    term at j = 1),
    d_j ~ Pois(Phi^1 theta^1_j); without recurrence (GBN) the Pi terms vanish.
    Gamma distributions are Gam(tau0 e, rate tau0).

    `update(bow, thetas)` runs one TLASGR-MCMC step (Guo et al. 2020,
    Algorithm 1; Cong et al. 2017): the augmentation of reference §4.2 and the
    Riemannian simplex step of §4.3 with

    * step size
      eps_t = step_size · ((step_size_tau + 1 + t) / (step_size_tau + 1))^(-step_size_decay)
      (code: 1, 20, 0.7, so eps_0 = 1);
    * forgetting rate kappa_t = (t + 1)^(-forgetting_decay) (code: 0.9);
    * counts scaled by rho = num_documents / (documents in the global batch);
    * Dirichlet priors phi_prior (0.1) on Phi, pi_prior (1) on Pi;
    * M̄ = max(M, floor) with floor = the prior mass of a column (prior × rows)
      by default — the reference code's 2.2e-20 lets empty columns explode
      (reference §8.6); pass ``preconditioner_floor=2.2e-20`` to reproduce it.

    Args:
        vocab_size: V_c, the topic vocabulary size (rows of Phi^1).
        topic_sizes: (K_1, ..., K_L), topics per layer (paper: 100-80-50).
        num_documents: training document chunks (the corpus size the mini-batch
            counts are scaled to; reference §4.3 uses #chunks / batch size).
        recurrent: True for rGBN (with Pi), False for GBN (no Pi).
        seed: integer seed of the initialisation and of all MCMC draws
            (`None`: drawn from numpy's global generator, so
            `keras.utils.set_random_seed` makes it reproducible; stored in the
            config).
        tau0: the gamma rate tau0 of the generative model (the CRT
            concentrations are tau0 × the prior shapes; reference §1.1).
        step_size, step_size_tau, step_size_decay: eps_0, tau and kappa of the
            step-size schedule.
        forgetting_decay: exponent of the preconditioner's forgetting rate.
        phi_prior, pi_prior: Dirichlet concentrations (eta_0 and 1).
        preconditioner_floor: `None` (prior column mass) or a positive float.
        phi_init: optional start of Phi^1, a [K_1, V] topic-word matrix
            (rows normalised; e.g. an LDA's ``get_topics()``) or [V, K_1];
            `None` (default): i.i.d. U(0, 1) columns normalised. Lives in the
            weights, not in the config.
        pi_init: "uniform" (default) or "identity" (the released code,
            reference §1.1). The identity is a near-absorbing state of the
            sampler when theta is dense (as Weibull encoder samples are): a
            temporal table of topic k is allocated to k' ∝
            Pi[k, k'] theta_{j-1, k'}, so zero off-diagonal entries receive
            (almost) no counts. Measured on documents generated from a
            2-layer rGBN (6-3 topics, cyclic-shift Pi, true theta given, 120
            updates, seeds 1-3): mean column cosine of Pi^1 to the truth 0.21-0.50
            from the identity, 0.94-0.99 from the uniform start (Pi^2, whose
            theta is sparse, 1.0 from both).

    Example:
    >>> topics = TLASGRTopics(vocab_size=50, topic_sizes=(8, 4), num_documents=1000, seed=0)
    >>> rng = np.random.default_rng(0)
    >>> bow = rng.poisson(0.5, (16, 5, 50)).astype("float32")   # [B, J, V] counts
    >>> thetas = [rng.gamma(1.0, size=(16, 5, k)).astype("float32") for k in (8, 4)]
    >>> stats = topics.update(bow, thetas)                   # inside train_step
    >>> [tuple(p.shape) for p in topics.phi_products()]
    [(50, 8), (50, 4)]
    """

    def __init__(self, vocab_size, topic_sizes, num_documents, recurrent=True, seed=None,
                 tau0=1.0, step_size=1.0, step_size_tau=20.0, step_size_decay=0.7,
                 forgetting_decay=0.9, phi_prior=0.1, pi_prior=1.0, preconditioner_floor=None,
                 pi_init="uniform", phi_init=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = _positive("vocab_size", vocab_size, integer=True)
        if isinstance(topic_sizes, numbers.Integral):
            topic_sizes = (topic_sizes,)
        try:
            sizes = tuple(topic_sizes)
        except TypeError:
            raise ValueError(
                f"topic_sizes must be a sequence of positive integers, got {topic_sizes!r}"
            ) from None
        if not sizes:
            raise ValueError("topic_sizes must name at least one layer, got ()")
        self.topic_sizes = tuple(_positive("topic_sizes", k, integer=True) for k in sizes)
        self.num_documents = _positive("num_documents", num_documents, integer=True)
        self.recurrent = bool(recurrent)
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
        self.seed = int(seed)
        self.tau0 = _positive("tau0", tau0)
        self.step_size = _positive("step_size", step_size)
        self.step_size_tau = _positive("step_size_tau", step_size_tau, allow_zero=True)
        self.step_size_decay = _positive("step_size_decay", step_size_decay, allow_zero=True)
        self.forgetting_decay = _positive("forgetting_decay", forgetting_decay, allow_zero=True)
        self.phi_prior = _positive("phi_prior", phi_prior)
        self.pi_prior = _positive("pi_prior", pi_prior)
        self.preconditioner_floor = (None if preconditioner_floor is None else
                                     _positive("preconditioner_floor", preconditioner_floor))
        if pi_init not in PI_INITS:
            raise ValueError(f"pi_init must be one of {PI_INITS}, got {pi_init!r}")
        self.pi_init = pi_init
        self._phi_init = None if phi_init is None else initial_phi(
            phi_init, self.vocab_size, self.topic_sizes[0])
        self.build()

    @property
    def num_layers(self):
        return len(self.topic_sizes)

    # ------------------------------------------------------------------ weights
    def build(self, input_shape=None):
        if self.built:
            return
        rng = np.random.default_rng(self.seed)
        rows = (self.vocab_size,) + self.topic_sizes[:-1]

        def weight(name, shape, value, dtype="float32"):
            variable = self.add_weight(
                name=name, shape=shape, dtype=dtype, trainable=False,
                initializer=lambda shape, dtype=None: ops.convert_to_tensor(value, dtype),
                aggregation="only_first_replica")
            # Also a direct attribute: `tf.train.Checkpoint` does not look into
            # the Python lists below (Keras' own saving does).
            setattr(self, name, variable)
            return variable

        self.phi, self.pi = [], []
        self.phi_preconditioners, self.pi_preconditioners = [], []
        for l, (r, k) in enumerate(zip(rows, self.topic_sizes), start=1):
            init = rng.uniform(size=(r, k))   # drawn also under phi_init: same later draws
            init = init / init.sum(0, keepdims=True)
            if l == 1 and self._phi_init is not None:
                init = self._phi_init
            self.phi.append(weight(f"phi_{l}", (r, k), init))
            self.phi_preconditioners.append(weight(f"phi_preconditioner_{l}", (k,), np.zeros(k)))
            if self.recurrent:
                pi = np.eye(k) if self.pi_init == "identity" else np.full((k, k), 1.0 / k)
                self.pi.append(weight(f"pi_{l}", (k, k), pi))
                self.pi_preconditioners.append(
                    weight(f"pi_preconditioner_{l}", (k,), np.zeros(k)))
        self.iterations = weight("iterations", (), 0, dtype=_step_dtype())
        self.built = True

    def phi_products(self):
        """[Phi^1, Phi^1 Phi^2, ..., Phi^1 ... Phi^L]: word distributions of every layer.

        Returns:
            list of float32 [V, K_l] tensors; column k of entry l is topic k of
            layer l+1 projected to the vocabulary (its top rows are its top
            words; reference §6.4). Columns sum to 1.
        """
        products, current = [], None
        for phi in self.phi:
            current = ops.convert_to_tensor(phi) if current is None else ops.matmul(current, phi)
            products.append(current)
        return products

    # ------------------------------------------------------- generative model
    def _prior_parts(self, thetas):
        """Per layer (up, time): Phi^{l+1} theta^{l+1}_j and Pi^l theta^l_{j-1}.

        `up` is None at the top layer, `time` is None without recurrence and is
        zero at j = 1. Both [B, J, K_l].
        """
        parts = []
        for l, theta in enumerate(thetas):
            up = None
            if l + 1 < self.num_layers:
                up = ops.matmul(thetas[l + 1], ops.transpose(self.phi[l + 1]))
            time = None
            if self.recurrent:
                previous = ops.concatenate([ops.zeros_like(theta[:, :1]), theta[:, :-1]], axis=1)
                time = ops.matmul(previous, ops.transpose(self.pi[l]))
            parts.append((up, time))
        return parts

    def gamma_shapes(self, thetas):
        """Prior shapes e^l_j of theta^l_j (reference §1.2), for the ELBO.

        e^l_j = Phi^{l+1} theta^{l+1}_j + Pi^l theta^l_{j-1} (Pi term only for
        j > 1 and when recurrent); at the top layer e^L_1 = 1 and
        e^L_j = Pi^L theta^L_{j-1} (1 for every j without recurrence). The
        prior is Gam(tau0 e, rate tau0). Gradients flow into `thetas`; Phi and
        Pi are constants of the ELBO.

        Args:
            thetas: list over layers of float [B, J, K_l].

        Returns:
            list over layers of float [B, J, K_l].
        """
        shapes = []
        for theta, (up, time) in zip(thetas, self._prior_parts(thetas)):
            if up is not None:
                shapes.append(up if time is None else up + time)
            elif time is None:
                shapes.append(ops.ones_like(theta))
            else:
                first = ops.cast(ops.arange(ops.shape(theta)[1]) == 0, theta.dtype)
                shapes.append(time + first[None, :, None])
        return shapes

    def poisson_rate(self, theta):
        """Rate Phi^1 theta^1_j of the bag of words d_j, float [B, J, V]."""
        return ops.matmul(theta, ops.transpose(self.phi[0]))

    def call(self, thetas):
        """(Poisson rate [B, J, V], list of gamma prior shapes [B, J, K_l])."""
        thetas = self._check_thetas(thetas)
        return self.poisson_rate(thetas[0]), self.gamma_shapes(thetas)

    # ----------------------------------------------------------- augmentation
    def _check_thetas(self, thetas):
        if not isinstance(thetas, (list, tuple)) or len(thetas) != self.num_layers:
            raise ValueError(
                f"thetas must be a list of {self.num_layers} tensors [B, J, K_l] (one per "
                f"layer), got {type(thetas).__name__} of length "
                f"{len(thetas) if isinstance(thetas, (list, tuple)) else '?'}")
        out = []
        for l, (theta, k) in enumerate(zip(thetas, self.topic_sizes)):
            theta = ops.convert_to_tensor(theta)
            if len(theta.shape) != 3 or theta.shape[-1] not in (None, k):
                raise ValueError(
                    f"thetas[{l}] must have shape [B, J, {k}], got {tuple(theta.shape)}")
            out.append(theta)
        return out

    def _check_update_inputs(self, bow, thetas):
        bow = ops.convert_to_tensor(bow)
        if len(bow.shape) != 3 or bow.shape[-1] not in (None, self.vocab_size):
            raise ValueError(
                f"bow must have shape [B, J, {self.vocab_size}] (counts over the topic "
                f"vocabulary), got {tuple(bow.shape)}")
        thetas = [ops.stop_gradient(ops.cast(t, "float32")) for t in self._check_thetas(thetas)]
        for l, theta in enumerate(thetas):
            if None not in (theta.shape[1], bow.shape[1]) and theta.shape[1] != bow.shape[1]:
                raise ValueError(f"thetas[{l}] has {theta.shape[1]} sentences but bow has "
                                 f"{bow.shape[1]}")
        return bow, thetas

    def _key(self, step, layer, phase, sentence=0):
        return random_key(self.seed, step, (layer * 4 + phase) * 65536 + sentence)

    def augment(self, bow, thetas, step=None, offset=0):
        """Latent counts of one mini-batch (reference §4.2), without the update.

        Args:
            bow: float [B, J, V] bag-of-words counts of each sentence's context
                (rounded; negative entries count as 0, reference §8.7).
            thetas: list over layers of float [B, J, K_l] theta samples of the
                same forward pass (treated as constants).
            step: integer step the draws are keyed on (default: `iterations`).
            offset: global index of this batch's first document.

        Returns:
            (phi_counts, pi_counts): lists over layers of float32 [K_{l-1}, K_l]
            and (recurrent only) [K_l, K_l] (rows "to", columns "from") counts.
        """
        bow, thetas = self._check_update_inputs(bow, thetas)
        step = ops.convert_to_tensor(self.iterations) if step is None else step
        parts = self._prior_parts(thetas)
        data = bow
        phi_counts, pi_counts = [], []
        for l, theta in enumerate(thetas):
            counts, latent = multinomial_split(
                data, self.phi[l], theta, self._key(step, l, _MULTINOMIAL), offset)
            phi_counts.append(counts)
            up, time = parts[l]
            top = up is None
            if not self.recurrent:
                if not top:
                    data = crt(latent, self.tau0 * up, self._key(step, l, _CRT), offset)
                continue
            transitions, handed_back, upward = self._backward_pass(
                l, theta, latent, up, time, step, offset)
            pi_counts.append(transitions)
            if not top:
                # Sentence 1: every table goes up (reference §4.2 c).
                first = crt(latent[:, 0] + handed_back, self.tau0 * up[:, 0],
                            self._key(step, l, _CRT, 0), offset)
                data = ops.concatenate([first[:, None], upward[:, 1:]], axis=1)
        return phi_counts, pi_counts

    def _backward_pass(self, l, theta, latent, up, time, step, offset):
        """Backward pass of layer l over sentences J..2 (reference §4.2 b).

        An `ops.fori_loop` (the only sequential part of the sampler): at
        sentence j the customers are this sentence's latent counts plus those
        handed back from sentence j+1; their CRT tables (concentration
        tau0 (Pi theta_{j-1} + Phi^{l+1} theta^{l+1}_j)) are split between time
        and up (lower layers), and the temporal tables are allocated through Pi
        to the topics of sentence j-1.

        Returns:
            (transition counts [K, K], counts handed back to sentence 1 [B, K],
            upward tables [B, J, K] (entry 0 unused; zeros at the top layer)).
        """
        top = up is None
        num_sentences = ops.shape(latent)[1]
        pi = ops.convert_to_tensor(self.pi[l])
        sentence_index = ops.arange(num_sentences)

        def body(t, carry):
            transitions, handed_back, upward = carry
            j = num_sentences - 1 - t
            customers = ops.take(latent, j, axis=1) + handed_back
            shape_time = ops.take(time, j, axis=1)
            if top:
                temporal = crt(customers, self.tau0 * shape_time,
                               self._key(step, l, _CRT, j), offset)
            else:
                shape_up = ops.take(up, j, axis=1)
                tables = crt(customers, self.tau0 * (shape_time + shape_up),
                             self._key(step, l, _CRT, j), offset)
                both = shape_time + shape_up
                p_time = ops.where(both > 0, shape_time / ops.where(both > 0, both, 1.0), 0.0)
                temporal = binomial(tables, p_time, self._key(step, l, _SPLIT, j), offset)
                at_j = ops.cast(ops.equal(sentence_index, j), "float32")[None, :, None]
                upward = upward + (tables - temporal)[:, None, :] * at_j
            allocated, back = multinomial_split(
                temporal[:, None, :], pi, ops.take(theta, j - 1, axis=1)[:, None, :],
                self._key(step, l, _TEMPORAL, j), offset)
            return transitions + allocated, back[:, 0], upward

        return ops.fori_loop(
            0, num_sentences - 1, body,
            (ops.zeros_like(pi), ops.zeros_like(latent[:, 0]), ops.zeros_like(latent)))

    # ----------------------------------------------------------------- update
    def schedule(self, step):
        """(eps_t, kappa_t) of MCMC step `step` (0-based), float64 (float32 without x64)."""
        t = ops.cast(step, _compute_dtype())
        tau = self.step_size_tau
        step_size = self.step_size * ((tau + 1.0 + t) / (tau + 1.0)) ** (-self.step_size_decay)
        forgetting = (t + 1.0) ** (-self.forgetting_decay)
        return step_size, forgetting

    def apply_counts(self, phi_counts, pi_counts, batch_size, step=None):
        """The TLASGR update of every Phi^l, Pi^l given augmented counts (§4.3).

        Deterministic given (counts, step): the Langevin noise is keyed on
        (seed, step, matrix index). Increments `iterations`.

        Args:
            phi_counts, pi_counts: lists as returned by `augment` (summed over
                replicas).
            batch_size: documents in the (global) mini-batch.
            step: step (default: `iterations`).

        Returns:
            dict of float32 scalar diagnostics.
        """
        step = ops.convert_to_tensor(self.iterations) if step is None else step
        step = ops.cast(step, self.iterations.dtype)
        dtype = _compute_dtype()
        step_size, forgetting = self.schedule(step)
        scale = self.num_documents / ops.cast(batch_size, dtype)
        jobs = [(f"phi{l + 1}", var, pre, counts, self.phi_prior)
                for l, (var, pre, counts) in enumerate(
                    zip(self.phi, self.phi_preconditioners, phi_counts))]
        jobs += [(f"pi{l + 1}", var, pre, counts, self.pi_prior)
                 for l, (var, pre, counts) in enumerate(
                     zip(self.pi, self.pi_preconditioners, pi_counts))]
        stats = {"tlasgr_step": ops.cast(step, "float32"),
                 "tlasgr_step_size": ops.cast(step_size, "float32")}
        for index, (name, var, pre, counts, prior) in enumerate(jobs):
            floor = self.preconditioner_floor
            if floor is None:
                floor = prior * int(var.shape[0])
            noise = stateless_standard_normal(tuple(var.shape), self.seed, index, dtype,
                                              step=step)
            # Tensors, not the variables: a mirrored variable passed to the
            # module-level tf.function is captured by its first trace, so under
            # a MirroredStrategy a later call with another variable of the same
            # shape (another matrix or model) would read the first one's values.
            update = _simplex_update_function()
            new_x, new_m, change = update(
                ops.convert_to_tensor(var.value), counts, ops.convert_to_tensor(pre.value),
                noise, step_size, forgetting, scale, prior=float(prior), floor=float(floor))
            var.assign(new_x)
            pre.assign(new_m)
            stats[f"{name}_counts"] = ops.cast(ops.sum(counts), "float32")
            stats[f"{name}_change"] = change
        self.iterations.assign_add(ops.cast(1, self.iterations.dtype))
        return stats

    def update(self, bow, thetas):
        """One TLASGR-MCMC step: augment the mini-batch, then update Phi and Pi.

        Call it inside the compiled train step (a `tf.function` on TensorFlow,
        the jitted stateless step on JAX; e.g. `after_optimizer_step`) after the network
        update, with the theta samples of the same forward pass (Guo et al.
        2020, Algorithm 1). Under a distribution strategy (inside
        `strategy.run`) the replica's documents are keyed by their global
        position, the augmented counts are summed across replicas and every
        replica applies the same update.

        Args:
            bow: float [B, J, V] bag-of-words counts of the sentences' contexts.
            thetas: list over layers of float [B, J, K_l] (no gradient flows).

        Returns:
            dict of float32 scalar diagnostics: ``tlasgr_step``,
            ``tlasgr_step_size`` and per matrix ``phi{l}_counts`` /
            ``pi{l}_counts`` (augmented counts in the batch) and
            ``phi{l}_change`` / ``pi{l}_change`` (max absolute change).
        """
        bow, thetas = self._check_update_inputs(bow, thetas)
        ctx, offset, batch_size = _replica_layout(ops.shape(bow)[0])
        step = ops.convert_to_tensor(self.iterations)
        phi_counts, pi_counts = self.augment(bow, thetas, step, offset)
        if ctx is not None:
            import tensorflow as tf   # a tf.distribute replica context exists
            phi_counts, pi_counts = ctx.all_reduce(tf.distribute.ReduceOp.SUM,
                                                   (phi_counts, pi_counts))
        return self.apply_counts(phi_counts, pi_counts, batch_size, step)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "topic_sizes": list(self.topic_sizes), "num_documents": self.num_documents,
                "recurrent": self.recurrent, "seed": self.seed, "tau0": self.tau0,
                "step_size": self.step_size, "step_size_tau": self.step_size_tau,
                "step_size_decay": self.step_size_decay,
                "forgetting_decay": self.forgetting_decay, "phi_prior": self.phi_prior,
                "pi_prior": self.pi_prior, "preconditioner_floor": self.preconditioner_floor,
                "pi_init": self.pi_init}
