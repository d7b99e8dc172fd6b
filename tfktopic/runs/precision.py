"""The numeric precision of a run: ``tfktopic train --precision`` (Keras dtype policies).

``float32`` (default) computes everything in float32. ``mixed_bfloat16`` and
``mixed_float16`` keep every variable in float32 and compute the language
model (embeddings, recurrent layers, the output projection) in 16 bits, while
each model keeps in float32 what must stay there: the token log-softmax and
its loss (`tfktopic.evaluation.perplexity.masked_token_log_probs` casts the
logits), the topic encoders, their KL terms and the Weibull/Gamma special
functions, TLASGR's counts and Phi/Pi, the LDA E-step, optimizer slots and the
SG-MCMC noise. Under ``mixed_float16`` Keras wraps the optimizer in a
`keras.optimizers.LossScaleOptimizer` (``compile(auto_scale_loss=True)``),
and `TopicLanguageModel.train_step` scales the loss through it.

Example:
>>> with precision_policy("mixed_bfloat16"):
...     model = LSTMLanguageModel(100)          # doctest: +SKIP
>>> model.compute_dtype, model.variable_dtype   # doctest: +SKIP
('bfloat16', 'float32')
"""

import contextlib

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")

__all__ = ["PRECISIONS", "check_precision", "precision_policy"]


def check_precision(name):
    """`name` if it is one of `PRECISIONS`, else a `ValueError` naming ``--precision``."""
    if name not in PRECISIONS:
        raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    return name


@contextlib.contextmanager
def precision_policy(name):
    """Keras' global dtype policy set to `name` inside the block, restored after it.

    Layers take the global policy when they are created, so a model built
    inside the block keeps computing in `name` after it (and a `.keras` file
    saved from it reloads with the same policy).

    Args:
        name: one of `PRECISIONS`.
    """
    import keras

    check_precision(name)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)
