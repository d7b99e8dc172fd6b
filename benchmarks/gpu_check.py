"""GPU check: train every family at the papers' sizes on real text under JAX, one JSON record.

For a machine with JAX and a CUDA GPU but no TensorFlow (issue 49). Each family is
trained for `--steps` timed steps after `--warmup` untimed ones (compilation) on sentence
windows / document streams / document chunks of the corpus, with the model classes and
numpy batches only (no tf.data), and the record says, per family:

* ``loss_first`` / ``loss_last``: the mean training objective of the first and the last
  10 timed steps; ``nll_first`` / ``nll_last``: the same for the language model's NLL per
  token (the logged ``nll``), and ``loss_fell`` (nll_last < nll_first). The check reads the
  LM's NLL, not the objective, as tests/library/test_models_backends.py does for TCNLM and
  (r)GBN-RNN: their objectives add the topic model's bag-of-words terms, which vary from
  batch to batch more than they fall in a few steps (measured, tiny sizes, 20 steps on
  shuffled Lee batches: TCNLM's objective 40.3 -> 42.5 per token);
* ``tokens_per_s``: predicted (unmasked) target tokens per second of the timed steps
  (each step waits for its loss, as `train_on_batch` does);
* ``peak_bytes``: the device's peak memory in use after the family
  (`jax.Device.memory_stats()["peak_bytes_in_use"]`; null where the platform has none,
  e.g. the CPU; the peak is the process's, so it is the largest family so far);
* ``parameters``, ``batch`` and ``seconds``; or ``error`` if the family failed.

Sizes (``--tiny`` shrinks every dimension for a CPU test): LSTM 600 units, embeddings
300, 100 topics (TopicRNN, TCNLM, LDA-LSTM, document TopicRNN); rGBN-RNN / GBN-RNN
600-512-256 units over 100-80-50 topics; pSGLD (Gan et al. 2017) on the LSTM.

    KERAS_BACKEND=jax python -m benchmarks.gpu_check                  # Lee corpus
    KERAS_BACKEND=jax python -m benchmarks.gpu_check --corpus PATH --out record.json

See benchmarks/gpu_check.md for the packages it needs and the budget.
"""

import argparse
import json
import os
import sys
import time

#: Every family, in the order they run.
FAMILIES = ("lstm", "psgld_lstm", "doc_lstm", "topicrnn", "doc_topicrnn", "tcnlm",
            "lda_lstm", "rgbn_rnn", "gbn_rnn")

#: The papers' sizes, the --tiny ones (a CPU test) and small ones (benchmarks.backend_speed).
SIZES = {
    "paper": {"embedding": 300, "hidden": 600, "topics": 100, "rgbn_hidden": (600, 512, 256),
              "rgbn_topics": (100, 80, 50), "encoder": (256, 256), "max_vocab": 10_000,
              "min_count": 2, "batch": 64, "chunk_docs": 8, "lda_passes": 2, "learning_rate": 1e-3},
    "small": {"embedding": 64, "hidden": 128, "topics": 20, "rgbn_hidden": (128, 96, 64),
              "rgbn_topics": (20, 16, 10), "encoder": (64,), "max_vocab": 5_000,
              "min_count": 2, "batch": 32, "chunk_docs": 4, "lda_passes": 1,
              "learning_rate": 3e-3},
    "tiny": {"embedding": 16, "hidden": 32, "topics": 5, "rgbn_hidden": (32, 24, 16),
             "rgbn_topics": (5, 4, 3), "encoder": (16,), "max_vocab": 2_000, "min_count": 3,
             "batch": 16, "chunk_docs": 2, "lda_passes": 1, "learning_rate": 1e-2},
}
BPTT = 30          # predicted tokens per window (all families)
SENTENCES = 8      # J, sentences per rGBN-RNN document chunk (rgbn_rnn.md §5.5)
LOSS_WINDOW = 10   # steps averaged at each end for the loss-falls check


class Data:
    """The corpus as the three kinds of batches the families read (numpy only).

    Args:
        corpus: a `tfktopic.data.corpora.Corpus`.
        size: one of `SIZES`' values.
    """

    def __init__(self, corpus, size):
        from tfktopic.data.contexts import document_sequences, sentence_examples
        from tfktopic.data.vocab import TopicVocabulary, Vocabulary

        self.corpus = corpus
        self.size = size
        self.lm_vocab = Vocabulary.build(corpus, min_count=size["min_count"],
                                         max_size=size["max_vocab"])
        self.topic_vocab = TopicVocabulary.build(corpus, self.lm_vocab)
        # The training context of the sentence models: every other sentence of the document.
        self.sentences = sentence_examples(corpus, self.lm_vocab, self.topic_vocab,
                                           max_len=BPTT, protocol="all_other")
        self.chunks = document_sequences(corpus, self.lm_vocab, self.topic_vocab,
                                         sentences_per_chunk=SENTENCES, max_len=BPTT,
                                         protocol="all_other")
        self._streams = None
        self._rng = None

    def sentence_batches(self, seed=0):
        """Endless shuffled batches of sentence windows with ``context_bow`` and
        ``doc_targets``."""
        import numpy as np

        examples, batch = self.sentences, self.size["batch"]
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(len(examples))
            for start in range(0, len(order) - batch + 1, batch):
                rows = order[start:start + batch]
                yield {"tokens": examples.tokens[rows], "targets": examples.targets[rows],
                       "mask": examples.mask[rows],
                       "context_bow": np.stack([examples.context_bow(i) for i in rows]),
                       "doc_targets": examples.document_targets[rows]}

    def chunk_batches(self, seed=0):
        """Endless shuffled batches of document chunks [D, J, T] with per-window
        ``context_bow`` [D, J, V_c]."""
        import numpy as np

        chunks, batch = self.chunks, self.size["chunk_docs"]
        width, J = chunks.topic_vocab_size, chunks.tokens.shape[1]
        mask = (np.arange(BPTT)[None, None] < chunks.lengths[..., None]).astype(np.float32)
        rng = np.random.default_rng(seed)
        while True:
            order = rng.permutation(len(chunks))
            for start in range(0, len(order) - batch + 1, batch):
                rows = order[start:start + batch]
                bow = np.stack([[np.bincount(chunks.context(m, j), minlength=width)
                                 for j in range(J)] for m in rows]).astype(np.float32)
                yield {"tokens": chunks.tokens[rows], "targets": chunks.targets[rows],
                       "mask": mask[rows], "context_bow": bow}

    def stream_batches(self, context=None, seed=0):
        """Endless windows of parallel document streams (``reset`` flags), in a new
        document order each pass, with a ``context_bow`` for `context`."""
        import numpy as np
        from tfktopic.data import streams as stream_module

        if self._streams is None:
            self._streams = stream_module.document_streams(self.corpus, self.lm_vocab,
                                                           self.topic_vocab)
        rng = np.random.default_rng(seed)
        keys = ("tokens", "targets", "mask", "reset", "doc_targets") + (
            ("context_bow",) if context else ())
        while True:
            order = rng.permutation(len(self.corpus)).tolist()
            for batch in stream_module.stream_batches(self._streams, self.size["batch"], BPTT,
                                                      order=order, context=context):
                yield {k: batch[k] for k in keys}

    @property
    def num_tokens(self):
        """Predicted tokens of the training windows (pSGLD's N)."""
        return self.sentences.num_targets


def build(family, data, size):
    """(compiled model, endless batch iterator) of `family` at `size`."""
    import keras

    V, V_c = len(data.lm_vocab), len(data.topic_vocab)
    E, H, K = size["embedding"], size["hidden"], size["topics"]
    batches = data.sentence_batches()
    # Adam's step is the size's: 1e-3 at the papers' sizes; the tiny models need 1e-2 for
    # their loss to fall visibly in 24 steps (measured at 1e-3: lstm 7.59 -> 7.57).
    optimizer = keras.optimizers.Adam(size["learning_rate"])
    if family in ("lstm", "psgld_lstm"):
        from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
        model = LSTMLanguageModel(V, E, H)
        if family == "psgld_lstm":
            from tfktopic.bayes.sgmcmc import PSGLD
            optimizer = PSGLD(learning_rate=2e-3, num_examples=data.num_tokens, seed=0)
    elif family == "doc_lstm":
        from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel
        model = DocumentLSTMLanguageModel(V, E, H, max_streams=size["batch"])
        batches = data.stream_batches()
    elif family == "doc_topicrnn":
        from tfktopic.models.topicrnn.document import DocumentTopicRNN
        model = DocumentTopicRNN(V, data.topic_vocab.lm_to_topic, num_topics=K, hidden_dim=H,
                                 embedding_dim=E, encoder_units=size["encoder"],
                                 max_streams=size["batch"], seed=0)
        batches = data.stream_batches(context="all_other")
    elif family == "topicrnn":
        from tfktopic.models.topicrnn import TopicRNN
        model = TopicRNN(V, data.topic_vocab.lm_to_topic, num_topics=K, hidden_dim=H,
                         embedding_dim=E, encoder_units=size["encoder"], seed=0)
    elif family == "tcnlm":
        from tfktopic.models.tcnlm import TCNLM
        model = TCNLM(V, V_c, num_topics=K, embedding_dim=E, hidden_dim=H,
                      ntm_units=size["encoder"], seed=0)
    elif family == "lda_lstm":
        from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel, fit_lda
        lda = fit_lda(data.corpus, data.topic_vocab, num_topics=K, passes=size["lda_passes"])
        model = LDALSTMLanguageModel(V, V_c, num_topics=K, embedding_dim=E, hidden_dim=H,
                                     lda=lda)
    elif family in ("rgbn_rnn", "gbn_rnn"):
        from tfktopic.models.rgbn.model import RGBNRNN
        model = RGBNRNN(V, V_c, num_documents=len(data.chunks), num_layers=3,
                        hidden_sizes=size["rgbn_hidden"], topic_sizes=size["rgbn_topics"],
                        embedding_dim=E, recurrent=family == "rgbn_rnn", seed=0)
        batches = data.chunk_batches()
    else:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    model.compile(optimizer=optimizer)
    return model, batches


def peak_bytes():
    """The first device's peak bytes in use, or None where it reports no memory stats."""
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def run_steps(model, batches, steps, warmup, fit_arguments=None):
    """`warmup` untimed then `steps` timed `train_on_batch` steps.

    Args:
        model: a compiled model.
        batches: an iterator of dict batches with a ``mask``.
        steps, warmup: timed and untimed steps.
        fit_arguments: optional function batch -> `train_on_batch` keyword arguments (a
            plain Keras model's x / y / sample_weight); default: the batch dict as ``x``.

    Returns:
        (timed steps' losses, their LM NLLs per token (the logged ``nll``; the loss where a
        model logs none), their predicted tokens (mask sum), their seconds, last batch).
    """
    import numpy as np

    losses, nlls, tokens, seconds = [], [], 0.0, 0.0
    for step in range(warmup + steps):
        batch = next(batches)
        arguments = fit_arguments(batch) if fit_arguments else {"x": batch}
        model.reset_metrics()   # the step's own loss, not a running mean
        tick = time.perf_counter()
        logs = model.train_on_batch(**arguments, return_dict=True)
        loss = float(logs["loss"])           # waits for the step
        if step >= warmup:
            seconds += time.perf_counter() - tick
            tokens += float(np.sum(batch["mask"]))
            losses.append(loss)
            nlls.append(float(logs.get("nll", loss)))
    return losses, nlls, tokens, seconds, batch


def train(family, data, size, steps, warmup):
    """Train `family` for `warmup` + `steps` steps: its record (see the module docstring)."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    start = time.perf_counter()
    model, batches = build(family, data, size)
    losses, nlls, tokens, seconds, batch = run_steps(model, batches, steps, warmup)
    window = min(LOSS_WINDOW, max(len(losses) // 2, 1))
    mean = lambda values: round(float(np.mean(values)), 4)
    first, last = mean(nlls[:window]), mean(nlls[-window:])
    return {"loss_first": mean(losses[:window]), "loss_last": mean(losses[-window:]),
            "nll_first": first, "nll_last": last,
            "loss_fell": bool(np.isfinite(last) and last < first),
            "tokens_per_s": round(tokens / seconds, 1), "timed_steps": steps,
            "parameters": int(model.count_params()),
            "batch": list(np.shape(batch["tokens"])), "peak_bytes": peak_bytes(),
            "seconds": round(time.perf_counter() - start, 1)}


def environment():
    """Versions, device and whether TensorFlow got imported."""
    import jax
    import keras

    device = jax.devices()[0]
    return {"backend": keras.backend.backend(), "jax": jax.__version__,
            "keras": keras.__version__, "platform": device.platform,
            "device_kind": device.device_kind, "device_count": jax.device_count(),
            "tensorflow_imported": "tensorflow" in sys.modules}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="lee",
                        help="corpus name or path for tfktopic.data.load_corpus (default lee)")
    parser.add_argument("--out", default=os.path.join("benchmarks", "results", "gpu_check.json"))
    parser.add_argument("--steps", type=int, default=60, help="timed steps per family")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, from: {', '.join(FAMILIES)}")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (a CPU test)")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"--families: unknown {', '.join(unknown)}; choose from "
                     f"{', '.join(FAMILIES)}")
    if args.steps < 2 or args.warmup < 0:
        parser.error(f"--steps must be >= 2 and --warmup >= 0, got {args.steps}, {args.warmup}")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    if keras.backend.backend() != "jax":
        parser.error(f"the GPU check runs on JAX; KERAS_BACKEND is {keras.backend.backend()!r}")
    from tfktopic.data.corpora import load_corpus

    size = SIZES["tiny" if args.tiny else "paper"]
    start = time.perf_counter()
    data = Data(load_corpus(args.corpus), size)
    record = {**environment(), "corpus": args.corpus, "sizes": "tiny" if args.tiny else "paper",
              "lm_vocab": len(data.lm_vocab), "topic_vocab": len(data.topic_vocab),
              "steps": args.steps, "warmup": args.warmup, "families": {}}
    for family in families:
        try:
            record["families"][family] = train(family, data, size, args.steps, args.warmup)
        except Exception as error:   # one family's failure is reported, the others still run
            record["families"][family] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(family, json.dumps(record["families"][family]), flush=True)
    record["tensorflow_imported"] = "tensorflow" in sys.modules
    record["all_losses_fell"] = all(r.get("loss_fell", False)
                                    for r in record["families"].values())
    record["seconds"] = round(time.perf_counter() - start, 1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump(record, handle, indent=1)
    print(f"wrote {args.out}: all losses fell: {record['all_losses_fell']}, "
          f"{record['seconds']} s", flush=True)
    return 0 if record["all_losses_fell"] else 1


if __name__ == "__main__":
    sys.exit(main())
