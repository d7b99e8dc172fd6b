"""Posterior sample collection and predictive model averaging (Gan et al. 2017).

SG-MCMC turns training into sampling: after a burn-in, every ``thin`` steps
the current weights are one posterior sample theta_s. The Bayesian predictive
distribution is the average of the samples' predictive **probabilities**
(Gan et al. eq. 5):

    p(y | x, D) ~= (1/S) sum_s p(y | x, theta_s)

-- never an average of weights, and not of log-probabilities (the authors'
Lua code averages log-probabilities, a geometric mean; it is offered as
``mean="geometric"`` only to reproduce that code).

Storing weights for every sample is impractical for large LMs (reference A2:
14-19 GB for 72 samples of the large PTB model), so `SampleCollector` stores
each sample's predictions on fixed evaluation data instead: the log-probability
of every predicted target token (language models) or the class probabilities
(classifiers). From these `PredictiveSamples` computes the averaged
perplexity / accuracy for any subset of samples -- thinned, forward or
backward collection (Gan et al. §5.1, Fig. 2) -- and the per-example
predictive standard deviation used for the TREC uncertainty analysis (Fig. 6).
"""

import json
import math
import pathlib

import keras
import numpy as np
from keras import ops

from tfktopic import backend

__all__ = ["SampleCollector", "PredictiveSamples", "collection_indices",
           "target_log_probs", "class_probabilities", "SCHEMES"]

SCHEMES = ("thinned", "forward", "backward")
_INDEX_FILE = "samples.json"


def collection_indices(num_collected, num_samples, scheme="thinned"):
    """Which of K collected samples a budget of S samples uses (Gan et al. §5.1).

    Args:
        num_collected: K, the number of samples collected after burn-in.
        num_samples: S <= K.
        scheme: "forward" (the first S), "backward" (the last S) or "thinned"
            (S samples evenly spread over all K, the last one included).

    Returns:
        int array of S sample indices in [0, K).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if not 1 <= num_samples <= num_collected:
        raise ValueError(
            f"num_samples must be in [1, {num_collected}] (samples collected), got {num_samples}")
    if scheme == "forward":
        return np.arange(num_samples)
    if scheme == "backward":
        return np.arange(num_collected - num_samples, num_collected)
    # Every (K/S)-th sample, counted back from the last one.
    step = num_collected / num_samples
    return np.sort(num_collected - 1 - np.floor(np.arange(num_samples) * step).astype(int))


def target_log_probs(model, batch, from_logits=True):
    """Log-probability of every predicted target of an LM batch, flattened.

    Args:
        model: a model whose call returns [..., T, V] logits (or log-probs).
        batch: a dict with ``targets`` and ``mask``.
        from_logits: whether the model returns unnormalised logits.

    Returns:
        float32 [n] log p(y_t | ...) for the positions where ``mask`` is 1, in
        row-major order. The number n depends on the mask: on TensorFlow this
        traces into a `tf.function` (`tf.boolean_mask`); on other backends call
        it eagerly (outside `jax.jit`).
    """
    predictions = ops.cast(model(batch, training=False), "float32")
    if from_logits:
        predictions = ops.log_softmax(predictions, axis=-1)
    targets = ops.cast(batch["targets"], "int32")
    log_prob = ops.squeeze(ops.take_along_axis(predictions, targets[..., None], axis=-1), -1)
    keep = ops.cast(batch["mask"], "float32") > 0
    if backend.is_tensorflow():
        import tensorflow as tf
        return tf.boolean_mask(log_prob, keep)
    return ops.convert_to_tensor(np.asarray(log_prob)[np.asarray(keep)])


def class_probabilities(model, batch):
    """Class probabilities of a classifier batch, [B, C].

    The model's output is taken as probabilities when it is non-negative and
    sums to one; a single sigmoid unit [B, 1] becomes [B, 2].
    """
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
    probs = ops.cast(model(inputs, training=False), "float32")
    if probs.shape[-1] == 1:
        probs = ops.concatenate([1.0 - probs, probs], axis=-1)
    return probs


class PredictiveSamples:
    """Per-sample predictions of collected posterior samples, and their average.

    Holds an array [K, n] of per-target log-probabilities (``kind="lm"``) or
    [K, n, C] class probabilities (``kind="classification"``), in memory or as
    a read-only memmap of the files a `SampleCollector` wrote.

    Args:
        predictions: a list or array of per-sample predictions.
        kind: "lm" or "classification".
        steps: optional optimizer step at which each sample was taken.
        labels: int [n] class labels (classification).

    Example:
    >>> samples = PredictiveSamples([np.log([0.5, 0.25]), np.log([0.25, 0.5])])
    >>> round(samples.perplexity(), 4)   # exp(-mean log 0.375)
    2.6667
    """

    def __init__(self, predictions, kind="lm", steps=None, labels=None):
        if kind not in ("lm", "classification"):
            raise ValueError(f"kind must be 'lm' or 'classification', got {kind!r}")
        if len(predictions) == 0:
            raise ValueError("predictions is empty: no sample has been collected yet")
        self.kind = kind
        self._predictions = list(predictions)
        shapes = {tuple(np.shape(p)) for p in self._predictions}
        if len(shapes) != 1:
            raise ValueError(f"all samples must predict the same evaluation data; shapes {shapes}")
        self.steps = None if steps is None else list(steps)
        self.labels = None if labels is None else np.asarray(labels)

    def __len__(self):
        return len(self._predictions)

    @classmethod
    def load(cls, directory, name="eval"):
        """Read the samples a `SampleCollector` wrote under `directory`.

        Args:
            directory: the collector's ``directory``.
            name: which evaluation set (the keys of ``eval_data``).

        Returns:
            A `PredictiveSamples` backed by read-only memmaps.
        """
        directory = pathlib.Path(directory)
        index_path = directory / _INDEX_FILE
        if not index_path.exists():
            raise FileNotFoundError(f"{index_path}: no sample index (not a SampleCollector directory)")
        index = json.loads(index_path.read_text())
        if name not in index["files"]:
            raise KeyError(f"{index_path}: no evaluation set {name!r}; has {sorted(index['files'])}")
        predictions = [np.load(directory / f, mmap_mode="r") for f in index["files"][name]]
        labels = index.get("labels", {}).get(name)
        return cls(predictions, kind=index["kind"], steps=index["steps"], labels=labels)

    def _log_probs(self, indices):
        """[S, n] per-target log-probabilities (LM) of the chosen samples."""
        return np.stack([np.asarray(self._predictions[i], np.float64) for i in indices])

    def _indices(self, num_samples, scheme, indices):
        if indices is not None:
            return np.asarray(indices)
        if num_samples is None:
            return np.arange(len(self))
        return collection_indices(len(self), num_samples, scheme)

    def average_log_prob(self, num_samples=None, scheme="thinned", indices=None,
                         mean="arithmetic", floor=None):
        """log of the sample-averaged probability of every target (eq. 5).

        Args:
            num_samples: S; all samples when None.
            scheme: "thinned", "forward" or "backward" (ignored with indices).
            indices: explicit sample indices.
            mean: "arithmetic" (eq. 5, log-sum-exp over samples) or
                "geometric" (mean of log-probabilities, the Lua code).
            floor: add this to the averaged probability before the log
                (the Theano code's ``+1e-6``); None for none.

        Returns:
            float64 [n].
        """
        if self.kind != "lm":
            raise ValueError("average_log_prob is for language models; use average_probabilities")
        log_probs = self._log_probs(self._indices(num_samples, scheme, indices))
        if mean == "geometric":
            averaged = log_probs.mean(axis=0)
        elif mean == "arithmetic":
            top = log_probs.max(axis=0)
            averaged = top + np.log(np.exp(log_probs - top).mean(axis=0))
        else:
            raise ValueError(f"mean must be 'arithmetic' or 'geometric', got {mean!r}")
        if floor is not None:
            averaged = np.log(np.exp(averaged) + floor)
        return averaged

    def perplexity(self, num_samples=None, scheme="thinned", indices=None, mean="arithmetic",
                   floor=None):
        """Perplexity of the averaged predictive distribution.

        exp(-(1/n) sum_t log p_bar(y_t)); arguments as `average_log_prob`.
        """
        return math.exp(-float(self.average_log_prob(num_samples, scheme, indices, mean,
                                                     floor).mean()))

    def sample_perplexities(self):
        """Perplexity of each sample on its own, float [K]."""
        if self.kind != "lm":
            raise ValueError("sample_perplexities is for language models")
        return np.array([math.exp(-float(np.mean(p))) for p in self._predictions])

    def average_probabilities(self, num_samples=None, scheme="thinned", indices=None):
        """Mean and standard deviation over samples of the predictive probabilities.

        For classifiers: [n, C] mean class probabilities and [n, C] standard
        deviations (the uncertainty of Gan et al. Fig. 6). For language
        models: [n] mean and std of the probability of each target.
        """
        chosen = self._indices(num_samples, scheme, indices)
        if self.kind == "lm":
            probs = np.exp(self._log_probs(chosen))
        else:
            probs = np.stack([np.asarray(self._predictions[i], np.float64) for i in chosen])
        return probs.mean(axis=0), probs.std(axis=0)

    def accuracy(self, num_samples=None, scheme="thinned", indices=None, labels=None):
        """Accuracy of the arg-max of the averaged class probabilities."""
        labels = self.labels if labels is None else np.asarray(labels)
        if self.kind != "classification" or labels is None:
            raise ValueError("accuracy needs classification samples and labels")
        mean, _ = self.average_probabilities(num_samples, scheme, indices)
        return float((mean.argmax(axis=-1) == labels).mean())

    def nll(self, num_samples=None, scheme="thinned", indices=None, labels=None):
        """Mean negative log-likelihood of the averaged predictive distribution."""
        if self.kind == "lm":
            return -float(self.average_log_prob(num_samples, scheme, indices).mean())
        labels = self.labels if labels is None else np.asarray(labels)
        if labels is None:
            raise ValueError("nll of a classifier needs labels")
        mean, _ = self.average_probabilities(num_samples, scheme, indices)
        picked = mean[np.arange(len(labels)), labels]
        return -float(np.log(np.maximum(picked, 1e-300)).mean())

    def curve(self, scheme="thinned", sizes=None):
        """Perplexity (LM) or NLL (classifier) against the number of samples (Fig. 2).

        Args:
            scheme: "thinned", "forward" or "backward".
            sizes: the S values; 1..K when None.

        Returns:
            A list of (S, value) pairs.
        """
        sizes = range(1, len(self) + 1) if sizes is None else sizes
        metric = self.perplexity if self.kind == "lm" else self.nll
        return [(int(s), metric(int(s), scheme)) for s in sizes]


class SampleCollector(keras.callbacks.Callback):
    """Collects posterior samples of an SG-MCMC run as predictions on eval data.

    After ``burn_in_steps`` optimizer steps (or ``burn_in_epochs`` epochs),
    every ``thin`` steps (or every epoch with ``thin="epoch"``) the model is run
    deterministically (``training=False``, so dropout is off; Gan et al. §5)
    over each evaluation set and its predictions are stored: in memory, or as
    one ``.npy`` file per sample under ``directory`` (so large evaluation sets
    and long runs do not fill memory). The running arithmetic average is
    reported in the logs as ``<name>_avg_ppl`` (LMs) or ``<name>_avg_acc``
    (classifiers), alongside ``<name>_sample_ppl`` / ``_sample_acc`` of the
    current sample and ``num_samples``.

    Args:
        eval_data: a tf.data.Dataset (or any iterable of batches), or a dict
            name -> dataset. LM batches are dicts with ``targets`` and ``mask``;
            classifier batches are (inputs, labels) pairs. The data must be
            deterministic (not reshuffled), so every sample predicts the same
            targets in the same order.
        kind: "lm" or "classification".
        burn_in_steps: optimizer steps before the first sample.
        burn_in_epochs: alternatively, whole epochs before the first sample.
        thin: steps between samples, or "epoch" for one sample per epoch.
        max_samples: stop collecting after this many samples (None: no limit).
            With a limit the oldest samples are kept (forward collection); use
            `PredictiveSamples` to choose thinned / backward subsets.
        directory: write each sample's predictions here (``.npy`` + an index);
            None keeps them in memory.
        save_weights: also save each sample's weights (``sample_K.weights.h5``
            under ``directory``), e.g. for generation from individual samples.
        from_logits: whether an LM returns logits (True) or log-probabilities.
        verbose: print one line per collected sample.

    Example:
    >>> collector = SampleCollector(valid_ds, burn_in_epochs=2, thin=200,
    ...                             directory="runs/ptb/samples")    # doctest: +SKIP
    >>> model.compile(optimizer=PSGLD(1e-3, num_examples=n_tokens))  # doctest: +SKIP
    >>> model.fit(train_ds, epochs=10, callbacks=[collector])        # doctest: +SKIP
    >>> collector.samples().perplexity(num_samples=20, scheme="thinned")  # doctest: +SKIP
    """

    def __init__(self, eval_data, kind="lm", burn_in_steps=0, burn_in_epochs=None, thin=100,
                 max_samples=None, directory=None, save_weights=False, from_logits=True,
                 verbose=0):
        super().__init__()
        if kind not in ("lm", "classification"):
            raise ValueError(f"kind must be 'lm' or 'classification', got {kind!r}")
        if not (thin == "epoch" or (isinstance(thin, int) and thin >= 1)):
            raise ValueError(f"thin must be a positive number of steps or 'epoch', got {thin!r}")
        if int(burn_in_steps) < 0 or (burn_in_epochs is not None and int(burn_in_epochs) < 0):
            raise ValueError("burn_in_steps and burn_in_epochs must be >= 0")
        if max_samples is not None and int(max_samples) < 1:
            raise ValueError(f"max_samples must be >= 1 or None, got {max_samples}")
        if save_weights and directory is None:
            raise ValueError("save_weights=True needs a directory to write the weights to")
        self.eval_data = eval_data if isinstance(eval_data, dict) else {"eval": eval_data}
        self.kind = kind
        self.burn_in_steps = int(burn_in_steps)
        self.burn_in_epochs = None if burn_in_epochs is None else int(burn_in_epochs)
        self.thin = thin
        self.max_samples = None if max_samples is None else int(max_samples)
        self.directory = None if directory is None else pathlib.Path(directory)
        self.save_weights = bool(save_weights)
        self.from_logits = from_logits
        self.verbose = verbose
        self.steps = []
        self._memory = {name: [] for name in self.eval_data}
        self._files = {name: [] for name in self.eval_data}
        self._labels = {}
        self._running = {}
        self._epoch = 0
        self._predict = None
        if self.directory is not None:
            self._resume_from_directory()

    # -- bookkeeping -------------------------------------------------------
    def _resume_from_directory(self):
        """Continue a collection whose index exists (e.g. after a crash)."""
        index_path = self.directory / _INDEX_FILE
        if not index_path.exists():
            return
        index = json.loads(index_path.read_text())
        if index.get("kind") != self.kind or set(index["files"]) != set(self.eval_data):
            raise ValueError(f"{index_path}: an existing collection of a different kind or "
                             "with different evaluation sets; use another directory")
        self.steps = list(index["steps"])
        self._files = {name: list(files) for name, files in index["files"].items()}
        self._labels = {name: np.asarray(v) for name, v in index.get("labels", {}).items()}

    def _write_index(self):
        payload = {"kind": self.kind, "steps": self.steps, "files": self._files,
                   "labels": {k: v.tolist() for k, v in self._labels.items()}}
        tmp = self.directory / (_INDEX_FILE + ".tmp")
        tmp.write_text(json.dumps(payload))
        tmp.replace(self.directory / _INDEX_FILE)

    @property
    def num_samples(self):
        """Samples collected so far."""
        return len(self.steps)

    def samples(self, name=None):
        """The collected samples of one evaluation set as `PredictiveSamples`."""
        name = name or next(iter(self.eval_data))
        if name not in self.eval_data:
            raise KeyError(f"no evaluation set {name!r}; have {sorted(self.eval_data)}")
        if self.directory is not None:
            self._write_index()
            return PredictiveSamples.load(self.directory, name)
        return PredictiveSamples(self._memory[name], kind=self.kind, steps=self.steps,
                                 labels=self._labels.get(name))

    # -- prediction --------------------------------------------------------
    def _predictor(self):
        if self._predict is None:
            model, from_logits = self.model, self.from_logits
            if self.kind == "lm":
                predict = lambda batch: target_log_probs(model, batch, from_logits)
            else:
                predict = lambda batch: class_probabilities(model, batch)
            if backend.is_tensorflow():
                import tensorflow as tf   # one traced graph per batch signature
                predict = tf.function(predict)
            self._predict = predict
        return self._predict

    def _predict_all(self, name, dataset):
        predict = self._predictor()
        outputs, labels = [], []
        for batch in dataset:
            outputs.append(np.asarray(predict(batch)))
            if self.kind == "classification":
                labels.append(np.asarray(batch[1]).reshape(-1))
        if self.kind == "classification" and name not in self._labels:
            self._labels[name] = np.concatenate(labels).astype(int)
        return np.concatenate(outputs).astype(np.float32)

    def _recurrent_states(self):
        """State variables of stateful RNN layers (successive minibatches)."""
        found = []
        for layer in self.model._flatten_layers(include_self=False, recursive=True):
            if getattr(layer, "stateful", False) and getattr(layer, "states", None) is not None:
                found.extend(layer.states)
        return found

    def collect(self, step=None):
        """Take the current weights as one sample now; returns the logged values.

        A stateful model is evaluated from a zero state and its training state
        is restored afterwards, so collecting does not disturb the stream.
        """
        step = int(self.model.optimizer.iterations.numpy()) if step is None else int(step)
        states = self._recurrent_states()
        saved = [v.numpy() for v in states]
        try:
            return self._collect(step, states)
        finally:
            for variable, value in zip(states, saved):
                variable.assign(value)

    def _collect(self, step, states):
        index = self.num_samples
        logs = {}
        for name, dataset in self.eval_data.items():
            for variable in states:  # every evaluation stream starts from zero
                variable.assign(np.zeros(variable.shape, variable.dtype))
            prediction = self._predict_all(name, dataset)
            if self.directory is not None:
                self.directory.mkdir(parents=True, exist_ok=True)
                filename = f"{name}_sample_{index:05d}.npy"
                np.save(self.directory / filename, prediction)
                self._files[name].append(filename)
            else:
                self._memory[name].append(prediction)
            logs.update(self._update_running(name, prediction))
        self.steps.append(step)
        if self.save_weights:
            self.model.save_weights(str(self.directory / f"sample_{index:05d}.weights.h5"))
        if self.directory is not None:
            self._write_index()
        logs["num_samples"] = float(self.num_samples)
        if self.verbose:
            shown = ", ".join(f"{k} {v:.4g}" for k, v in logs.items())
            print(f"SampleCollector: sample {index + 1} at step {step}: {shown}")
        return logs

    def _update_running(self, name, prediction):
        """Running arithmetic mean of probabilities over the samples so far."""
        count = len(self._files[name]) if self.directory is not None else len(self._memory[name])
        probs = np.exp(prediction.astype(np.float64)) if self.kind == "lm" else prediction
        if name not in self._running or count == 1:
            running = self._running[name] = probs.astype(np.float64)
            if count > 1:  # resumed: rebuild the mean from the stored samples
                running = self._running[name] = self.samples(name).average_probabilities()[0]
        else:
            running = self._running[name]
            running += (probs - running) / count
        if self.kind == "lm":
            return {f"{name}_sample_ppl": math.exp(-float(prediction.mean())),
                    f"{name}_avg_ppl": math.exp(-float(np.log(running).mean()))}
        labels = self._labels[name]
        return {f"{name}_sample_acc": float((prediction.argmax(-1) == labels).mean()),
                f"{name}_avg_acc": float((running.argmax(-1) == labels).mean())}

    # -- callback hooks ----------------------------------------------------
    def _burnt_in(self, step):
        if self.burn_in_epochs is not None:
            return self._epoch >= self.burn_in_epochs
        return step >= self.burn_in_steps

    def _full(self):
        return self.max_samples is not None and self.num_samples >= self.max_samples

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        # Count steps on the host: reading `iterations` every batch would
        # synchronise with the device on the training hot path.
        self._step += 1
        if self.thin == "epoch" or self._full():
            return
        step = self._step
        if not self._burnt_in(step):
            return
        start = self.burn_in_steps if self.burn_in_epochs is None else self._burn_in_step
        if step > start and (step - start) % self.thin == 0 and step not in self.steps:
            self.collect(step)

    def on_epoch_end(self, epoch, logs=None):
        self._epoch = epoch + 1
        if self.burn_in_epochs is not None and self._epoch == self.burn_in_epochs:
            self._burn_in_step = int(self.model.optimizer.iterations.numpy())
        step = int(self.model.optimizer.iterations.numpy())
        if self.burn_in_epochs is not None:
            past_burn_in = self._epoch > self.burn_in_epochs
        else:
            past_burn_in = step > self.burn_in_steps
        if self.thin == "epoch" and past_burn_in:
            if not self._full():
                logs_out = self.collect()
                if logs is not None:
                    logs.update(logs_out)
        elif logs is not None and self.num_samples:
            # Report the running average at the end of every epoch.
            for name in self.eval_data:
                if name in self._running:
                    running = self._running[name]
                    key = f"{name}_avg_ppl" if self.kind == "lm" else f"{name}_avg_acc"
                    logs[key] = (math.exp(-float(np.log(running).mean())) if self.kind == "lm"
                                 else float((running.argmax(-1) == self._labels[name]).mean()))
            logs["num_samples"] = float(self.num_samples)

    def on_train_begin(self, logs=None):
        # With burn_in_epochs and step thinning, the offset is the step at the
        # end of burn-in; a resumed run (initial_epoch past burn-in) starts at 0.
        self._burn_in_step = 0
        self._step = int(self.model.optimizer.iterations.numpy())
