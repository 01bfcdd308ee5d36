"""The evaluation tasks by name: importing this module registers every built-in task.

A new task is its module, decorated with `base.register_task`, and one name in the imports below.
"""

# Registration order is table-column order: D-STS first as in DialogueCSE's Table 2, then DSE's tasks, then dial2vec's.
from dialoguecse_tf.evaluation.tasks import dsts, sr  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import intent, oos  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import rs_utterance, rs_dialogue  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import intent_finetune, dialogue_act  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import clustering, relatedness, dialogue_retrieval  # noqa: F401  isort: skip
from dialoguecse_tf.evaluation.tasks import base


def task_classes() -> tuple:
    """The registered evaluator classes, in table-column order."""
    return tuple(base.TASKS.values())


def task_names() -> tuple:
    """The registered tasks' suite names, in table-column order."""
    return tuple(task.name for task in task_classes())


def get_task(name: str) -> type:
    """The evaluator class a suite names `name`; ValueError naming the known tasks otherwise."""
    if name not in base.TASKS:
        raise ValueError(f"unknown evaluation task {name!r}; known tasks: {', '.join(base.TASKS)}")
    return base.TASKS[name]


def metric_columns() -> tuple:
    """((metric key, header), ...) of every registered task, in table order."""
    return tuple(column for task in task_classes() for column in task.metrics)
