"""Corpus readers, the paper's preprocessing (section 5.1.1) and the data-prep stages, in pure Python.

`dialogue` holds the data model, `readers` turns each supported corpus format into
`Dialogue` objects, `preprocessing` merges same-speaker turns and drops short dialogues,
`sr_builder` and `intent` build evaluation sets, `demo_corpus` generates the demo corpus and
`pipeline` runs the data-prep stages. Nothing here imports TensorFlow, so corpora are read (and
tested) without it; `pipeline` loads it, with the tokenizer and the record writers of
`dialoguecse_tf.records`, only once a corpus has been read.
"""
