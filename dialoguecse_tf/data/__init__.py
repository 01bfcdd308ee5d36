"""Corpus readers and the paper's preprocessing (section 5.1.1), in pure Python.

`dialogue` holds the data model, `readers` turns each supported corpus format into
`Dialogue` objects, and `preprocessing` merges same-speaker turns and drops short dialogues.
Nothing here imports TensorFlow, so data preparation runs (and is tested) without it.
"""
