"""dial2vec (Liu et al., EMNLP 2022, "Self-Guided Contrastive Learning of Unsupervised Dialogue
Embeddings") as a registered objective, after the authors' released code (AlibabaResearch/
DAMO-ConvAI `dial2vec/`, its BERT path). What follows the release and what departs from it:

* records (`data/dialogue_records.py`): as the release, each dialogue `samples_per_dialogue`
  = 10 times with freshly drawn negatives (generate_training.py:88-103), the first 512 tokens
  of `[CLS] u_1 [SEP] ... u_n` (data_provider.py:217-244). Departures: the negatives keep a
  random interlocutor by default (the paper's text; `keep_role="released"` keeps role 1 as the
  code does), the last turn also ends in a [SEP], and `truncation="recent_turns"` (an option)
  keeps the most recent whole turns instead;
* model (`models/dial2vec.py`): self- and cross-representations per role within a turn window
  (network.py:95-127), token types all zero as the release's BERT path (data_provider.py:250);
  `role_segment_ids` (an option) feeds the roles as token types instead;
* loss: per role, the dialogue's cos(self, cross) / tau against its negatives', as the
  release's `calc_loss` (network.py:210-216): -mean over the B x S entries of
  log_softmax * onehot, i.e. each dialogue's cross-entropy divided by S; the two roles' losses
  summed (l.155-161; tests/objectives/test_objectives_dial2vec.py checks it against a NumPy transcription).
  tau: the paper and the released scripts say 0.2 (run_plato.sh:22); the authors say their
  released checkpoints used 0.05 (presets `paper_dial2vec` and `paper_dial2vec_tau005`);
* training: the bottom `num_frozen_layers` layers and the embeddings frozen (the release
  unfreezes parameters whose names contain 6..11, i.e. the top 6 of 12 layers, network.py:65-77),
  lr 1e-5 with 10 % warmup, batch 5 dialogues per replica. Departure: the optimizer. The release's
  is BERTAdam (no bias correction, per-tensor clipping at 1.0, weight decay 0.01 on every
  parameter, since `n not in no_decay` compares whole names: run.py:221-225,
  optimization.py:146-163) with `warmup_linear` of x = step / the number of training lines
  (run.py:49, 218, 225; optimization.py:32-35, 165-167). With batch 5 on one GPU an epoch is
  lines / 5 steps, so the 5 epochs of SGD and doc2dial end exactly at x = 1: 10 % warmup, then
  linear decay to 0, the shape of the schedule here. Only bitod's 10 epochs
  (train_all_datasets.sh) drive the rate below zero after epoch 5, and on the paper's 4 GPUs
  (DistributedSampler) x reaches only 0.25. The project's AdamW (bias-corrected, decay
  excluding LayerNorm and biases, global clipping at 1.0) with warmup and linear decay to zero
  over the run is used.

The dialogue embedding after training is `pooling.interlocutor_mean` of the backbone's output
(`DialogueEncoder`, reading dialogues with the truncation and token types recorded here in the
encoder's metadata): the sum of the two roles' token means.
"""

import dataclasses

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.encoder.backbone import freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.encoder.packing import TRUNCATIONS
from dialoguecse_tf.models.dial2vec import DEFAULT_WINDOW, Dial2vecModel
from dialoguecse_tf.objectives.base import Objective, register
from dialoguecse_tf.objectives.contrastive import candidate_metrics
from dialoguecse_tf.records.spec import RECORDS_INFO_FILE
from dialoguecse_tf.records.dialogues import RECORD_TYPE_DIALOGUES


@dataclasses.dataclass(frozen=True)
class Dial2vecOptions:
    temperature: float = field(0.2, "Temperature tau (paper and released scripts: 0.2; released checkpoints: 0.05).")
    window: int = field(DEFAULT_WINDOW, "Turns apart beyond which two tokens do not attend in the cross-"
                        "representations (dial2vec: 10).")
    num_negatives: int = field(9, "Negatives per dialogue (dial2vec: 9); at most what the records carry.")
    num_frozen_layers: int = field(6, "Bottom BERT layers kept frozen, with the embeddings (dial2vec: 6 of 12). A "
                                   "count, not a fraction, in the paper presets too: a run freezing every layer is "
                                   "refused, naming the half to pass (3 for a 6-layer MiniLM).", minimum=0)
    truncation: str = field("head", "How the records cut too long a dialogue (create_dialogue_data.py "
                            "--truncation; checked against them): head, the first tokens (the release's BERT path), "
                            "or recent_turns. Recorded in the encoder, whose dialogue embedding then cuts alike.",
                            choices=TRUNCATIONS)
    role_segment_ids: bool = field(False, "Feed each token's role as BERT's token type (segment id). Off: all-zero "
                                   "token types, as the release's BERT path; roles act only through the role masks. "
                                   "Recorded in the encoder, whose dialogue embedding then feeds them alike.")

    def __post_init__(self):
        if isinstance(self.temperature, bool) or not self.temperature > 0:
            raise ValueError(f"temperature must be a positive number, got {self.temperature!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 0:
            raise ValueError(f"window must be a non-negative int, got {self.window!r}")
        if isinstance(self.num_negatives, bool) or not isinstance(self.num_negatives, int) or self.num_negatives < 1:
            raise ValueError(f"num_negatives must be a positive int, got {self.num_negatives!r}")
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")
        if not isinstance(self.role_segment_ids, bool):
            raise ValueError(f"role_segment_ids must be a bool, got {self.role_segment_ids!r}")


@register
class Dial2vecObjective(Objective):
    """Self-guided contrastive learning of whole dialogues (see the module docstring)."""

    name = "dial2vec"
    paper = ("dial2vec",
             'Liu et al., EMNLP 2022, "Dial2vec: Self-Guided Contrastive Learning of Unsupervised Dialogue Embeddings"',
             "https://arxiv.org/abs/2210.15332")
    summary = "dial2vec: whole dialogues, interlocutor-aware self-guided contrastive loss"
    record_type = RECORD_TYPE_DIALOGUES
    options_class = Dial2vecOptions
    training_defaults = {"train_batch_size": 5, "learning_rate": 1e-5}

    def record_requirements(self) -> dict:
        return {"truncation": self.options.truncation}

    def check_records(self, spec, records_dir: str) -> None:
        if self.options.num_negatives > spec.num_negatives:
            raise ValueError(f"num_negatives={self.options.num_negatives} but the records in {records_dir} carry only "
                             f"{spec.num_negatives} (see {records_dir}/{RECORDS_INFO_FILE})")

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        freeze_bottom_layers(backbone, self.options.num_frozen_layers)
        freeze_pooler(backbone)
        return Dial2vecModel(backbone, window=self.options.window, role_segment_ids=self.options.role_segment_ids)

    def prepare_batch(self, batch: dict) -> dict:
        """Keeps each record's dialogue and its first `num_negatives` negatives: every feature
        [B, 1 + negatives, ...] -> [B, num_negatives + 1, ...]."""
        keep = self.options.num_negatives + 1
        return {name: value[:, :keep] for name, value in batch.items()}

    def example_losses(self, model, batch, training):
        """The sum of the two roles' released NT-Xent (each divided by K), and the mean of the
        two roles' `candidate_metrics`."""
        outputs = model(batch, training=training)
        role_0 = losses.pair_similarities(outputs["self_0"], outputs["cross_0"])
        role_1 = losses.pair_similarities(outputs["self_1"], outputs["cross_1"])
        per_example = (losses.released_nt_xent_per_example_loss(role_0, self.options.temperature)
                       + losses.released_nt_xent_per_example_loss(role_1, self.options.temperature))
        # A dialogue's metrics: the mean of its two roles'.
        metrics = [candidate_metrics(role, role) for role in (role_0, role_1)]
        return per_example, {name: (metrics[0][name] + metrics[1][name]) / 2 for name in metrics[0]}

    def metadata(self) -> dict:
        return dataclasses.asdict(self.options)
