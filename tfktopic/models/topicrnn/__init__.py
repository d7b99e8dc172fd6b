"""TopicRNN (Dieng et al., ICLR 2017) and its document-stream variant.

* `model`: the `TopicRNN` keras.Model (sentence batches), its ELBO terms and
  `build_sentiment_classifier`;
* `document`: `DocumentTopicRNN` (TopicRNN over carried-state document streams);
* `stopword_gate`: `StopwordGate`, the stop-word indicator and the topic bias
  of the output layer;
* `presets`: the presets in the `tfktopic.presets` schema.
"""

from tfktopic.models.topicrnn.document import DocumentTopicRNN
from tfktopic.models.topicrnn.model import TopicRNN, build_sentiment_classifier
from tfktopic.models.topicrnn.stopword_gate import StopwordGate

__all__ = ["TopicRNN", "DocumentTopicRNN", "StopwordGate", "build_sentiment_classifier"]
