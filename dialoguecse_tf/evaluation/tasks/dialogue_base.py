"""What the dialogue-level evaluators share: the labelled set (one reading of a dataset's file
serves all three in a suite) and the `dialogue_label` option."""

from dialoguecse_tf.evaluation.dialogue_sets import read_labelled_dialogues
from dialoguecse_tf.evaluation.evaluate import embed_unique
from dialoguecse_tf.evaluation.tasks.base import Evaluator


class DialogueEvaluator(Evaluator):
    """Built from a dialogue file or folder; called with `encode_dialogues(list of Dialogue) -> [N, D]`."""

    input_kind = "dialogues"
    count_key = "dialogues"
    accepts_folder = True  # an SGD folder
    option_names = ("dialogue_label",)

    @staticmethod
    def read(path: str, dialogue_label: str = "service"):
        return read_labelled_dialogues(path, dialogue_label)

    def __init__(self, path: str, data=None, dialogue_label: str = "service"):
        super().__init__(path, data, dialogue_label=dialogue_label)
        self.dialogue_label = dialogue_label

    @property
    def size(self) -> int:
        return len(self.data.dialogues)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_label": self.dialogue_label,
                f"{self.task}_labels": self.data.stats["labels"], f"{self.task}_dropped": self.data.stats["dropped"],
                f"{self.task}_empty_turns_skipped": self.data.stats["empty_turns_skipped"]}

    def vectors(self, encode_dialogues):
        vectors, index = embed_unique(encode_dialogues, self.data.dialogues)
        return vectors[[index[dialogue] for dialogue in self.data.dialogues]]
