"""The objectives by name: importing this module registers every built-in objective.

A new objective is its module, decorated with `base.register`, and one name in the import below.
"""

from dialoguecse_tf.objectives import dial2vec, dialoguecse, dse, mlm, siamese, simcse  # noqa: F401 (registration)
from dialoguecse_tf.objectives import base


def get_objective_class(name: str) -> type:
    """The `Objective` subclass registered as `name`.

    Args:
      name: an objective's `name`, e.g. "dialoguecse".

    Returns:
      The class. Raises ValueError naming the registered objectives for an unknown name.
    """
    try:
        return base.REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; registered: {', '.join(sorted(base.REGISTRY))}") from None


def objective_names() -> tuple:
    """The registered objectives' names, in registration order."""
    return tuple(base.REGISTRY)
