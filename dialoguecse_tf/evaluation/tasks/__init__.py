"""Evaluation tasks: one module per task, registered in table-column order."""

from dialoguecse_tf.evaluation.tasks import dsts, sr  # noqa: F401 (registration, D-STS first as in Table 2)
