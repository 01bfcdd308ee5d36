"""Evaluation tasks: one module per task, registered in table-column order."""

# Registration order is table-column order: D-STS first as in DialogueCSE's Table 2, then DSE's tasks, then dial2vec's.
from dialoguecse_tf.evaluation.tasks import dsts, sr  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import intent, oos  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import clustering, relatedness, dialogue_retrieval  # noqa: F401  isort: skip
