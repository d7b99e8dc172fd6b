"""Token samplers for `generate`: one next token per row from a step's scores.

In the spirit of ``keras_hub.samplers`` (a sampler object, chosen once at
``model.compile(sampler=...)`` or per call, serialisable by `get_config` and
resolved by `get`), written in `keras.ops` only so the same sampler runs in the
compiled generation loop on every Keras backend.

A sampler is called as ``sampler(scores, seed, step)``:

* ``scores``: float32 [N, V] log-probabilities of the next token, banned ids
  (``<pad>``, ``<bos>``, by default ``<unk>``) already at -inf;
* ``seed``, ``step``: int32 scalars. Random draws are a pure function of
  (seed, step, row, id): a 32-bit integer hash (Wellons' "lowbias32" mixer)
  turned into U(0, 1), then Gumbel noise, so that
  ``argmax(scores / temperature + Gumbel)`` is a draw from
  softmax(scores / temperature) (the Gumbel-max trick). No generator state:
  a seed gives the same ids on every run, and the same on TensorFlow and JAX
  (uint32 arithmetic only, which both backends wrap mod 2^32).

It returns int32 [N] token ids.

Example:
>>> import numpy as np
>>> scores = np.log(np.array([[0.1, 0.6, 0.3]], "float32"))
>>> int(GreedySampler()(scores, seed=0, step=0)[0])
1
>>> get("top_k").get_config()["k"]
5
"""

import numbers

import numpy as np
from keras import ops

__all__ = ["Sampler", "GreedySampler", "RandomSampler", "TopKSampler", "TopPSampler",
           "BeamSampler", "get", "serialize", "uniform_noise"]

# lowbias32 (C. Wellons, "Prospecting for hash functions", 2018): xor-shift-multiply mixer.
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_GOLDEN32 = 0x9E3779B9


def _u32(value):
    return ops.cast(value, "uint32")


def _mix32(x):
    """The lowbias32 avalanche mix of uint32 `x` (elementwise)."""
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))
    x = x * _u32(np.uint32(_M1))
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(15)))
    x = x * _u32(np.uint32(_M2))
    return ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))


def uniform_noise(shape, seed, step):
    """U(0, 1) float32 noise of a 2-D `shape` [N, V], a pure function of (seed, step).

    Args:
        shape: (N, V), Python ints.
        seed: int32 scalar (or int).
        step: int32 scalar (or int), e.g. the generation step.

    Returns:
        float32 [N, V] with values (k + 1/2) 2^-24, k in [0, 2^24).

    Example:
    >>> a = uniform_noise((2, 3), seed=1, step=0)
    >>> bool(ops.all(a == uniform_noise((2, 3), seed=1, step=0)))
    True
    >>> bool(ops.all(a == uniform_noise((2, 3), seed=1, step=1)))
    False
    """
    golden = _u32(np.uint32(_GOLDEN32))
    key = _mix32(_mix32(_u32(seed) * golden + golden) + _u32(step) * golden)
    rows, cols = shape
    counter = (_u32(ops.arange(rows, dtype="int32"))[:, None] * _u32(cols)
               + _u32(ops.arange(cols, dtype="int32"))[None, :])
    bits = _mix32(key + counter * golden)
    top = ops.right_shift(bits, _u32(8))
    return (ops.cast(top, "float32") + 0.5) * (2.0 ** -24)


def _gumbel(shape, seed, step):
    u = uniform_noise(shape, seed, step)
    return -ops.log(-ops.log(u))


def _shape(scores):
    shape = ops.shape(scores)
    return shape[0], shape[1]


def _check_positive(name, value, integer=False, upper=None):
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real)
    if integer:
        bad = bad or not isinstance(value, numbers.Integral)
    if bad or not value > 0 or (upper is not None and value > upper):
        bound = f" and <= {upper}" if upper is not None else ""
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} > 0{bound}, got {value!r}")
    return value


class Sampler:
    """Base class: ``sampler(scores, seed, step)`` -> int32 [N] next tokens.

    Subclasses implement `choose`; `get_config` / `from_config` round-trip the
    constructor arguments.
    """

    #: The name `get` accepts for this sampler.
    name = None

    def __call__(self, scores, seed=0, step=0):
        scores = ops.cast(ops.convert_to_tensor(scores), "float32")
        return ops.cast(self.choose(scores, seed, step), "int32")

    def choose(self, scores, seed, step):
        raise NotImplementedError

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))


class GreedySampler(Sampler):
    """The arg-max token (lowest id first on ties); deterministic.

    Example:
    >>> import numpy as np
    >>> int(GreedySampler()(np.array([[0.0, 2.0, 1.0]], "float32"))[0])
    1
    """

    name = "greedy"

    def choose(self, scores, seed, step):
        return ops.argmax(scores, axis=-1)


class RandomSampler(Sampler):
    """A draw from softmax(scores / temperature) over the whole vocabulary.

    Args:
        temperature: > 0; below 1 sharpens, above 1 flattens the distribution.

    Example:
    >>> import numpy as np
    >>> sampler = RandomSampler(temperature=0.7)
    >>> scores = np.log(np.full((1, 4), 0.25, "float32"))
    >>> a = int(sampler(scores, seed=3, step=0)[0])
    >>> a == int(sampler(scores, seed=3, step=0)[0]) and 0 <= a < 4
    True
    """

    name = "random"

    def __init__(self, temperature=1.0):
        self.temperature = float(_check_positive("temperature", temperature))

    def choose(self, scores, seed, step):
        return ops.argmax(scores / self.temperature + _gumbel(_shape(scores), seed, step),
                          axis=-1)

    def get_config(self):
        return {"temperature": self.temperature}


class TopKSampler(Sampler):
    """A draw among the `k` best tokens, from their softmax(scores / temperature).

    The k best are chosen by the model's own scores (before the temperature
    division, whose rounding could reorder near-ties); k = 1 is greedy.

    Args:
        k: integer >= 1, candidates kept (capped at the vocabulary size).
        temperature: > 0.

    Example:
    >>> import numpy as np
    >>> scores = np.log(np.array([[0.05, 0.5, 0.05, 0.4]], "float32"))
    >>> {int(TopKSampler(k=2)(scores, seed=s, step=0)[0]) for s in range(20)} <= {1, 3}
    True
    """

    name = "top_k"

    def __init__(self, k=5, temperature=1.0):
        self.k = int(_check_positive("k", k, integer=True))
        self.temperature = float(_check_positive("temperature", temperature))

    def choose(self, scores, seed, step):
        rows, vocab = _shape(scores)
        k = min(self.k, int(vocab))
        values, indices = ops.top_k(scores, k=k, sorted=True)
        picks = ops.argmax(values / self.temperature + _gumbel((rows, k), seed, step), axis=-1)
        return ops.take_along_axis(indices, ops.expand_dims(picks, -1), axis=-1)[:, 0]

    def get_config(self):
        return {"k": self.k, "temperature": self.temperature}


class TopPSampler(Sampler):
    """Nucleus sampling: a draw among the fewest best tokens whose probability reaches `p`.

    Holtzman et al. (ICLR 2020): tokens sorted by probability are kept while
    the probability mass before them is < p (the best token is always kept),
    then one is drawn from their renormalised softmax(scores / temperature).
    The nucleus is set by the model's own probabilities (temperature 1).

    Args:
        p: in (0, 1], the nucleus mass.
        temperature: > 0.
        k: optional integer >= 1: first keep only the k best (`None`: all).

    Example:
    >>> import numpy as np
    >>> scores = np.log(np.array([[0.05, 0.6, 0.05, 0.3]], "float32"))
    >>> {int(TopPSampler(p=0.8)(scores, seed=s, step=0)[0]) for s in range(30)} <= {1, 3}
    True
    """

    name = "top_p"

    def __init__(self, p=0.9, temperature=1.0, k=None):
        self.p = float(_check_positive("p", p, upper=1.0))
        self.temperature = float(_check_positive("temperature", temperature))
        self.k = None if k is None else int(_check_positive("k", k, integer=True))

    def choose(self, scores, seed, step):
        rows, vocab = _shape(scores)
        k = int(vocab) if self.k is None else min(self.k, int(vocab))
        values, indices = ops.top_k(scores, k=k, sorted=True)
        probs = ops.softmax(values, axis=-1)
        mass_before = ops.cumsum(probs, axis=-1) - probs
        keep = ops.logical_or(mass_before < self.p,
                              ops.arange(k, dtype="int32")[None, :] == 0)
        logits = ops.where(keep, values / self.temperature, -np.inf)
        picks = ops.argmax(logits + _gumbel((rows, k), seed, step), axis=-1)
        return ops.take_along_axis(indices, ops.expand_dims(picks, -1), axis=-1)[:, 0]

    def get_config(self):
        return {"p": self.p, "temperature": self.temperature, "k": self.k}


class BeamSampler(Sampler):
    """Beam search settings: `num_beams` hypotheses kept per sentence.

    With one beam, beam search is greedy search, and as a per-step sampler
    this picks the arg-max (its only use today: the generation loop does not
    yet reorder the recurrent state between beams, so ``num_beams > 1`` is
    refused by `generate` with a clear error).

    Args:
        num_beams: integer >= 1.

    Example:
    >>> import numpy as np
    >>> int(BeamSampler(num_beams=1)(np.array([[0.0, 2.0, 1.0]], "float32"))[0])
    1
    """

    name = "beam"

    def __init__(self, num_beams=5):
        self.num_beams = int(_check_positive("num_beams", num_beams, integer=True))

    def choose(self, scores, seed, step):
        return ops.argmax(scores, axis=-1)

    def get_config(self):
        return {"num_beams": self.num_beams}


_SAMPLERS = {cls.name: cls for cls in
             (GreedySampler, RandomSampler, TopKSampler, TopPSampler, BeamSampler)}


def serialize(sampler):
    """``{"class_name": name, "config": sampler.get_config()}`` (what `get` accepts)."""
    return {"class_name": sampler.name, "config": sampler.get_config()}


def get(identifier):
    """A `Sampler` from an instance, a name or a config dict.

    Args:
        identifier: a `Sampler` (returned as is); a name ``"greedy"``,
            ``"random"``, ``"top_k"``, ``"top_p"`` or ``"beam"`` (default
            arguments); or a dict ``{"class_name": name, "config": {...}}``
            (`serialize`'s output; the class's name, e.g. ``"TopKSampler"``,
            is accepted too).

    Returns:
        A `Sampler`.

    Raises:
        ValueError: an unknown name or a bad identifier (one line).

    Example:
    >>> get({"class_name": "top_p", "config": {"p": 0.5}})
    TopPSampler(p=0.5, temperature=1.0, k=None)
    >>> get(GreedySampler())
    GreedySampler()
    """
    if isinstance(identifier, Sampler):
        return identifier
    if isinstance(identifier, str):
        return _lookup(identifier)()
    if isinstance(identifier, dict):
        if "class_name" not in identifier:
            raise ValueError(f"a sampler config dict needs 'class_name', got {identifier!r}")
        config = identifier.get("config") or {}
        if not isinstance(config, dict):
            raise ValueError(f"a sampler config must be a dict, got {config!r}")
        return _lookup(identifier["class_name"]).from_config(config)
    raise ValueError(f"sampler must be a Sampler, a name in {sorted(_SAMPLERS)} or a config "
                     f"dict, got {identifier!r}")


def _lookup(name):
    by_class = {cls.__name__: cls for cls in _SAMPLERS.values()}
    cls = _SAMPLERS.get(name) or by_class.get(name)
    if cls is None:
        raise ValueError(f"unknown sampler {name!r}; expected one of {sorted(_SAMPLERS)}")
    return cls

