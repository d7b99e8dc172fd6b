"""The plain LSTM language models (the baselines of the topic-guided ones).

* `lstm_lm`: `LSTMLanguageModel` (sentence batches) and `ResetStates`;
* `document_lstm`: `DocumentLSTMLanguageModel` (carried-state document streams)
  and `score_stream_perplexity`;
* `lda_lstm`: `LDALSTMLanguageModel`, an LSTM fed a gensim LDA's document topics
  (`LDATopicInference`, `fit_lda`);
* `presets` / `lda_presets`: `PRESETS` of the LSTM and of the LDA-LSTM.
"""

from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel, score_stream_perplexity
from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel, LDATopicInference, fit_lda
from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel, ResetStates

__all__ = ["LSTMLanguageModel", "ResetStates", "DocumentLSTMLanguageModel",
           "score_stream_perplexity", "LDALSTMLanguageModel", "LDATopicInference", "fit_lda"]
