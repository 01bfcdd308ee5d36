"""The registered training objectives; `stage.run_stage` runs any of them.

Registering one: a module with an `Objective` subclass decorated with `register`, and its name in
the import of `objectives/registry.py`.
"""

from dialoguecse_tf.objectives.base import Objective, register
from dialoguecse_tf.objectives.registry import get_objective_class, objective_names

__all__ = ["Objective", "get_objective_class", "objective_names", "register"]
