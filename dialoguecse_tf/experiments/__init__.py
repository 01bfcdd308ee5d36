"""Experiments as data: specs (`spec.py`), their plan of keyed runs (`plan.py`), the tools a step
runs (`tools.py`) and the runner (`execute.py`) behind `dialoguecse-experiment`."""
