"""Few-shot intent classification by fine-tuning (DSE, section 4.2 and Appendix C, Table 7):
the encoder and a linear softmax layer trained on k = 1 and 5 utterances per intent, accuracy
on the test split, the mean over 10 runs (and the sample std); the release's `run_finetune.py
--TASK seq` with `evaluate/scripts/ft.sh`'s settings (mean pooling, lr 3e-5, batch 8, at most 50
epochs, patience 5, length 64; `finetune_base` says how a run trains and selects).

What the release validates and scores on (data/process_evaluate.py, evaluate/utils/data.py):
each run's validation set is k further utterances per intent drawn from the training split
(the second half of the release's draw of 2k), disjoint from its k training ones; the test
split is scored whole. The sets are read as the similarity task `intent` reads them
(`data.intent`): Banking77's train.json (the pool) and test.json (3,080 scored); CLINC150's
in-scope train and test items (15,000 and 4,500; the release drops the out-of-scope ones,
process_evaluate.py:39-41, and its `val` split is written but never read: validation comes from
train); HWU64's one list split 85/15 per intent as `--intent_split` says (the release's split
depends on a label map it does not ship, `data.intent`). Every intent is trained, whatever its
count (the release draws min(2k, n)).

The CPU preset ("cpu", sized for 2 cores; docs/dse.md gives its measured cost) keeps the
release's model, learning rate, batch, schedule and patience, and cuts: 2 runs instead of 10,
at most 20 epochs instead of 50 (the schedule then decays over 20; the release's runs on MiniLM
peaked at epochs 17 to 29), validation on at most 150 of a run's drawn items (a seeded sample)
instead of all of them (77 to 750), and scoring on a seeded sample of 1,000 test utterances,
the same for every run and model.
"""

import numpy as np

from dialoguecse_tf.data.intent import read_intent_dataset
from dialoguecse_tf.evaluation.prototypes import SHOTS
from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.finetune_base import (FineTuneEvaluator, FineTuneSettings, few_shot_split,
                                                           seeded_subset)
from dialoguecse_tf.evaluation.tasks.intent import shot_columns

RELEASE = FineTuneSettings(learning_rate=3e-5, batch_size=8, max_epochs=50, patience=5, eval_steps=10,
                           dropout=0.1, max_seq_length=64, num_runs=10)
CPU = FineTuneSettings(learning_rate=3e-5, batch_size=8, max_epochs=20, patience=5, eval_steps=10,
                       dropout=0.1, max_seq_length=64, num_runs=2, max_validation_items=150, max_test_items=1000)
# The test sample's seed: one sample for every run and every model, so rows are compared on the same items.
TEST_SAMPLE_SEED = 0


@register_task
class IntentFineTuneEvaluator(FineTuneEvaluator):
    name = "intent_ft"
    task = "intent_ft"
    label = "Intent (fine-tuned)"
    count_key = "intent_ft_test_items"
    description = ("few-shot intent classification by fine-tuning: the encoder, mean-pooled, and a linear layer "
                   "trained on k sampled utterances per intent, early-stopped on k more, k = 1 and 5, accuracy")
    metrics = shot_columns("ft_acc", "FT ")
    primary_metric = f"ft_acc_{SHOTS[0]}shot"
    accepts_folder = True  # Banking77's train.json and test.json
    option_names = ("intent_split", "finetune_preset")
    shots = SHOTS
    presets = {"release": RELEASE, "cpu": CPU}
    run_metric_names = ("acc",)

    @staticmethod
    def read_data(path: str, intent_split: str = "seeded"):
        return read_intent_dataset(path, intent_split)

    @classmethod
    def metric_key(cls, shots: int, name: str) -> str:
        return f"ft_{name}_{shots}shot"

    def __init__(self, path: str, data=None, **options):
        super().__init__(path, data, **options)
        self.label_index = {label: i for i, label in enumerate(self.data.labels)}
        unseen = sorted({label for _, label in self.data.test} - set(self.label_index))
        if unseen:
            raise ValueError(f"{path}: test intents never seen in training: {unseen[:5]}")
        self.test_items = [self.data.test[i] for i in seeded_subset(len(self.data.test), self.settings.max_test_items,
                                                                     TEST_SAMPLE_SEED)]

    @property
    def size(self) -> int:
        return len(self.data.test)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_split": self.data.split,
                f"{self.task}_scored_items": len(self.test_items), f"{self.task}_intents": len(self.label_index)}

    def _examples(self, items):
        from dialoguecse_tf.evaluation.finetune import Examples

        return Examples([text for text, _ in items], np.array([self.label_index[label] for _, label in items]))

    def run_metrics(self, make_encoder, shots: int, run: int) -> dict:
        from dialoguecse_tf.evaluation.finetune import fine_tune

        train_rows, validation_rows = few_shot_split([(label,) for _, label in self.data.train], shots, run)
        validation_rows = [validation_rows[i] for i in seeded_subset(len(validation_rows),
                                                                      self.settings.max_validation_items, run)]
        result = fine_tune(make_encoder, self._examples([self.data.train[i] for i in train_rows]),
                           self._examples([self.data.train[i] for i in validation_rows]),
                           self._examples(self.test_items), len(self.label_index), False, self.settings, run,
                           name=f"{self.name} {self.path} {shots}-shot run {run}")
        return result.test
