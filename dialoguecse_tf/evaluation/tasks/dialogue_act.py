"""Dialogue action prediction by fine-tuning (DSE, section 4.2.2 and Table 5): the system turn's
dialogue acts predicted from the dialogue history, a multi-label problem; the encoder, mean-
pooled, dropout 0.2 and a linear layer with a sigmoid per act (an act is predicted above 0.5),
trained on 10 and 20 examples per act; micro- and macro-F1 on the test split, the mean over 5
runs (and the sample std). The release's `run_finetune.py --TASK da` with `evaluate/scripts/
ft.sh`'s settings: lr 5e-5, batch 16, at most 100 epochs, validation every max(30, steps per
epoch) steps on the mean of micro- and macro-F1, patience 3, 32 tokens, one turn of history
(`--num_turn 1` is unused by the concatenating model: the history is cut by words instead);
`finetune_base` says how a run trains and selects.

Inputs: TOD-BERT's input string for the system turn (`data.dialogue_acts`), `[USR]` and `[SYS]`
turned into `[SEP]` and its last 28 words kept (`dialogue_acts.release_input_text`), then
`[CLS] ... [SEP]` cut at 32 tokens. F1 as sklearn's (`finetune_base.multilabel_f1`): macro over
every label, so an act the test split lacks counts 0, as in the release.

The release scores DSTC2 and GSIM as TOD-BERT processed them (1,117 and 1,039 test examples,
13 and 19 acts); they are not available here. This project substitutes SGD: its system turns'
acts (9 of them once the closing GOODBYE, which no example carries, is left aside), SGD train
the pool each run draws its training and validation sets from (as the release draws both from
its training split), SGD dev the set scored (17,286 examples; SGD test is held back). TOD-BERT's
`universal_dialog_act/<set>` folder is read too, so the release's own sets run as they are.

The CPU preset ("cpu", sized for 2 cores; docs/dse.md gives its measured cost) keeps the
release's model, learning rate, batch, schedule, validation interval and patience, and cuts:
2 runs instead of 5, at most 40 epochs instead of 100 (the schedule then decays over 40; the
release's runs on MiniLM peaked at epochs 28 and 35), and scoring on a seeded sample of 2,000
test examples, the same for every run and model.
"""

import hashlib
import os

import numpy as np

from dialoguecse_tf.data.dialogue_acts import dataset_files, read_act_dataset, release_input_text
from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.finetune_base import (FineTuneEvaluator, FineTuneSettings, few_shot_split,
                                                           seeded_subset)

SHOTS = (10, 20)
RELEASE = FineTuneSettings(learning_rate=5e-5, batch_size=16, max_epochs=100, patience=3, eval_steps=30,
                           dropout=0.2, max_seq_length=32, num_runs=5)
CPU = FineTuneSettings(learning_rate=5e-5, batch_size=16, max_epochs=40, patience=3, eval_steps=30,
                       dropout=0.2, max_seq_length=32, num_runs=2, max_test_items=2000)
# The test sample's seed: one sample for every run and every model, so rows are compared on the same examples.
TEST_SAMPLE_SEED = 0
F1_NAMES = ("micro_f1", "macro_f1")


@register_task
class DialogueActEvaluator(FineTuneEvaluator):
    name = "dialogue_act"
    task = "dialogue_act"
    label = "Dialogue acts"
    count_key = "dialogue_act_test_examples"
    description = ("dialogue action prediction by fine-tuning: the encoder, mean-pooled, and a sigmoid layer "
                   "predicting a system turn's acts from the last words of its dialogue, trained on k examples per "
                   "act, early-stopped on k more, k = 10 and 20, micro- and macro-F1")
    metrics = tuple(column for k in SHOTS for name, header in (("micro_f1", "micro F1"), ("macro_f1", "macro F1"))
                    for column in ((f"da_{name}_{k}shot", f"DA {k}-shot {header}"),
                                   (f"da_{name}_{k}shot_std", f"DA {k}-shot {header} std")))
    primary_metric = f"da_micro_f1_{SHOTS[0]}shot"
    accepts_folder = True  # an SGD folder, or TOD-BERT's
    shots = SHOTS
    presets = {"release": RELEASE, "cpu": CPU}
    run_metric_names = F1_NAMES

    read_data = staticmethod(read_act_dataset)

    @classmethod
    def metric_key(cls, shots: int, name: str) -> str:
        return f"da_{name}_{shots}shot"

    def __init__(self, path: str, data=None, **options):
        super().__init__(path, data, **options)
        self.test_examples = [self.data.test[i] for i in seeded_subset(len(self.data.test),
                                                                        self.settings.max_test_items, TEST_SAMPLE_SEED)]

    @property
    def size(self) -> int:
        return len(self.data.test)

    def record(self) -> dict:
        # The checksum of the files read: a folder's own (SGD's LICENSE.txt) would not tell two sets apart.
        digest = hashlib.sha256()
        for file in dataset_files(self.path):
            digest.update(os.path.relpath(file, self.path).encode("utf-8") + b"\0")
            with open(file, "rb") as reader:
                for block in iter(lambda: reader.read(1 << 20), b""):
                    digest.update(block)
        return {**super().record(), f"{self.task}_sha256": digest.hexdigest(), f"{self.task}_layout": self.data.layout,
                f"{self.task}_acts": list(self.data.labels), f"{self.task}_train_examples": len(self.data.train),
                f"{self.task}_scored_examples": len(self.test_examples),
                f"{self.task}_scored_split": self.data.test_split}

    def _examples(self, examples):
        from dialoguecse_tf.evaluation.finetune import Examples

        labels = np.zeros((len(examples), len(self.data.labels)), np.int32)
        for row, example in enumerate(examples):
            labels[row, list(example.acts)] = 1
        return Examples([release_input_text(example.text, self.settings.max_seq_length) for example in examples],
                        labels)

    def run_metrics(self, make_encoder, shots: int, run: int) -> dict:
        from dialoguecse_tf.evaluation.finetune import fine_tune

        train_rows, validation_rows = few_shot_split([example.acts for example in self.data.train], shots, run)
        validation_rows = [validation_rows[i] for i in seeded_subset(len(validation_rows),
                                                                      self.settings.max_validation_items, run)]
        result = fine_tune(make_encoder, self._examples([self.data.train[i] for i in train_rows]),
                           self._examples([self.data.train[i] for i in validation_rows]),
                           self._examples(self.test_examples), len(self.data.labels), True, self.settings, run,
                           name=f"{self.name} {self.path} {shots}-shot run {run}")
        return result.test
