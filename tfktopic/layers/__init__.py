"""Custom Keras layers of the topic-guided language models (one file per layer)."""
