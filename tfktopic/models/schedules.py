"""Loss-weight schedules of the topic-guided models' training (issue 14's topic-quality options).

* `optimizer_step` -- the optimizer steps a model has taken (the schedules' clock).
* `annealing_weight` -- linear KL annealing min(1, step / warmup_steps) (Bowman et
  al. 2016), the ``kl_warmup_steps`` option of `TCNLM` and `TopicRNN`.
* `after_warmup` -- 0 for the first ``warmup_steps`` steps, then 1 (TCNLM's
  ``topic_warmup_steps``: the LM term is left out while the topic model warms up).

Example:
>>> [float(annealing_weight(s, 4)) for s in (0, 2, 8)]
[0.0, 0.5, 1.0]
>>> [float(after_warmup(s, 2)) for s in (1, 2)]
[0.0, 1.0]
"""

from keras import ops

__all__ = ["optimizer_step", "annealing_weight", "after_warmup", "check_steps"]


def check_steps(name, value):
    """A warm-up length: an int >= 0 (ValueError naming `name` otherwise)."""
    try:
        valid = not isinstance(value, bool) and float(value).is_integer() and value >= 0
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def optimizer_step(model):
    """Optimizer steps taken so far, float32 scalar (0 when the model has no optimizer).

    In `train_step` the objective is computed before `apply_gradients`, so the
    k-th step (0-based) sees k.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return ops.zeros((), "float32")
    return ops.cast(optimizer.iterations, "float32")


def annealing_weight(step, warmup_steps):
    """min(1, step / warmup_steps): 0 at step 0, 1 from `warmup_steps` on (1 if 0 steps).

    Args:
        step: optimizer steps taken (number or scalar tensor).
        warmup_steps: int >= 0.

    Returns:
        float32 scalar in [0, 1].
    """
    if not warmup_steps:
        return ops.ones((), "float32")
    return ops.minimum(1.0, ops.cast(step, "float32") / float(warmup_steps))


def after_warmup(step, warmup_steps):
    """1.0 once `warmup_steps` steps are done, else 0.0 (float32 scalar)."""
    return ops.cast(ops.cast(step, "float32") >= float(warmup_steps), "float32")
