"""Crash-safe checkpoints of a training run, for an exact resume.

A run directory holds (see `tfktopic.runs`)::

    model.keras              best validation perplexity (written atomically)
    backup/state-00003.npz   the complete training state after epoch 3
    backup/best.npz          the weights of model.keras (to rebuild a damaged one)

The *training state* is every variable of the model (weights, MCMC state such
as rGBN's Phi / Pi and counters, every ``keras.random.SeedGenerator`` -- dropout,
Weibull and Gaussian noise), every optimizer variable (moments, iteration
count, hence the learning-rate schedule) and Keras' global seed generator,
plus the epoch and the best validation perplexity. It is written at the end
of each finished epoch, after the validation pass, and the two newest states
are kept. With the data order a function of (seed, epoch) (`epoch_data`),
resuming from the newest intact state replays the interrupted epoch exactly
as the uninterrupted run does: the final weights are bit-identical on CPU.

`TrainingGuard` stops at the first non-finite loss (or perplexity) and then
saves nothing for that epoch, so the last finite checkpoint stays the run's
model.

Example:
>>> guard, callbacks = training_callbacks(out, best=None)  # doctest: +SKIP
>>> model.fit(epoch_data(train, first_epoch), steps_per_epoch=steps,
...           initial_epoch=first_epoch, callbacks=callbacks)       # doctest: +SKIP
"""

import contextlib
import io
import json
import math
import pathlib
import re
import zipfile

import keras
import numpy as np

from tfktopic.atomic import atomic_path, write_bytes
from tfktopic.errors import TfktopicError

__all__ = ["DivergedError", "TrainingGuard", "epoch_data", "intact_keras_file", "read_state_file",
           "recover_model_file", "restore_state", "save_state", "state_variables",
           "training_callbacks", "has_progress", "BACKUP_DIR", "BEST_WEIGHTS"]

BACKUP_DIR = "backup"
BEST_WEIGHTS = "best.npz"
KEEP_STATES = 2
_STATE = re.compile(r"^state-(\d{5,})\.npz$")


class DivergedError(TfktopicError):
    """Training stopped at a non-finite loss; the last finite checkpoint is kept."""


# ----------------------------------------------------------------------- state variables
def state_variables(model):
    """Every variable whose value a resumed run needs, in a fixed order.

    The model's variables (weights, non-trainable state, seed-generator
    states), the optimizer's (built if needed) and Keras' global seed
    generator's state when it exists.

    Args:
        model: a built, compiled Keras model.

    Returns:
        A list of ``keras.Variable``.
    """
    from keras.src.backend.common import global_state

    optimizer = getattr(model, "optimizer", None)
    variables = list(model.variables)
    if optimizer is not None:
        if not optimizer.built:
            strategy = getattr(model, "distribute_strategy", None)
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                optimizer.build(model.trainable_variables)
        variables += list(optimizer.variables)
    generator = global_state.get_global_attribute("global_seed_generator")
    if generator is not None:
        variables.append(generator.state)
    unique, seen = [], set()
    for variable in variables:
        if id(variable) not in seen:
            seen.add(id(variable))
            unique.append(variable)
    return unique


def _npz_bytes(arrays, meta):
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
             **{f"v{i:05d}": a for i, a in enumerate(arrays)})
    return buffer.getvalue()


def read_state_file(path):
    """(arrays, meta) of a state file; `TfktopicError` when it is damaged."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise zipfile.BadZipFile(f"bad CRC in {bad}")
        with np.load(path, allow_pickle=False) as payload:
            meta = json.loads(payload["__meta__"].tobytes().decode("utf-8"))
            arrays = [payload[f"v{i:05d}"] for i in range(int(meta["count"]))]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise TfktopicError(f"{path}: damaged ({type(error).__name__}: {error})") from None
    return arrays, meta


def _assign(variables, arrays, meta, path):
    if len(arrays) != len(variables) or any(
            tuple(a.shape) != tuple(v.shape) for a, v in zip(arrays, variables)):
        raise TfktopicError(f"{path}: holds {len(arrays)} variables that do not match this "
                            f"model's {len(variables)} (another model or tfktopic version?)")
    for variable, array in zip(variables, arrays):
        variable.assign(array)


def save_state(directory, model, epoch, best=None):
    """Write ``state-EPOCH.npz`` atomically and keep only the newest `KEEP_STATES`.

    Args:
        directory: the backup directory (created if missing).
        model: the model being trained.
        epoch: number of finished epochs.
        best: best validation perplexity so far (or `None`).

    Returns:
        The written path.
    """
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    variables = state_variables(model)
    meta = {"epoch": int(epoch), "best_val_ppl": best, "count": len(variables),
            "paths": [getattr(v, "path", "") for v in variables]}
    path = directory / f"state-{int(epoch):05d}.npz"
    write_bytes(path, _npz_bytes([np.asarray(v.numpy()) for v in variables], meta))
    for old in _state_files(directory)[KEEP_STATES:]:
        old.unlink(missing_ok=True)
    return path


def _state_files(directory):
    """State files of `directory`, newest epoch first."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _STATE.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def has_progress(out):
    """Whether run directory `out` holds anything a new command could lose."""
    out = pathlib.Path(out)
    backup = out / BACKUP_DIR
    return bool(_state_files(backup)) or (out / "model.keras").exists() or (
        backup / "latest.weights.h5").exists()


def restore_state(directory, model, log=None):
    """Load the newest intact training state into `model` (and its optimizer).

    A damaged state file (a kill during a write outside this module, a
    disk error) is reported in one line and the previous one is used.

    Args:
        directory: the backup directory.
        model: the built, compiled model.
        log: callable receiving one-line notes (or `None`).

    Returns:
        The state's metadata dict (``epoch``, ``best_val_ppl``), or `None`
        when there is no intact state (a fresh start).

    Raises:
        TfktopicError: a state file that belongs to another model.
    """
    directory = pathlib.Path(directory)
    damaged = []
    for path in _state_files(directory):
        try:
            arrays, meta = read_state_file(path)
        except TfktopicError as error:
            damaged.append(path)
            _note(log, f"{error}; falling back to the previous checkpoint")
            continue
        variables = state_variables(model)
        # The learning rate is the command's, not the state's: after a divergence the
        # same command with a lower --learning-rate resumes from the last finite state.
        rates = [(v, v.numpy()) for v in getattr(model.optimizer, "variables", [])
                 if getattr(v, "name", "") == "learning_rate"]
        _assign(variables, arrays, meta, path)
        for variable, value in rates:
            variable.assign(value)
        return meta
    if damaged:
        _note(log, f"{directory}: no intact training state (damaged: "
                   f"{', '.join(p.name for p in damaged)}); training starts again from epoch 0")
    legacy = directory / "latest.weights.h5"
    if legacy.exists():
        raise TfktopicError(f"{legacy}: a checkpoint of an older tfktopic (BackupAndRestore), "
                            f"which cannot be resumed exactly; delete {directory} to train "
                            "from scratch")
    return None


def _note(log, message):
    if log is not None:
        log(message)


# ------------------------------------------------------------------------- model.keras
def intact_keras_file(path):
    """Whether `path` is a complete ``.keras`` archive (zip with intact CRCs)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None and "config.json" in archive.namelist()
    except (OSError, zipfile.BadZipFile, EOFError):
        return False


def save_model_file(model, path):
    """``model.save(path)`` through a temporary file (atomic)."""
    with atomic_path(path) as tmp:
        model.save(tmp)


def save_best(model, out):
    """Write ``out/model.keras`` and ``out/backup/best.npz`` (its weights), atomically."""
    out = pathlib.Path(out)
    (out / BACKUP_DIR).mkdir(parents=True, exist_ok=True)
    variables = list(model.variables)
    write_bytes(out / BACKUP_DIR / BEST_WEIGHTS,
                _npz_bytes([np.asarray(v.numpy()) for v in variables],
                           {"count": len(variables)}))
    save_model_file(model, out / "model.keras")


def recover_model_file(out, model, log=None):
    """Rebuild a damaged ``out/model.keras`` from ``backup/best.npz``.

    Called when a run starts: `model` is the run's built model (its current
    values are put back afterwards).

    Args:
        out: the run directory.
        model: the run's built model.
        log: callable receiving one-line notes.

    Returns:
        True when model.keras is (now) intact or absent with nothing to
        rebuild; False when it was damaged and could not be rebuilt (the
        next best epoch writes it again).
    """
    out = pathlib.Path(out)
    target = out / "model.keras"
    if not target.exists() or intact_keras_file(target):
        return True
    best = out / BACKUP_DIR / BEST_WEIGHTS
    try:
        arrays, meta = read_state_file(best)
    except TfktopicError:
        target.unlink()
        _note(log, f"{target}: damaged and no intact {best}; removed it, the next best "
                   "epoch writes it again")
        return False
    variables = list(model.variables)
    current = [np.asarray(v.numpy()) for v in variables]
    _assign(variables, arrays, meta, best)
    try:
        save_model_file(model, target)
    finally:
        for variable, value in zip(variables, current):
            variable.assign(value)
    _note(log, f"{target}: damaged; rebuilt it from {best}")
    return True


# ------------------------------------------------------------------------------- data
def epoch_data(dataset, first_epoch):
    """The training stream from epoch `first_epoch` on, and the steps of one epoch.

    `dataset` must shuffle with a fixed seed and ``reshuffle_each_iteration``;
    repeated, epoch k's order is the k-th reshuffle -- a function of (seed, k)
    -- whether the run started at epoch 0 or resumes at k (the first
    ``k * steps`` batches are skipped).

    Args:
        dataset: one epoch of training batches (a finite `tf.data.Dataset`, or the
            numpy batches of `tfktopic.data.batches` under another backend).
        first_epoch: number of epochs already done.

    Returns:
        (dataset, steps_per_epoch).
    """
    from tfktopic.data.batches import ShuffledBatches

    if isinstance(dataset, ShuffledBatches):  # numpy batches (not TensorFlow)
        if len(dataset) < 1:
            raise TfktopicError("the training data has no batch")
        dataset.start_epoch(int(first_epoch))  # its order is a function of (seed, epoch)
        return dataset, len(dataset)
    from tfktopic.data.pipeline import prefetched

    steps = int(dataset.cardinality())
    if steps < 1:
        raise TfktopicError(f"the training data has no batch (cardinality {steps})")
    stream = dataset.repeat()
    if first_epoch:
        stream = stream.skip(int(first_epoch) * steps)
    return prefetched(stream), steps


# -------------------------------------------------------------------------- callbacks
def _non_finite(logs):
    """The entries of Keras `logs` whose value is NaN or infinite."""
    bad = {}
    for key, value in (logs or {}).items():
        try:
            number = float(np.asarray(value))
        except (TypeError, ValueError):
            continue  # not a scalar
        if not math.isfinite(number):
            bad[key] = number
    return bad


class TrainingGuard(keras.callbacks.Callback):
    """Stops training at the first non-finite training loss or perplexity.

    Unlike ``keras.callbacks.TerminateOnNaN`` it also catches an infinite
    perplexity (a finite but huge loss) and remembers where it happened, so
    that `Checkpoint` saves nothing of the diverged epoch.

    Args:
        learning_rate: the run's learning rate (for the hint of `message`).

    Attributes:
        diverged: None, or (epoch, step or None, {name: value}).
    """

    def __init__(self, learning_rate=None):
        super().__init__()
        self.learning_rate = learning_rate
        self.diverged = None
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        bad = _non_finite(logs)
        if bad and self.diverged is None:
            self.diverged = (self.epoch + 1, batch + 1, bad)
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        bad = _non_finite({k: v for k, v in (logs or {}).items() if not k.startswith("val_")})
        if bad and self.diverged is None:
            self.diverged = (epoch + 1, None, bad)
            self.model.stop_training = True

    def message(self, out):
        """One line: where training diverged, what is kept, and the hint."""
        epoch, step, bad = self.diverged
        where = f"epoch {epoch}" + (f" step {step}" if step else "")
        values = ", ".join(f"{k}={v}" for k, v in bad.items())
        model_file = pathlib.Path(out) / "model.keras"
        kept = (f"the last finite checkpoint is kept in {model_file}" if model_file.exists()
                else "no epoch finished before it, so there is no checkpoint")
        lr = f" (it was {self.learning_rate:g})" if self.learning_rate is not None else ""
        return f"training diverged at {where} ({values}); {kept}; lower --learning-rate{lr}"


class Checkpoint(keras.callbacks.Callback):
    """After each finished epoch: the best ``model.keras`` and the full training state.

    Args:
        out: the run directory.
        guard: the run's `TrainingGuard` (nothing is saved once it fired).
        best: best validation perplexity of the epochs already done.
    """

    def __init__(self, out, guard, best=None):
        super().__init__()
        self.out = pathlib.Path(out)
        self.guard = guard
        self.best = best

    def on_epoch_end(self, epoch, logs=None):
        if self.guard.diverged is not None:
            return
        val = (logs or {}).get("val_ppl")
        if val is not None and math.isfinite(float(val)) and (
                self.best is None or float(val) < self.best):
            self.best = float(val)
            save_best(self.model, self.out)
        save_state(self.out / BACKUP_DIR, self.model, epoch + 1, self.best)


def training_callbacks(out, best=None, learning_rate=None):
    """The crash-safety callbacks of a run: (guard, [guard, checkpoint]).

    Args:
        out: the run directory.
        best: best validation perplexity of the epochs already done.
        learning_rate: the run's learning rate (for the divergence hint).

    Returns:
        (`TrainingGuard`, list of callbacks to pass to ``fit`` -- put callbacks
        that record progress after them).
    """
    guard = TrainingGuard(learning_rate)
    return guard, [guard, Checkpoint(out, guard, best)]
