"""TCNLM (Wang et al., NAACL 2018): the model, its recurrence and its presets.

* `model`: the `TCNLM` keras.Model (neural topic model + topic-composed LSTM);
* `factorized_lstm`: `FactorizedTopicLSTMCell` / `FactorizedTopicLSTM` (the
  topic-factorized LSTM) and `TopicExpertsLSTM` (the mixture-of-experts LSTM);
* `factorized_recurrence`: the fused fast path of the factorized recurrence;
* `presets`: the presets in the `tfktopic.presets` schema.
"""

from tfktopic.models.tcnlm.factorized_lstm import (FactorizedTopicLSTM, FactorizedTopicLSTMCell,
                                                   TopicExpertsLSTM)
from tfktopic.models.tcnlm.factorized_recurrence import factorized_recurrence
from tfktopic.models.tcnlm.model import TCNLM

__all__ = ["TCNLM", "FactorizedTopicLSTM", "FactorizedTopicLSTMCell", "TopicExpertsLSTM",
           "factorized_recurrence"]
