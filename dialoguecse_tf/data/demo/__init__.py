"""The project's own demo corpus: English customer-service dialogues of an online shop.

Everything here is written by this project (templates, slot values, rules); nothing is copied
from another corpus. It exists so every stage (pre-training, contrastive training, SR and D-STS
evaluation) can run end to end on data that may be shipped and regenerated at will.

Modules: `templates` reads the wording (the JSON files of `template_files/`) and fills
templates; `dialogues` generates the training dialogues from them; `held_out` builds the
evaluation sets from dialogues of held-out templates; `corpus` writes it all
(`run_generate_demo_corpus`, the stage `data_prep/generate_demo_corpus.py` runs). Nothing here
imports TensorFlow.
"""

from dialoguecse_tf.data.demo.corpus import DemoCorpusConfig, run_generate_demo_corpus
from dialoguecse_tf.data.demo.dialogues import generate_dialogues

__all__ = ["DemoCorpusConfig", "generate_dialogues", "run_generate_demo_corpus"]
