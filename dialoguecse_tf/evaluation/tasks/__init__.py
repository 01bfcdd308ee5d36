"""Evaluation tasks: one module per task (`base.Evaluator` subclasses), looked up by name in
`registry`, whose imports give the tables' column order."""
