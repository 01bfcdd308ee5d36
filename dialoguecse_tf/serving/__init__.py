"""The serving half: an encoder as other stacks load it.

`layout` names the export folder's files without importing TensorFlow, so a bad request fails
before TensorFlow loads; `savedmodel` writes and reads TF Serving's SavedModel, `interop` the
HuggingFace (transformers, sentence-transformers) and keras-hub folders, and `embed` is the
library of the `dialoguecse-embed` command.
"""
