"""The converged, multi-seed comparison study (issue 13; DESIGN.md §5a): its protocol, as data.

What is run and what counts, with no side effect: the arms, grids, corpora, settings, seeds
and epoch limits; each run's ``tfktopic train`` command (`command`), its name, run directory
and record path; what a finished record is (`finished_record`), which configuration an arm
chooses (`chosen_config`) and which runs are still to do, in order (`pending`). The functions
here only read records; `studies.study.scheduler` starts the runs, claims them, collects
their records and scores them (``python -m studies.study``), and `studies.study.report`
builds the tables from the records.

Every run is one ``tfktopic train`` command (the user's path, `tfktopic.runs`):
APNEWS's 2,000 documents split 80/10/10 by document with split seed 0, the
Mallet stop list and one topic-vocabulary rule for every topic model, the
medium sizes, early stopping on validation perplexity (patience `PATIENCE`,
at most `MAX_EPOCHS` epochs of the corpus, the best epoch kept and scored on the test
split under the leak-free protocol).

PTB (``--corpus ptb``): Dieng et al.'s Table 2 pair, TopicRNN-100 vs RNN-100, on
Mikolov's own split, with its own grid (`PTB_GRID`).

The protocol of each **arm** (a model at a size):

1. tuning: the same budget for every arm, the `TUNING` configurations of the
   learning rate x dropout `GRID` (2 of its 4 on APNEWS, see `TUNING`; the 3-layer
   arms' are the lr 2e-3 pair, `ARM_TUNING`), seed 0, chosen on the best validation
   perplexity only;
2. seeds: the chosen configuration again with seeds 1 and 2 (initialisation
   and data order; the split stays seed 0);
3. variants (`VARIANTS`): one run (seed 0) of a complete arm's chosen configuration
   with one setting changed, right after that arm: does its result hinge on it? (Those
   of `SEEDED_VARIANTS` get seeds 1 and 2 too, for a verdict.)
4. budget sensitivity, last: the LSTM baselines (`SENSITIVITY_ARMS`) also
   run the rest of the `GRID` (seed 0), so that the report can say how much a
   twice larger tuning budget would have given the baselines.

Each finished run's record (results, the per-epoch history, what stopped it,
the per-document test NLLs of the paired bootstrap) is copied to
``studies/results/study/<corpus>/<arm>/<config>-s<seed>.json`` (`record_path`; commit them
as they land). ``report`` builds the tables from those records alone: mean +-
sd over seeds, and for each claim the paired document-level bootstrap interval
of the perplexity ratio (`tfktopic.evaluation.comparison`).

Other protocols: every headline number is leak-free (a sentence's topic context is its
document's preceding sentences), while TDLM, TCNLM and rGBN-RNN scored with every other
sentence of the document as context, later ones included. Each finished run of a model that
takes a topic context is also scored that way, and with every context empty (what the topic
context is worth to the model), with its kept model on the same test targets, and its record
gets the per-document NLLs under the keys of `EXTRA_PROTOCOLS`
(`studies.study.scheduler.score_protocols`): the report can say how much of a paper's margin
its protocol gives, and how much each model gets from its topics. Models without a topic
context score the same under every protocol.
"""

import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
RESULTS = REPO / "studies" / "results" / "study"
#: corpus -> the epoch limit of its runs, high enough that early stopping, not the limit,
#: ends a run. Every APNEWS run stopped early (at most 34 epochs). PTB's RNN-100 at lr 1e-3
#: with dropout 0.3 was still improving by 0.3-0.5 validation perplexity per epoch when a
#: limit of 40 stopped it (best epoch 40: 150.02, 149.58, 149.73, 149.70, 148.99), so PTB
#: gets 100. A run a lower limit stopped is not finished (`finished_record`): the next ``run``
#: resumes it from its last epoch's checkpoint under the new limit.
MAX_EPOCHS = {"apnews": 40, "imdb": 40, "ptb": 100}
PATIENCE = 3
SPLIT_SEED = 0
SEEDS = (0, 1, 2)
#: The tuning budget of every arm: learning rate x dropout, chosen on validation.
#: (Adam 1e-3 was measured to need about twice the epochs of 2e-3 on this corpus -- val
#: 158.9 vs 166.6 after 2 epochs at 6 minutes each --, which 2 cores cannot afford for
#: every arm; a configuration that diverges is recorded and not chosen.)
GRID = {
    "lr2e-3_do0.3": {"learning_rate": 2e-3, "dropout": 0.3},
    "lr2e-3_do0.5": {"learning_rate": 2e-3, "dropout": 0.5},
    "lr4e-3_do0.3": {"learning_rate": 4e-3, "dropout": 0.3},
    "lr4e-3_do0.5": {"learning_rate": 4e-3, "dropout": 0.5},
}
#: The configurations of `GRID` every APNEWS arm is tuned on. The whole grid on every arm is
#: 44 tuning runs of 1-4 hours each on one core, more than 2 cores can give; the LSTM
#: baselines' full grids (seed 0) decided which half to keep: dropout mattered more than the
#: learning rate (document LSTM with Keras' initialisation, lr 2e-3: val 72.81 at dropout
#: 0.5 vs 74.76 at 0.3) and lr 4e-3 was as good as 2e-3 at a third fewer epochs (do 0.3:
#: 74.18 in 14 epochs vs 74.76 in 22), so every arm tunes the dropout at lr 4e-3. The same 2
#: configurations for every arm, baselines included (the baselines' other 2 are
#: `SENSITIVITY_ARMS`' extra runs).
TUNING = ("lr4e-3_do0.3", "lr4e-3_do0.5")
#: Arms that also run the rest of `GRID` (seed 0), after every other run: the report shows
#: what the baselines would gain from the whole grid. lstm_3, the 3-layer baseline, too: its
#: first tuning run tested at 83.59 against the 1-layer LSTM's 74.42 at the same
#: configuration (lr 4e-3, dropout 0.3), and a deeper LSTM may want a lower learning rate.
SENSITIVITY_ARMS = ("doc_lstm", "lstm", "lstm_3", "doc_lstm_keras", "lstm_keras")
#: Sensitivity arms whose extra runs come right after their tuning, before their seeds and
#: the next arm: lstm_3's tested 81.49 at its choice (lr 4e-3, dropout 0.5; the 1-layer
#: LSTM 71.71), and whether lr 2e-3 is what a 3-layer model needs has to be known before
#: the 3-layer GBN arms, then tuned at lr 4e-3 like every arm, start. The rule, fixed before
#: either lr 2e-3 run finished (lr2e-3_do0.3 at epoch 17, validation 81.61; lr2e-3_do0.5
#: not started): if lstm_3's best validation perplexity at lr 2e-3 is at least 1 % below its
#: best at lr 4e-3 (80.36, so 79.56 or lower; 1 % is about twice the seed-to-seed sd of the
#: 1-layer LSTM, 0.35 / 71.71), every 3-layer arm is tuned on the lr 2e-3 pair instead (the
#: same budget, 2 configurations; lstm_3's lr 4e-3 runs become its sensitivity runs);
#: otherwise the 3-layer arms keep `TUNING`.
EARLY_SENSITIVITY = ("lstm_3",)
#: arm -> the configurations of `GRID` it is tuned on instead of `TUNING`. The rule above
#: held: lstm_3 reached validation 78.64 at lr 2e-3 with dropout 0.5 by epoch 19, and 76.83
#: at its best epoch 28 (test 78.31), against 80.36 at its lr 4e-3 choice (test 81.49), 4.4 %
#: lower (dropout 0.3: 81.58 against 81.68). So every 3-layer arm is tuned on the lr 2e-3
#: pair, the same budget of 2 configurations; lstm_3's lr 4e-3 runs are its
#: budget-sensitivity runs. The 1-layer arms keep `TUNING`: the 1-layer baselines' lr 2e-3
#: runs (`SENSITIVITY_ARMS`) show what lr 2e-3 gives them (with Keras' initialisation
#: nothing: doc_lstm_keras 72.81 vs 72.19).
LOWER_LR = ("lr2e-3_do0.3", "lr2e-3_do0.5")
ARM_TUNING = {"lstm_3": LOWER_LR, "gbn_rnn_3": LOWER_LR, "rgbn_rnn_3": LOWER_LR}
#: One topic vocabulary for every topic model: Mallet stop words, the 0.1 % most
#: frequent words out, words of at least 5 training documents (TCNLM §4's rule).
DATA_SETTINGS = {"min_doc_freq": 5, "max_freq_fraction": 0.001}
#: Zheng et al.'s training recipe, for every APNEWS arm: their initialisation
#: (`tfktopic.layers.initialization`: PyTorch's, embedding and softmax U(+-0.1), every
#: recurrent weight and bias U(+-1/sqrt(H))) and their clipping (the global gradient norm at
#: 0.5). With Keras' defaults our doc_lstm tested 7.5 % above their own LSTM-LM on their
#: targets; with their initialisation 1.6 % below, with both 3.0 % below
#: (`studies.study.peer.trace`, seed 0, lr 4e-3, dropout 0.5: 87.30 -> 79.92 -> 78.77 against
#: their 81.20). It helps the sentence-level LSTM about as much (seed 0, lr 4e-3, dropout
#: 0.5: test 76.98 -> 71.99, 0.935 [0.930, 0.941]) and the sentence TopicRNN less (70.73 ->
#: 68.89, 0.974 [0.956, 0.989]; `studies.study.peer.trace`'s sentence_*_recipe, adopted as
#: those arms' runs), so every arm gets it: the baseline is trained as the published one,
#: and every model it is compared with gets the same recipe.
#: The arms as first run, with Keras' initialisation and per-variable clipping, are kept
#: (`*_keras`); TCNLM's one such run (lr 4e-3, dropout 0.3: test 76.04) was dropped.
RECIPE = {"initialization": "torch", "clipnorm": None, "global_clipnorm": 0.5}
#: arm -> (model, preset, extra --set overrides), in the order they are run.
ARMS = {
    "doc_lstm": ("doc_lstm", "medium", RECIPE),  # first: the headline baseline
    "doc_topicrnn": ("doc_topicrnn", "medium", RECIPE),
    "lstm": ("lstm", "medium", RECIPE),
    "topicrnn": ("topicrnn", "medium", RECIPE),
    "tcnlm": ("tcnlm", "medium", RECIPE),
    "tcnlm_coherent": ("tcnlm", "coherent", RECIPE),   # a variant of tcnlm (`VARIANTS`)
    "lda_lstm": ("lda_lstm", "medium", RECIPE),
    "gbn_rnn_1": ("gbn_rnn", "medium", {**RECIPE, "num_layers": 1}),
    "rgbn_rnn_1": ("rgbn_rnn", "medium", {**RECIPE, "num_layers": 1}),
    "gbn_rnn_1_preceding": ("gbn_rnn", "medium", {**RECIPE, "num_layers": 1,
                                                  "train_context": "preceding"}),   # variant
    "rgbn_rnn_1_preceding": ("rgbn_rnn", "medium", {**RECIPE, "num_layers": 1,
                                                    "train_context": "preceding"}),  # variant
    # The 3-layer GBN arms train on the preceding contexts (`LEAK_FREE_TRAINED`), and their
    # depth claims compare them with the 1-layer arms trained so.
    "lstm_3": ("lstm", "medium", {**RECIPE, "num_layers": 3}),
    "gbn_rnn_3": ("gbn_rnn", "medium", {**RECIPE, "num_layers": 3,
                                        "train_context": "preceding"}),
    "rgbn_rnn_3": ("rgbn_rnn", "medium", {**RECIPE, "num_layers": 3,
                                          "train_context": "preceding"}),
    # The arms as first run, with Keras' initialisation and per-variable clipping (kept,
    # reported; complete but for lstm_keras' last budget-sensitivity run).
    "doc_lstm_keras": ("doc_lstm", "medium", {}),
    "doc_topicrnn_keras": ("doc_topicrnn", "medium", {}),
    "lstm_keras": ("lstm", "medium", {}),
    "topicrnn_keras": ("topicrnn", "medium", {}),
}
#: Variant arms (variant -> its base arm): one run, seed 0, of the base arm's chosen
#: configuration with one setting changed, as soon as the base arm is complete (before the
#: next arm): does the base arm's result hinge on that setting? Not tuned, one seed, no
#: verdict. tcnlm_coherent: the medium TCNLM's randomly initialised topic decoder collapses
#: its topics (NPMI 0.025 against LDA's 0.068 in the tcnlm arm); the `coherent` preset starts
#: it from an LDA of the training split (NPMI 0.087 after 6 epochs, perplexity unchanged:
#: 84.43 vs 84.62, 3 seeds; `tfktopic/models/tcnlm/presets.py`) -- the paper's TCNLM had
#: coherent topics, so this asks whether collapsed topics cost our TCNLM its margin.
#: gbn_rnn_1_preceding / rgbn_rnn_1_preceding: the GBN arms train, as the papers did, with
#: every other sentence of the document as each sentence's context, and are scored with the
#: preceding ones. rGBN-RNN's transition prior then fits only the training contexts (its KL
#: per sentence 15 nats on training documents under the training contexts, 62-350 on the
#: same documents under the preceding ones, 18-545 on validation documents under either;
#: GBN-RNN's 24-53 throughout:
#: `studies.claims.rgbn_kl_positions`, seed 0 of each at lr 4e-3, dropout 0.5): with the
#: contexts of training nearly the same from one sentence to the next, Pi has no transitions
#: to learn. Trained with the preceding contexts (``train_context="preceding"``), does
#: rGBN-RNN's recurrence help, and does GBN-RNN change?
VARIANTS = {"tcnlm_coherent": "tcnlm", "gbn_rnn_1_preceding": "gbn_rnn_1",
            "rgbn_rnn_1_preceding": "rgbn_rnn_1"}
#: Variants that also get the base arm's seeds 1 and 2 (right after their seed 0), so that
#: their comparisons carry a verdict: the leak-free-trained GBN pair. rgbn_rnn_1_preceding's
#: seed 0 reached validation 65.38 by epoch 13 (its base arm's seeds: 70.56, 67.36, 68.36)
#: with a validation KL of 45-272 nats per chunk (the base arm's seed 0: up to 33,341):
#: whether rGBN-RNN beats GBN-RNN may hinge on the training contexts, so both are seeded.
#: Their base arms keep the papers' training contexts and their verdicts.
SEEDED_VARIANTS = ("gbn_rnn_1_preceding", "rgbn_rnn_1_preceding")
#: The arms trained on the leak-free (preceding) contexts they are scored with; every other
#: topic arm trains, as its paper did, with every other sentence of the document as context.
#: The 3-layer GBN arms were switched before any of their runs started, once
#: rgbn_rnn_1_preceding's seed 0 had shown what the papers' training contexts cost rGBN-RNN
#: (test 71.57 -> 65.55; GBN-RNN 65.88 -> 65.08): trained the papers' way, "rGBN-RNN at 3
#: layers" would again measure its transition prior's mismatch, not its depth.
LEAK_FREE_TRAINED = tuple(arm for arm, (_, _, extra) in ARMS.items()
                          if extra.get("train_context") == "preceding")
#: PTB, Dieng et al. Table 2 (100 units): TopicRNN vs a plain RNN of the same size, on
#: Mikolov's own split (ptb.valid.txt / ptb.test.txt next to ptb.train.txt), documents of
#: 10 sentences, the paper's K = 50 and no dropout in its setup (dropout is in the grid).
PTB_GRID = {
    "lr1e-3_do0.0": {"learning_rate": 1e-3, "dropout": 0.0},
    "lr1e-3_do0.3": {"learning_rate": 1e-3, "dropout": 0.3},
    "lr3e-3_do0.0": {"learning_rate": 3e-3, "dropout": 0.0},
    "lr3e-3_do0.3": {"learning_rate": 3e-3, "dropout": 0.3},
}
PTB_ARMS = {
    "rnn_100": ("lstm", "small", {"cell": "rnn", "hidden_dim": 100, "embedding_dim": 100,
                                  "num_layers": 1}),
    "topicrnn_100": ("topicrnn", "ptb_100", {}),
}
#: IMDB (issue 53): the study's one win over the streamed document LSTM (GBN-RNN, 1 layer,
#: trained on the preceding contexts it is scored with: 0.981 [0.967, 0.994] on APNEWS) on a
#: second corpus, with the same protocol, grid, tuning budget, recipe and medium sizes. Zheng
#: et al. found that no topic-guided model beats that baseline, on IMDB too. A seeded random
#: `IMDB_DOCUMENTS` of the 100,000 reviews (all splits and labels; the study splits them
#: 80/10/10 itself): 2,000 documents as APNEWS's, about 0.5 M tokens, so that a run costs
#: what an APNEWS run did (0.3-1 h on one core); the sentence LSTM and TopicRNN follow if the
#: budget allows.
IMDB_DOCUMENTS = 2000
IMDB_ARMS = {arm: ARMS[arm] for arm in ("doc_lstm", "gbn_rnn_1_preceding", "lstm", "topicrnn")}
#: corpus -> extra ``tfktopic train`` arguments of each of its runs.
CORPUS_ARGS = {"imdb": ["--max-documents", str(IMDB_DOCUMENTS), "--subset-seed", "0"]}
#: corpus -> (shared data file, format, grid, data settings of every arm, arms, tuning
#: configurations of the grid)
STUDIES = {
    "apnews": ("apnews/apnews.txt", "tdlm", GRID, DATA_SETTINGS, ARMS, TUNING),
    "imdb": ("imdb/aclImdb_reviews.jsonl.gz", "imdb", GRID, DATA_SETTINGS, IMDB_ARMS, TUNING),
    "ptb": ("ptb/ptb.train.txt", "ptb", PTB_GRID,
            {"min_count": 1, "max_freq_fraction": 0.0, "sentences_per_document": 10}, PTB_ARMS,
            tuple(PTB_GRID)),
}
CORPORA = {name: study[:2] for name, study in STUDIES.items()}


def full_grid(corpus):
    """Every configuration a run of a corpus's study may use (name -> settings)."""
    return STUDIES[corpus][2]


def grid(corpus, arm=None):
    """The tuning configurations of an arm of a corpus's study (name -> settings): the
    configuration of the arm is chosen among these. The corpus's own (`TUNING` on APNEWS)
    for every arm but those of `ARM_TUNING`."""
    names = ARM_TUNING.get(arm) if arm in arms_of(corpus) else None
    return {name: full_grid(corpus)[name] for name in names or STUDIES[corpus][5]}


def sensitivity_configs(corpus, arm):
    """The extra configurations (seed 0) of a baseline's budget-sensitivity runs."""
    if corpus != "apnews" or arm not in SENSITIVITY_ARMS:
        return []
    return [name for name in full_grid(corpus) if name not in grid(corpus, arm)]


def arms_of(corpus):
    """The arms of a corpus's study (name -> (model, preset, overrides))."""
    return STUDIES[corpus][4]

def _shared(relative):
    from studies.common import shared_file

    return shared_file(relative)


def run_name(arm, config, seed):
    return f"{arm}/{config}-s{seed}"


def record_path(corpus, arm, config, seed):
    return RESULTS / corpus / arm / f"{config}-s{seed}.json"


def command(corpus, arm, config, seed, out, data_root=None):
    """The ``tfktopic train`` command of one run (``data_root``: name the shared data
    folder so, unchecked, instead of the one found here)."""
    path, format, configs, data, arms, _ = STUDIES[corpus]
    model, preset, extra = arms[arm]
    settings = {**data, **extra, "dropout": configs[config]["dropout"]}
    shared = _shared if data_root is None else lambda relative: f"{data_root}/{relative}"
    cmd = [sys.executable, "-m", "tfktopic", "train", model, "--corpus", str(shared(path)),
           "--format", format, "--preset", preset,
           "--stopwords", str(shared("stopwords/mallet_en.txt")),
           "--epochs", str(MAX_EPOCHS[corpus]), "--patience", str(PATIENCE),
           "--learning-rate", str(configs[config]["learning_rate"]),
           "--seed", str(seed), "--split-seed", str(SPLIT_SEED), "--out", str(out),
           "--verbose", "2", *CORPUS_ARGS.get(corpus, [])]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    return cmd


#: The record key of a run's test scores under the papers' protocol (topic context = every
#: other sentence of the document) and with every context empty (no topic information);
#: each {"perplexity", "protocol", "nll": per-document sums in the order of
#: ``test_documents``, whose target tokens they score}.
PAPERS_PROTOCOL = "test_all_other"
NO_CONTEXT = "test_no_context"
#: record key -> its `tfktopic.runs.score_perplexity` protocol
EXTRA_PROTOCOLS = {PAPERS_PROTOCOL: "all_other", NO_CONTEXT: "none"}


def run_dir(out_root, corpus, arm, config, seed):
    """The ``--out`` directory of one run."""
    return pathlib.Path(out_root) / corpus / arm / f"{config}-s{seed}"


def finished_record(corpus, arm, config, seed):
    """A run's record, or `None` until it has landed -- or when an epoch limit lower than
    its corpus's `MAX_EPOCHS` now is stopped it (such a run resumes, from its last
    checkpoint)."""
    path = record_path(corpus, arm, config, seed)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    training = record.get("training", {})
    limit = int(training.get("max_epochs") or MAX_EPOCHS[corpus])
    if training.get("stopped_by") == "max_epochs" and limit < MAX_EPOCHS[corpus]:
        return None
    return record


def finished(corpus, arm, config, seed):
    """Whether a run is done (`finished_record`)."""
    return finished_record(corpus, arm, config, seed) is not None


def base_arm(corpus, arm):
    """The arm whose chosen configuration a variant arm runs (`VARIANTS`), or `None`: a
    variant whose base arm is not in the corpus's study is tuned as an arm of its own."""
    base = VARIANTS.get(arm)
    return base if base in arms_of(corpus) else None


def chosen_config(corpus, arm):
    """The tuning winner of an arm (lowest best validation perplexity), or `None` until
    every configuration of the grid has finished; a variant arm's is its base arm's."""
    if base_arm(corpus, arm):
        return chosen_config(corpus, base_arm(corpus, arm))
    scores = {}
    for config in grid(corpus, arm):
        record = finished_record(corpus, arm, config, 0)
        if record is None:
            return None
        scores[config] = record["training"].get("best_val_ppl") or float("inf")
    return min(scores, key=scores.get)


def pending(corpus, arms):
    """The runs still to do, arm by arm (so that the first arms complete first): an
    arm's tuning, then -- once its tuning is complete -- the seeds of its choice; a variant
    arm's one run once its base arm is complete (`VARIANTS`); the baselines'
    budget-sensitivity runs come after every arm's (`EARLY_SENSITIVITY`'s right after
    their arm's tuning)."""
    todo = []
    for arm in arms:
        if base_arm(corpus, arm):
            best = chosen_config(corpus, arm)
            base_done = best is not None and all(finished(corpus, base_arm(corpus, arm), best, seed)
                                                 for seed in SEEDS)
            seeds = SEEDS if arm in SEEDED_VARIANTS else SEEDS[:1]
            if base_done:
                todo += [(arm, best, seed) for seed in seeds
                         if not finished(corpus, arm, best, seed)]
            continue
        for config in grid(corpus, arm):
            if not finished(corpus, arm, config, 0):
                todo.append((arm, config, 0))
        best = chosen_config(corpus, arm)
        if best is not None and arm in EARLY_SENSITIVITY:
            todo += [(arm, config, 0) for config in sensitivity_configs(corpus, arm)
                     if not finished(corpus, arm, config, 0)]
        if best is not None:
            todo += [(arm, best, seed) for seed in SEEDS[1:]
                     if not finished(corpus, arm, best, seed)]
    todo += [(arm, config, 0) for arm in arms for config in sensitivity_configs(corpus, arm)
             if arm not in EARLY_SENSITIVITY and not finished(corpus, arm, config, 0)]
    return todo
