"""Models following the contract of DESIGN.md §3 (dict batch in, logits out)."""

from tfktopic.models.lstm_lm import LSTMLanguageModel
