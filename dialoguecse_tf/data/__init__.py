"""Corpus readers, the paper's preprocessing (section 5.1.1) and the evaluation sets' builders, in pure Python.

`dialogue` holds the data model, `readers` turns each supported corpus format into
`Dialogue` objects (one module per format, listed in `readers.registry`), `preprocessing`
merges same-speaker turns and drops short dialogues, `sr_builder` and `intent` build
evaluation sets and `demo` generates the demo corpus. Nothing here imports TensorFlow, so
corpora are read (and tested) without it; the data-prep stages (`dialoguecse_tf.prep`) load
it, with the tokenizer and the record writers of `dialoguecse_tf.records`, only once a corpus
has been read.
"""
