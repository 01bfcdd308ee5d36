"""dialoguecse_tf: sentence embeddings learned from unlabeled dialogues (TF2 / Keras 3)."""

__version__ = "0.1.0"
