"""Training to convergence: early stopping on validation perplexity, decided from the history.

One rule for every model (DESIGN.md §5a): after each epoch the validation
perplexity is computed exactly as the test perplexity is (`score_perplexity`'s
examples and model call); the run stops when `patience` epochs in a row have
not lowered the best one, or at the maximum epoch count, and the best epoch's
weights (``model.keras``) are what is scored. The decision is a function of
the recorded per-epoch history (``run.json``'s ``progress.history``) alone, so
a run killed and resumed stops at exactly the epoch the uninterrupted run
would, and a finished run is recognised as finished.

Example:
>>> history = [{"val_ppl": 90.0}, {"val_ppl": 85.0}, {"val_ppl": 86.0}, {"val_ppl": 85.5}]
>>> stop_reason(history, patience=2, max_epochs=40)["stopped_by"]
'early_stopping'
>>> stop_reason(history, patience=3, max_epochs=40) is None
True
"""

import math

import keras

__all__ = ["best_epoch", "stop_reason", "EarlyStopping"]


def best_epoch(history, monitor="val_ppl"):
    """The 1-based epoch of the lowest finite `monitor` value (the first on ties), or `None`."""
    best, where = math.inf, None
    for epoch, logs in enumerate(history, start=1):
        value = logs.get(monitor)
        if value is not None and math.isfinite(float(value)) and float(value) < best:
            best, where = float(value), epoch
    return where


def stop_reason(history, patience, max_epochs, monitor="val_ppl"):
    """Why training stops after the epochs of `history`, or `None` to go on.

    Args:
        history: per-epoch logs (dicts with ``val_ppl``), epoch 1 first.
        patience: stop after this many epochs without a lower ``val_ppl``
            (`None` or 0: never early).
        max_epochs: the epoch budget.
        monitor: the logged value to minimise (e.g. ``valid_avg_ppl``, the
            perplexity of a running average of posterior samples).

    Returns:
        `None`, or a dict ``stopped_by`` ("early_stopping" or "max_epochs"),
        ``epochs`` (done), ``best_epoch``, ``patience`` and ``max_epochs``.
    """
    done = len(history)
    best = best_epoch(history, monitor)
    record = {"epochs": done, "best_epoch": best, "patience": patience,
              "max_epochs": max_epochs}
    if patience and best is not None and done - best >= int(patience):
        return {"stopped_by": "early_stopping", **record}
    if patience and best is None and done >= int(patience):  # no finite value at all
        return {"stopped_by": "early_stopping", **record}
    if done >= max_epochs:
        return {"stopped_by": "max_epochs", **record}
    return None


class EarlyStopping(keras.callbacks.Callback):
    """Stops `fit` when `stop_reason` says "early_stopping" for the recorded history.

    Args:
        history: a callable returning the per-epoch logs recorded so far
            (put this callback after the one that records them).
        patience: epochs without a lower ``val_ppl``.
    """

    def __init__(self, history, patience):
        super().__init__()
        self.history_source = history
        self.patience = patience

    def on_epoch_end(self, epoch, logs=None):
        reason = stop_reason(self.history_source(), self.patience, math.inf)
        if reason is not None:
            self.model.stop_training = True
