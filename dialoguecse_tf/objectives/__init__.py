"""The registered training objectives; `stage.run_stage` runs any of them.

Registering one: a module with an `Objective` subclass decorated with `register`, imported
below.
"""

from dialoguecse_tf.objectives import dial2vec, dialoguecse, dse, mlm, siamese, simcse  # noqa: F401 (registration)
from dialoguecse_tf.objectives.base import Objective, get_objective_class, objective_names, register

__all__ = ["Objective", "get_objective_class", "objective_names", "register"]
