"""Every family's Keras workflow in a process where TensorFlow cannot be imported.

`run()` is called by `tests/test_tensorflow_free.py` in a fresh ``KERAS_BACKEND=jax``
process after `tests.no_tensorflow.block()` (the simulated install without TensorFlow);
importing this module must therefore come after the block.
"""

import os
import sys
import tempfile

import numpy as np

from tests import models_backend_cases as cases

#: The model families of `tests.models_backend_cases` (doc_lstm_chunked is the doc_lstm
#: model on chunked batches: the CLI smoke run of tests/test_cli_backends.py covers it).
FAMILIES = ("lstm", "doc_lstm", "doc_topicrnn", "topicrnn", "tcnlm", "lda_lstm", "rgbn_rnn",
            "gbn_rnn")


def _refuses(call):
    """The one-line message of the `TfktopicError` that `call()` raises ('' if none)."""
    from tfktopic.errors import TfktopicError
    try:
        call()
    except TfktopicError as error:
        return str(error)
    return ""


def run():
    """Import every package, then fit / evaluate / generate / save every family.

    Returns:
        dict: ``backend``, ``tensorflow_modules`` (the TF modules imported: none),
        per family ``<family>_loss`` (the one epoch's loss), ``_eval``, ``_generated``
        (token ids [2, <= 6]), ``_round_trip`` (max |logits after - before| of the .keras
        round trip), and the messages ``export`` / ``strategy`` of the refused features.
    """
    import keras

    import tfktopic
    import tfktopic.bayes
    import tfktopic.cli
    import tfktopic.data
    import tfktopic.layers
    import tfktopic.models
    import tfktopic.runs  # noqa: F401 - the import is the check

    result = {"backend": keras.backend.backend()}
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            model, data = cases.build(family, dropout=0.1, seed=3)
            history = model.fit(data, epochs=1, batch_size=cases.B, verbose=0, shuffle=False)
            result[f"{family}_loss"] = np.asarray(history.history["loss"])
            result[f"{family}_eval"] = np.asarray(
                model.evaluate(data, verbose=0, return_dict=True)["loss"])
            generated = model.generate(max_length=6, num_sentences=2, seed=0)
            result[f"{family}_generated"] = np.asarray(getattr(generated, "tokens", generated))
            path = os.path.join(tmp, f"{family}.keras")
            model.save(path)
            before = np.asarray(model(data, training=False))
            after = np.asarray(keras.saving.load_model(path)(data, training=False))
            result[f"{family}_round_trip"] = np.abs(after - before).max()
        from tfktopic.distribute import get_strategy
        from tfktopic.export import export_saved_model
        result["export"] = _refuses(lambda: export_saved_model(model, os.path.join(tmp, "sm")))
        result["strategy"] = _refuses(lambda: get_strategy("mirrored"))
        with get_strategy("none").scope():  # the default strategy: a no-op scope
            pass
    result["tensorflow_modules"] = sorted(
        name for name in sys.modules if name.split(".")[0] in ("tensorflow", "tf_keras",
                                                                 "tensorflow_probability"))
    return result
