#!/usr/bin/env python
"""Mutation testing of tfktopic's mathematical core (a developer tool).

A mutant is a copy of the package (in a scratch directory) with one small
realistic change to the mathematics: a swapped weight, a wrong activation, a
dropped term, an operator or a constant changed. Each mutant runs the tests
that guard that code; a mutant whose tests still pass *survives* and points
at a missing test. Nothing in the working tree is modified.

Two kinds of mutants:

* **named** (`MUTATIONS` below): the realistic bugs of issue 17, each paired
  with the test written for that property (`--named`, the default). Each must
  be *killed by that test*, not only by an incidental one.
* **generated** (`--auto`): every arithmetic operator (+ <-> -, * <-> /),
  activation (sigmoid <-> tanh, exp <-> log), numeric constant (c -> c + 1) and
  integer subscript (i -> i + 1) of the functions of the core modules
  (`CORE`), one at a time, each running the test files mapped to its module.
  Long: meant for a quiet machine (see CONTRIBUTING.md).

Usage:
    python tools/mutate.py --list
    python tools/mutate.py                     # the named mutants
    python tools/mutate.py --only tcnlm-wb-ub-swap
    python tools/mutate.py --auto tfktopic/layers/hoisted_lstm.py --max-mutants 40
    python tools/mutate.py --auto all --report mutants.json
    python tools/mutate.py --auto all --report mutants.json --resume   # continue it
    python tools/mutate.py --auto MODULE --report mutants.json --resume --retry-survivors
    python tools/mutate.py --merge a.json b.json --report all.json  # b's verdicts win

Exit status: 0 when every mutant is killed, 1 when one survives, 2 on a
mutation that no longer applies (the code it targets moved: update it).
"""
import argparse
import ast
import copy
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The named mutants of issue 17: (old, new) text edits applied to the one
#: file under tfktopic/ (searched recursively, so a module split keeps them
#: working) that contains every `old` exactly once, and the tests that must
#: kill each (pytest node ids; the first is the test written for the property).
MUTATIONS = [
    {"id": "tcnlm-wb-ub-swap",
     "what": "TCNLM recurrent topic factors use W_b instead of U_b",
     "edits": [("ops.matmul(ops.expand_dims(t, 0), self.recurrent_topic_kernel)",
                "ops.matmul(ops.expand_dims(t, 0), self.input_topic_kernel)")],
     "tests": ["tests/library/test_reference_equivalence.py::"
               "test_tcnlm_fast_layer_equals_numpy_eq_12_over_a_sequence"]},
    {"id": "tcnlm-sigmoid-candidate",
     "what": "sigmoid instead of tanh for the LSTM candidate (TCNLM eq. 15)",
     "edits": [("ops.sigmoid(pre_i) * ops.tanh(pre_c)", "ops.sigmoid(pre_i) * ops.sigmoid(pre_c)")],
     "tests": ["tests/library/test_reference_equivalence.py::"
               "test_tcnlm_fast_layer_equals_numpy_eq_12_over_a_sequence"]},
    {"id": "tcnlm-fast-sigmoid-candidate",
     "what": "the fast path (factorized_recurrence) uses sigmoid for the candidate (eq. 15)",
     "edits": [("tf.tanh(pre[2:3]), tf.sigmoid(pre[3:])], axis=0)",
                "tf.sigmoid(pre[2:3]), tf.sigmoid(pre[3:])], axis=0)")],
     "tests": ["tests/library/test_reference_equivalence.py::"
               "test_tcnlm_fast_layer_equals_numpy_eq_12_over_a_sequence"]},
    {"id": "tcnlm-fast-drop-dc",
     "what": "the fast path's backward pass drops the carried cell gradient dc",
     "edits": [("return dh_prev, dc * f, d_topic + d_a * a, d_pre, d_factors",
                "return dh_prev, 0.0 * dc * f, d_topic + d_a * a, d_pre, d_factors")],
     "tests": ["tests/library/test_factorized_fast_path.py"]},
    {"id": "tlasgr-zero-noise",
     "what": "TLASGR Langevin noise set to zero (an optimiser, not a sampler)",
     "edits": [("/ m_bar) * noise", "/ m_bar) * (0.0 * noise)")],
     "tests": ["tests/library/test_tlasgr_sampler.py::"
               "test_tlasgr_samples_have_the_dirichlet_posterior_mean_and_spread"]},
    {"id": "tlasgr-noise-x2",
     "what": "TLASGR Langevin noise std doubled",
     "edits": [("/ m_bar) * noise", "/ m_bar) * (2.0 * noise)")],
     "tests": ["tests/library/test_tlasgr_sampler.py::"
               "test_tlasgr_samples_have_the_dirichlet_posterior_mean_and_spread"]},
    {"id": "tlasgr-noise-half",
     "what": "TLASGR Langevin noise std halved (sqrt(eps x / M) instead of sqrt(2 eps x / M))",
     "edits": [("ops.sqrt(2.0 * step_size * ops.maximum(x, 0.0) / m_bar)",
                "ops.sqrt(0.5 * step_size * ops.maximum(x, 0.0) / m_bar)")],
     "tests": ["tests/library/test_tlasgr_sampler.py::"
               "test_tlasgr_samples_have_the_dirichlet_posterior_mean_and_spread"]},
    {"id": "hoisted-swap-c-o",
     "what": "HoistedLSTM reads the c and o gate slices swapped",
     "edits": [("z_i, z_f, z_c, z_o = tf.split(", "z_i, z_f, z_o, z_c = tf.split(")],
     "tests": ["tests/library/test_reference_equivalence.py::"
               "test_hoisted_lstm_values_and_gradients_equal_a_numpy_lstm"]},
    {"id": "hoisted-drop-dc",
     "what": "HoistedLSTM backward pass drops the carried cell gradient dc",
     "edits": [("return tf.matmul(dz, recurrent_t), dc * f_t, dz",
                "return tf.matmul(dz, recurrent_t), 0.0 * dc * f_t, dz")],
     "tests": ["tests/library/test_reference_equivalence.py::"
               "test_hoisted_lstm_values_and_gradients_equal_a_numpy_lstm"]},
    {"id": "collection-logprob-averaging",
     "what": "SG-MCMC predictive average of log p (geometric) instead of p (Gan et al. eq. 5)",
     "edits": [("averaged = top + np.log(np.exp(log_probs - top).mean(axis=0))",
                "averaged = log_probs.mean(axis=0)")],
     "tests": ["tests/library/test_collection.py::"
               "test_averaging_samples_beats_the_last_sample_on_real_text"]},
    {"id": "rgbn-logprob-averaging",
     "what": "rGBN S-sample perplexity averages log p instead of p",
     "edits": [("lambda s, acc: (s + 1, ops.logaddexp(acc, log_probs(batch))),",
                "lambda s, acc: (s + 1, acc + log_probs(batch)),"),
               ("log_mean = log_sum - math.log(num_samples)",
                "log_mean = log_sum / num_samples")],
     "tests": ["tests/library/test_rgbn_rnn.py::"
               "test_fit_learns_keeps_topics_on_the_simplex_and_beats_unigram"]},
]

#: The reason shared by the sites of `int(np.random.randint(0, 2**31 - 1))`-style draws of
#: a fresh seed when ``seed=None``: which seeds can come out is not behaviour.
_FRESH_SEED = ("`seed=None` draws a fresh random seed; its range is not behaviour: every seed "
               "in it is valid (larger ones are folded or taken as int64) and none is "
               "reproducible by design")


def _fresh_seed_sites(module, line, columns):
    """EXPLAINED entries of a fresh-seed draw at `line` (columns of 0, the `-`, 31, 1;
    a column of None: that site does not exist there)."""
    zero, minus, exponent, one = columns
    sites = [("{0}: constant 0 -> 1", zero), ("{0}: Sub -> Add", minus),
             ("{0}: constant 2 -> 3", minus), ("{0}: constant 31 -> 32", exponent),
             ("{0}: constant 1 -> 2", one)]
    return {(module, f"line {line}:" + site.format(column)): _FRESH_SEED
            for site, column in sites if column is not None}


#: Shared reasons of `EXPLAINED` (each written once; the sites are listed there).
_EXTRA_DROPOUT = ("one Dropout layer more than the L + 1 that the model calls: never called, "
                  "no weights, not in the config")
_SHARED_DROPOUT_RATE = ("the L + 1 Dropout layers share one rate: the embedding's dropout "
                        "through the second layer (called twice, its seed generator "
                        "advancing) draws masks of the same law")
_BUILD_READS_LAST_AXIS = ("a `build` given [batch axes, features]: the layers built here "
                          "(Dense, LSTMCell, TopicGate, the factorised cell) read only the "
                          "last axis, so another batch or time axis, or one axis fewer, "
                          "builds the same weights")


#: Generated survivors with the reason no test can or should kill them: (module, change) ->
#: reason. Most change no output at all; the others change only printing, speed, or the
#: bits of a random draw but not its law (a default seed's range, a last-bit rounding).
#: The summary lists them apart; only an unexplained survivor fails the run. A key names
#: the site by line and column, so editing the module above it needs this updated.
EXPLAINED = {
    ("tfktopic/models/tcnlm/factorized_lstm.py", "line 140:38: Add -> Sub"):
        "`_stacked_draws` offsets an integer seed per gate slice so the slices are "
        "independent draws; seed - i offsets them as well (distinct seeds, same law)",
    ("tfktopic/models/lstm/lstm_lm.py", "line 147:58: constant 1 -> 2"):
        _EXTRA_DROPOUT,
    ("tfktopic/models/lstm/lstm_lm.py", "line 168:26: constant 0 -> 1"):
        _SHARED_DROPOUT_RATE,
    ("tfktopic/models/lstm/lstm_lm.py", "line 64:46: constant 0 -> 1"):
        "the [N, 0] conditioning of a model without topics only carries the row count N; "
        "generation_step never reads its columns, so [N, 1] generates the same ids",
    ("tfktopic/models/tcnlm/factorized_lstm.py", "line 388:45: constant 1 -> 2"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/rgbn/model.py", "line 169:39: constant 1.0 -> 2.0"):
        "RGBNRNN's dropout check is repeated by its TopicGatedLSTMStack, which raises the "
        "same `dropout must be in [0, 1)` for dropout = 1 (test_bad_arguments)",
    **{("tfktopic/models/rgbn/model.py", f"line 224:{site}"):
       "the embedding dropout's seed offset (seed + 7919) only has to differ from the gate "
       "dropouts' (seed + 10 i + j, small): seed - 7919 and seed + 7920 do too"
       for site in ("57: Add -> Sub", "64: constant 7919 -> 7920")},
    ("tfktopic/layers/hoisted_lstm.py", "line 186:38: constant 0 -> 1"):
        "a stateful LSTM's two state variables (h and c) have the same [rows, units] shape: "
        "the row count read from states[1] is the one of states[0]",
    ("tfktopic/layers/hoisted_lstm.py", "line 232:18: Sub -> Add"):
        "the XLA path pads the rows up to a bucket multiple; `+ 1` instead of `- 1` pads "
        "a bucket more at most, and the padded rows (independent sequences) are cut off: "
        "same outputs, more work",
    ("tfktopic/models/topicrnn/stopword_gate.py", "line 168:72: constant 1 -> 2"):
        "`topic_bias` appends zero columns to B^T theta for the stop words to read; they "
        "read column V_c, which is 0 with one appended column or two",
    ("tfktopic/layers/topic_decoder.py", "line 73:28: constant 0 -> 1"):
        "`topic_diversity` returns 0 early for fewer than 2 topics; reading the word count "
        "instead only changes which inputs take the shortcut: one topic computes 0 anyway "
        "(the diagonal is masked) and one word makes every angle 0",
    ("tfktopic/layers/topic_decoder.py", "line 163:31: Div -> Mult"):
        "`lda_logits` centres each row's log: a row scale s cancels (log(beta s) and "
        "log(beta / s) centre alike), so normalising by x s instead of / s changes only "
        "which entries within a factor s^2 of the 1e-10 floor get floored",
    ("tfktopic/layers/topic_decoder.py", "line 277:55: constant 1 -> 2"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/topicrnn/model.py", "line 169:50: constant 1 -> 2"):
        "`weights.reshape(-1, K)`: numpy infers any negative size, so `reshape(-2, K)` is "
        "the same [N, K] array",
    ("tfktopic/layers/topic_encoders.py", "line 105:28: constant 1 -> 2"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/layers/topic_encoders.py", "line 119:20: Add -> Sub"):
        "the reparameterised draw mu + sigma eps with eps ~ N(0, I): eps is symmetric, so "
        "mu - sigma eps is the same law of theta and of its gradients (the KL and the "
        "ELBO's expectation are unchanged; only which draw a seed gives differs)",
    ("tfktopic/models/rgbn/prior.py", "line 150:36: constant 1 -> 2"):
        "`topic_thetas` fills the unfixed layers below the highest fixed one top-down; a "
        "stop of -2 adds a step l = -1 that writes Phi^1 theta^1 into the top layer, which "
        "is then either fixed (skipped) or unfixed and overwritten by the bottom-up loop",
    ("tfktopic/models/rgbn/weibull.py", "line 91:26: Add -> Sub"):
        "`lam + zeros_like(k)` only takes the broadcast shape of k and lam; `lam - "
        "zeros_like(k)` has the same shape (and values)",
    ("tfktopic/models/rgbn/encoder.py", "line 96:56: Add -> Sub"):
        "the Weibull encoder's initialisers get distinct seeds (seed + i); seed - i keeps "
        "them distinct: other draws of the same truncated normal",
    ("tfktopic/models/tcnlm/model.py", "line 225:58: constant 1 -> 2"):
        _EXTRA_DROPOUT,
    ("tfktopic/models/tcnlm/model.py", "line 280:26: constant 0 -> 1"):
        _SHARED_DROPOUT_RATE,
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 105:63: Add -> Sub"):
        "the gate's three initialisers take seeds seed + 0, 1, 2 (a stack's layers are 10 "
        "apart); seed - i keeps them distinct within and across layers: other draws of the "
        "same uniform",
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 112:79: constant 2 -> 3"):
        "the candidate kernel's seed offset 2 -> 3 stays distinct from the gate's other two "
        "(0, 1) and from the next layer's (10 apart): other draws of the same uniform",
    ("tfktopic/models/tcnlm/model.py", "line 354:91: constant 1 -> 2"):
        "the MoE head's gathered rows are not bucket-padded (bucket 1); a bucket of 2 pads "
        "at most one row of t = 0 and mask 0: the mixture's log floor (1e-30) keeps it "
        "finite, so it adds exactly 0 to the NLL and the token count",
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 203:41: constant 0 -> 1"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 201:46: constant 0 -> 1"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 203:71: constant 0 -> 1"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 280:53: Add -> Sub"):
        "the stack's layers take seeds seed + 10 l (their gates + 0, 1, 2); seed - 10 l "
        "keeps every seed distinct: other draws of the same laws",
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 280:60: constant 10 -> 11"):
        "the stack's layers take seeds seed + 10 l (their gates + 0, 1, 2); 11 apart they "
        "stay distinct: other draws of the same laws",
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 301:31: constant 1 -> 2"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/rgbn/topic_gated_lstm.py", "line 301:61: constant 0 -> 1"):
        _BUILD_READS_LAST_AXIS,
    ("tfktopic/models/topicrnn/model.py", "line 327:91: Add -> Sub"):
        "the L + 1 dropout layers get distinct seeds (seed + i); seed - i keeps them "
        "distinct: other masks of the same law",
    ("tfktopic/models/topicrnn/model.py", "line 361:26: constant 0 -> 1"):
        _SHARED_DROPOUT_RATE,
    ("tfktopic/models/topicrnn/model.py", "line 399:36: constant 3 -> 4"):
        "the `stacklevel` of the missing-doc_targets warning: which caller's line the "
        "message names, not what is computed (the warning itself is tested)",
    ("tfktopic/models/topicrnn/model.py", "line 329:58: constant 1 -> 2"):
        _EXTRA_DROPOUT,
    **_fresh_seed_sites("tfktopic/models/base.py", 373, (None, 56, 61, 66)),
    **_fresh_seed_sites("tfktopic/bayes/tlasgr.py", 336, (41, 44, 47, 52)),
    **_fresh_seed_sites("tfktopic/bayes/sgmcmc.py", 205, (41, 44, 47, 52)),
    ("tfktopic/evaluation/comparison.py", "line 138:20: constant 1 -> 2"):
        "`np.ones((2, D))`: only row 0 of the all-ones weights is read (`[0]`)",
    ("tfktopic/evaluation/coherence.py", "line 375:27: Add -> Sub"):
        "`range(i - 1, size)` in the pair loop also fills the diagonal and one entry below "
        "it, which the sum never reads (`np.triu_indices(card, k=1)`: above the diagonal)",
    **{("tfktopic/lda.py", f"line {site}"):
       "a default of `fit_lda`'s signature: the package's callers (the registry, "
       "`tfktopic.runs.reports`) pass num_topics, passes and seed explicitly"
       for site in ("48:44: constant 50 -> 51", "48:72: constant 0 -> 1")},
    **{("tfktopic/models/decoding.py", f"line {site}: constant 1 -> 2"):
       "two draws per row of which `[:, 0]` keeps the first: a draw of the same law"
       for site in ("43:70", "46:65")},
    ("tfktopic/models/lstm/lda_lstm.py", "line 187:20: Add -> Sub"):
        "the E-step's own counter only repeats the bound that `tf.while_loop`'s "
        "`maximum_iterations=self.iterations` also enforces",
    ("tfktopic/models/lstm/lda_lstm.py", "line 300:16: Add -> Sub"):
        "theta is broadcast over the window by adding zeros; subtracting them is the same",
    ("tfktopic/models/lstm/lda_lstm.py", "line 296:26: constant 0 -> 1"):
        _SHARED_DROPOUT_RATE,
    ("tfktopic/lda.py", "line 49:56: constant 2000 -> 2001"):
        "`fit_lda`'s default chunksize: every corpus the tests fit has fewer than 2,000 "
        "documents, so both values make one chunk per pass (the same online updates)",
    ("tfktopic/models/lstm/lda_lstm.py", "line 71:59: constant 1 -> 2"):
        "`reshape(-2)`: numpy takes any negative size as the one unknown dimension, as -1",
    **{("tfktopic/models/lstm/lda_lstm.py", f"line 131:77: {change}"):
       "alpha's placeholder (before `set_lda` or loading): with the placeholder topics all "
       "equal, the E-step gives uniform theta for any constant alpha, and the prior's mean "
       "alpha / sum(alpha) is uniform too"
       for change in ("Div -> Mult", "constant 1.0 -> 2.0")},
    ("tfktopic/evaluation/bleu.py", "line 205:38: constant 1 -> 2"):
        "BleuScorer precomputes one order more than `max_order` (never read): speed only",
    ("tfktopic/evaluation/bleu.py", "line 339:38: constant 1 -> 2"):
        "SelfBleuScorer precomputes one order more than `max_order` (never read): speed only",
}

#: Core modules for `--auto`, and the test files that guard each.
CORE = {
    "tfktopic/models/tcnlm/factorized_lstm.py": ["tests/library/test_reference_equivalence.py",
                                           "tests/library/test_tcnlm.py"],
    "tfktopic/layers/hoisted_lstm.py": ["tests/library/test_reference_equivalence.py",
                                        "tests/library/test_hoisted_lstm.py"],
    "tfktopic/layers/topic_decoder.py": ["tests/library/test_reference_equivalence.py",
                                         "tests/library/test_tcnlm.py", "tests/library/test_tcnlm_topic_fixes.py"],
    "tfktopic/layers/topic_encoders.py": ["tests/library/test_reference_equivalence.py",
                                          "tests/library/test_topicrnn.py", "tests/library/test_rgbn_rnn.py"],
    "tfktopic/models/rgbn/topic_gated_lstm.py": ["tests/library/test_rgbn_rnn.py",
                                            "tests/library/test_initialization.py"],
    "tfktopic/models/topicrnn/stopword_gate.py": ["tests/library/test_topicrnn.py", "tests/library/test_document_lstm.py"],
    "tfktopic/layers/initialization.py": ["tests/library/test_initialization.py",
                                          "tests/library/test_document_lstm.py"],
    "tfktopic/models/rgbn/weibull.py": ["tests/library/test_weibull.py"],
    "tfktopic/models/rgbn/encoder.py": ["tests/library/test_rgbn_rnn.py"],
    "tfktopic/bayes/tlasgr.py": ["tests/library/test_tlasgr_sampler.py", "tests/library/test_tlasgr.py",
                                 "tests/library/test_rgbn_topic_fixes.py"],
    "tfktopic/bayes/augmentation.py": ["tests/library/test_tlasgr.py", "tests/library/test_tlasgr_sampler.py"],
    "tfktopic/bayes/counter_random.py": ["tests/library/test_tlasgr.py", "tests/library/test_sgmcmc.py"],
    "tfktopic/bayes/sgmcmc.py": ["tests/library/test_sgmcmc.py"],
    "tfktopic/bayes/collection.py": ["tests/library/test_collection.py"],
    # The models' objectives (the whole module is mutated: generation and config too).
    "tfktopic/models/lstm/lstm_lm.py": ["tests/library/test_lstm_lm.py", "tests/library/test_initialization.py"],
    "tfktopic/models/tcnlm/model.py": ["tests/library/test_tcnlm.py", "tests/library/test_tcnlm_topic_fixes.py",
                                 "tests/library/test_initialization.py"],
    "tfktopic/models/topicrnn/model.py": ["tests/library/test_topicrnn.py",
                                    "tests/library/test_topicrnn_topic_fixes.py",
                                    "tests/library/test_initialization.py"],
    "tfktopic/models/lstm/lda_lstm.py": ["tests/library/test_lda_lstm.py", "tests/library/test_initialization.py"],
    "tfktopic/lda.py": ["tests/library/test_lda_lstm.py", "tests/library/test_lda_start.py"],
    "tfktopic/models/decoding.py": ["tests/library/test_decoding.py", "tests/library/test_models_harness.py",
                                    "tests/library/test_tcnlm.py", "tests/library/test_lda_lstm.py"],
    "tfktopic/models/base.py": ["tests/library/test_models_harness.py", "tests/library/test_presets.py"],
    "tfktopic/models/rgbn/model.py": ["tests/library/test_rgbn_rnn.py", "tests/library/test_rgbn_topic_fixes.py",
                                      "tests/library/test_initialization.py"],
    "tfktopic/models/rgbn/prior.py": ["tests/library/test_rgbn_rnn.py"],
    "tfktopic/evaluation/comparison.py": ["tests/library/test_comparison.py"],
    "tfktopic/evaluation/perplexity.py": ["tests/library/test_perplexity.py",
                                          "tests/library/test_cross_entropy.py"],
    "tfktopic/evaluation/cross_entropy.py": ["tests/library/test_cross_entropy.py"],
    "tfktopic/evaluation/coherence.py": ["tests/library/test_coherence.py"],
    "tfktopic/evaluation/bleu.py": ["tests/library/test_bleu.py"],
}

#: Things the scratch copy links to (read-only) besides the mutated package.
SHARED_ENTRIES = ("pretrained", "studies", "tools", "benchmarks", "docs", "README.md",
                  "CHANGELOG.md", "pyproject.toml", "mkdocs.yml", "pytest.ini")


# ---------------------------------------------------------------------- scratch copies

def _scratch_copy(directory):
    """Copy tfktopic/ and tests/ into `directory`; link the rest.

    The tests find the real corpora at ../shared/data next to the repository,
    so `directory`'s parent gets a link to the repository's ../shared.
    """
    directory = pathlib.Path(directory)
    shared = directory.parent / "shared"
    if (ROOT.parent / "shared").exists() and not shared.exists():
        os.symlink(ROOT.parent / "shared", shared)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "tfktopic", directory / "tfktopic", ignore=ignore)
    shutil.copytree(ROOT / "tests", directory / "tests", ignore=ignore)
    for entry in SHARED_ENTRIES:
        if (ROOT / entry).exists():
            os.symlink(ROOT / entry, directory / entry)
    return directory


def _run_tests(directory, tests, timeout):
    """Run pytest on `tests` inside `directory` with its package first on the path.

    Returns (status, seconds, last line): status "killed", "survived" or "timeout".
    """
    env = dict(os.environ, PYTHONPATH=str(directory), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    start = time.time()
    try:
        done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.time() - start, ""
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else done.stderr.strip()[-200:]
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    if failed:   # which test failed, and why (an assertion, not an import error)
        summary = f"{summary}; {failed[0][:300]}"
    if done.returncode == 0:
        if "skipped" in summary:
            # A skipped test kills nothing: report it instead of a survivor/pass.
            # ("deselected" is pytest.ini's `-m "not slow"`: outside the default
            # suite on purpose, so the mutant is judged by the default suite.)
            return "skipped", time.time() - start, summary
        return "survived", time.time() - start, summary
    if done.returncode == 1:
        return "killed", time.time() - start, summary
    return f"error (pytest exit {done.returncode})", time.time() - start, summary


def _assert_package_used(directory):
    """The subprocess imports the scratch package, not the installed one."""
    env = dict(os.environ, PYTHONPATH=str(directory))
    where = subprocess.run([sys.executable, "-c", "import tfktopic; print(tfktopic.__file__)"],
                           cwd=directory, env=env, capture_output=True, text=True).stdout
    if not where.strip().startswith(str(directory)):
        raise SystemExit(f"mutate.py: the scratch package is not the one imported ({where!r})")


# ------------------------------------------------------------------------ named mutants

def _apply_named(directory, mutation):
    """Apply the text edits of `mutation` to the one file containing them all."""
    package = pathlib.Path(directory) / "tfktopic"
    matches = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        if all(text.count(old) == 1 for old, _ in mutation["edits"]):
            matches.append((path, text))
    if len(matches) != 1:
        return f"{len(matches)} files contain every edit exactly once (need 1)"
    path, text = matches[0]
    for old, new in mutation["edits"]:
        text = text.replace(old, new)
    path.write_text(text)
    return str(path.relative_to(directory))


def run_named(mutations, timeout):
    results = []
    with tempfile.TemporaryDirectory(prefix="tfktopic-mut-") as base:
        baseline = _scratch_copy(pathlib.Path(base) / "baseline")
        _assert_package_used(baseline)
        tests = sorted({t for m in mutations for t in m["tests"]})
        status, seconds, summary = _run_tests(baseline, tests, timeout)
        print(f"baseline (unmutated) {status.replace('survived', 'passes')}: {summary} "
              f"[{seconds:.0f} s]", flush=True)
        if status != "survived":
            raise SystemExit("mutate.py: the tests fail on the unmutated package; fix that first")
        for mutation in mutations:
            directory = _scratch_copy(pathlib.Path(base) / mutation["id"])
            where = _apply_named(directory, mutation)
            if not where.startswith("tfktopic"):
                results.append({"id": mutation["id"], "status": "not applied", "detail": where})
                print(f"{mutation['id']}: NOT APPLIED ({where})", flush=True)
                continue
            status, seconds, summary = _run_tests(directory, mutation["tests"], timeout)
            results.append({"id": mutation["id"], "what": mutation["what"], "file": where,
                            "tests": mutation["tests"], "status": status,
                            "seconds": round(seconds, 1), "summary": summary})
            print(f"{mutation['id']}: {status.upper()} by {', '.join(mutation['tests'])} "
                  f"({where}; {summary}) [{seconds:.0f} s]", flush=True)
    return results


# --------------------------------------------------------------------- generated mutants

_OPERATOR_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
_FUNCTION_SWAPS = {"sigmoid": "tanh", "tanh": "sigmoid", "exp": "log", "log": "exp",
                   "softplus": "relu", "log_softmax": "softmax", "lgamma": "digamma",
                   "digamma": "lgamma"}


#: Functions whose code is not mathematics: configs, representations.
_NOT_MATHEMATICS = {"get_config", "from_config", "__repr__", "get_build_config"}


def _candidate_sites(tree):
    """(kind, node path) of every mutable site inside a function body.

    Not mutated: what cannot change an output -- the text and limits of error messages
    (inside ``raise`` statements and f-strings) and the `_NOT_MATHEMATICS` functions.
    """
    sites = []

    def visit(node, path, in_function):
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            return
        if isinstance(node, ast.FunctionDef) and node.name in _NOT_MATHEMATICS:
            return
        in_function = in_function or isinstance(node, (ast.FunctionDef, ast.Lambda))
        if in_function:
            if isinstance(node, ast.BinOp) and type(node.op) in _OPERATOR_SWAPS:
                sites.append(("operator", path))
            elif isinstance(node, ast.Attribute) and node.attr in _FUNCTION_SWAPS:
                sites.append(("function", path))
            elif (isinstance(node, ast.Constant) and type(node.value) in (int, float)
                  and not isinstance(node.value, bool)):
                sites.append(("constant", path))
        for field, value in ast.iter_fields(node):
            if isinstance(node, ast.Expr) and isinstance(value, ast.Constant):
                continue   # docstrings
            if isinstance(value, list):
                for index, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        visit(child, path + ((field, index),), in_function)
            elif isinstance(value, ast.AST):
                visit(value, path + ((field, None),), in_function)

    visit(tree, (), False)
    return sites


def _node_at(tree, path):
    node = tree
    for field, index in path:
        node = getattr(node, field) if index is None else getattr(node, field)[index]
    return node


def describe_site(tree, kind, path):
    """The change a site's mutant makes, e.g. ``line 12:8: Add -> Sub`` (nothing mutated)."""
    node = _node_at(tree, path)
    line = f"{getattr(node, 'lineno', '?')}:{getattr(node, 'col_offset', '?')}"
    if kind == "operator":
        return f"line {line}: {type(node.op).__name__} -> " \
               f"{_OPERATOR_SWAPS[type(node.op)].__name__}"
    if kind == "function":
        return f"line {line}: {node.attr} -> {_FUNCTION_SWAPS[node.attr]}"
    return f"line {line}: constant {node.value!r} -> {node.value + 1!r}"


def _mutate_site(tree, kind, path):
    """A mutated copy of `tree` and a description of the change."""
    change = describe_site(tree, kind, path)
    tree = copy.deepcopy(tree)
    node = _node_at(tree, path)
    if kind == "operator":
        node.op = _OPERATOR_SWAPS[type(node.op)]()
    elif kind == "function":
        node.attr = _FUNCTION_SWAPS[node.attr]
    else:
        node.value = node.value + 1
    return tree, change


def _load_done(report):
    """The results already in `report` (a JSON list), for ``--resume``."""
    if not report or not pathlib.Path(report).exists():
        return []
    return json.loads(pathlib.Path(report).read_text())


def _save(report, results):
    """Write `results` to `report` atomically (a kill leaves the previous version)."""
    if report:
        partial = pathlib.Path(f"{report}.partial")
        partial.write_text(json.dumps(results, indent=1))
        os.replace(partial, report)


def run_auto(modules, timeout, max_mutants, report=None, resume=False, retry_survivors=False,
             shard=(0, 1)):
    """Every generated mutant of `modules`; with `resume`, those not yet in `report`.

    The report is rewritten after each mutant, so a killed run loses at most one. With
    `retry_survivors`, the report's survivors run again (after new tests were written).
    `shard` = (i, n) runs only the sites whose index is i modulo n: n runs on n cores
    (each with its own report, merged by `merge_reports`) share one module's mutants.
    """
    index, count = shard
    results = _load_done(report) if resume else []
    if retry_survivors:
        # An explained survivor keeps its verdict (its reason says no test can kill it).
        results = [r for r in results if r["status"] not in ("survived", "skipped")
                   or r["module"] not in modules
                   or (r["module"], r["change"]) in EXPLAINED]
    # A result counts as done only for the source it was run on (the module may have changed
    # since): keyed on the module's text hash and the site's index among its sites.
    done = {(r["module"], r.get("source_sha256"), r.get("site")) for r in results}
    with tempfile.TemporaryDirectory(prefix="tfktopic-mut-") as base:
        directory = _scratch_copy(pathlib.Path(base) / "auto")
        _assert_package_used(directory)
        for module in modules:
            source_path = directory / module
            if not source_path.exists():   # moved by a refactoring: update CORE
                print(f"{module}: NOT FOUND (update CORE in tools/mutate.py)", flush=True)
                results = [r for r in results if r["module"] != module]   # once, not per resume
                results.append({"module": module, "change": "-", "status": "not applied"})
                _save(report, results)
                continue
            original = source_path.read_text()
            digest = hashlib.sha256(original.encode()).hexdigest()
            # Results for an older text of the module are stale: dropped.
            results = [r for r in results
                       if r["module"] != module or r.get("source_sha256") == digest]
            tree = ast.parse(original)
            sites = _candidate_sites(tree)
            if max_mutants:
                sites = sites[:max_mutants]
            print(f"{module}: {len(sites)} mutants, tests {CORE[module]}", flush=True)
            if (module, digest, "baseline") not in done:
                # Unmutated, the tests must pass: else every mutant would count as killed.
                status, seconds, summary = _run_tests(directory, CORE[module], timeout)
                if status != "survived":
                    raise SystemExit(f"mutate.py: {CORE[module]} fail on the unmutated {module} "
                                     f"({summary}); fix that first")
                results.append({"module": module, "change": "none (baseline)",
                                "status": "baseline passes", "seconds": round(seconds, 1),
                                "summary": summary, "site": "baseline", "source_sha256": digest})
                _save(report, results)
            for site, (kind, path) in enumerate(sites):
                if (module, digest, site) in done or site % count != index:
                    continue
                mutated, change = _mutate_site(tree, kind, path)
                try:
                    source_path.write_text(ast.unparse(mutated))
                    status, seconds, summary = _run_tests(directory, CORE[module], timeout)
                finally:
                    source_path.write_text(original)
                results.append({"module": module, "change": change, "status": status,
                                "seconds": round(seconds, 1), "summary": summary,
                                "site": site, "source_sha256": digest,
                                "ran_at": round(time.time(), 1)})
                _save(report, results)
                print(f"  {change}: {status.upper()} [{seconds:.0f} s]", flush=True)
    return results


def merge_reports(paths):
    """The results of several `--auto` reports as one (e.g. of runs on different cores).

    For the same mutant (module text, site) the result that ran last wins (its
    ``ran_at`` time; results without one count as oldest, and between those a later
    report wins), so copies of one report retried on different cores merge in any order:
    each keeps the new verdicts of its own retry. Results for another text of a module
    than today's are dropped (as a resumed run drops them).
    """
    merged, today = {}, {}
    for path in paths:
        for result in _load_done(path):
            module, digest = result["module"], result.get("source_sha256")
            if module not in today:
                source = ROOT / module
                today[module] = (hashlib.sha256(source.read_text().encode()).hexdigest()
                                 if source.exists() else None)
            if digest and today[module] and digest != today[module]:
                continue
            key = (module, digest, result.get("site"), result.get("id"))
            if result.get("ran_at", 0) >= merged.get(key, {}).get("ran_at", 0):
                merged[key] = result
    return list(merged.values())


# ------------------------------------------------------------------------------ main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the named mutants")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these named mutants")
    parser.add_argument("--auto", nargs="+", metavar="MODULE",
                        help="generated mutants of these core modules ('all': every one)")
    parser.add_argument("--max-mutants", type=int, default=0,
                        help="with --auto: at most this many mutants per module (0: all)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per mutant's test run (a timeout counts as killed)")
    parser.add_argument("--report", help="write the results as JSON to this file")
    parser.add_argument("--retry-survivors", action="store_true",
                        help="with --resume: run the report's survivors of these modules again")
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="with --auto: only the mutants whose index is I modulo N (N runs "
                             "on N cores, each with its own --report, then --merge)")
    parser.add_argument("--merge", nargs="+", metavar="REPORT",
                        help="merge these --auto reports (for the same mutant the verdict "
                             "that ran last wins) into --report and summarise them; runs "
                             "nothing")
    parser.add_argument("--resume", action="store_true",
                        help="with --auto and --report: keep the report's results and run "
                             "only the mutants it does not have (a long run over sessions)")
    args = parser.parse_args(argv)
    if args.list:
        for mutation in MUTATIONS:
            print(f"{mutation['id']:26s} {mutation['what']}\n{'':26s} killed by "
                  f"{', '.join(mutation['tests'])}")
        return 0
    if args.merge:
        if not args.report or args.auto or args.only:
            parser.error("--merge needs --report (the merged file) and no --auto/--only")
        missing = [path for path in args.merge if not pathlib.Path(path).exists()]
        if missing:
            parser.error(f"--merge: no such report: {', '.join(missing)}")
        results = merge_reports(args.merge)
    elif args.auto:
        modules = sorted(CORE) if args.auto == ["all"] else args.auto
        unknown = [m for m in modules if m not in CORE]
        if unknown:
            parser.error(f"--auto: not a core module: {', '.join(unknown)} "
                         f"(choose from {', '.join(sorted(CORE))})")
        if args.resume and not args.report:
            parser.error("--resume needs --report (the file to continue)")
        if args.retry_survivors and not args.resume:
            parser.error("--retry-survivors needs --resume (and --report)")
        try:
            index, count = (int(part) for part in args.shard.split("/"))
        except ValueError:
            index, count = -1, 0
        if not 0 <= index < count:
            parser.error(f"--shard must be I/N with 0 <= I < N, got {args.shard!r}")
        results = run_auto(modules, args.timeout, args.max_mutants, args.report, args.resume,
                           args.retry_survivors, shard=(index, count))
    else:
        chosen = MUTATIONS
        if args.only:
            known = {m["id"] for m in MUTATIONS}
            unknown = [i for i in args.only if i not in known]
            if unknown:
                parser.error(f"--only: unknown mutant {', '.join(unknown)} (see --list)")
            chosen = [m for m in MUTATIONS if m["id"] in args.only]
        results = run_named(chosen, args.timeout)
    if args.report:
        _save(args.report, results)
    results = [r for r in results if r["status"] != "baseline passes"]
    survivors = [r for r in results if r["status"] in ("survived", "skipped")]
    explained = [r for r in survivors if (r.get("module"), r.get("change")) in EXPLAINED]
    survivors = [r for r in survivors if r not in explained]
    missing = [r for r in results if r["status"] == "not applied"]
    print(f"\n{len(results)} mutants: "
          f"{len(results) - len(survivors) - len(explained) - len(missing)} killed, "
          f"{len(survivors)} survived, {len(explained)} survived with a reason (EXPLAINED), "
          f"{len(missing)} not applied")
    for result in explained:
        print(f"  EXPLAINED: {result['module']} {result['change']}: "
              f"{EXPLAINED[result['module'], result['change']]}")
    for result in survivors:
        print(f"  {result['status'].upper()}: "
              f"{result.get('id') or result['module'] + ' ' + result['change']}")
    return 2 if missing else (1 if survivors else 0)


if __name__ == "__main__":
    sys.exit(main())
