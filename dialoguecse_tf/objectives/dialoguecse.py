"""DialogueCSE (paper, section 4) as a registered objective, in two variants.

* `variant="released"` (the default, and of the paper presets): what the authors' released
  TF1 code computes (AlibabaResearch/DAMO-ConvAI, `dialogue-cse/`). Whether it made the
  paper's numbers cannot be checked: its data code is not released (`/data` in its
  .gitignore) and its defaults differ from the paper's stated settings (max_seq_len 100
  against 50 for ECD, 50 epochs, 4 GPU towers; config_bert.py:39, 46, 50). Point by point,
  with the file and line of the release:
  - context: up to `num_context_turns` (3, config_bert.py:31 `round_num`) utterances BEFORE
    the response and as many AFTER it, each side matched on its own and the two summed
    (`bidirectional=1`, config_bert.py:22, dse_cl_bert.py:183-186); records of
    `context_layout="sides"`. The paper's "3 context turns" is 3 on each side.
  - matching: M = 0.1 * U R^T (dse_cl_bert.py:61; the paper's eq. 3 divides by sqrt(d), a
    per-pair scalar the cosine ignores), R_hat = M R pooled over the context utterance's
    tokens (l.63-66);
  - turn weighting: per side, alpha = softmax over the valid rounds of u . tanh(W x + b)
    (256 units, pooling.py:23-37) on each round's token mean over all L positions
    (l.166-167); each round scaled by (1 + alpha), rounds summed (l.180-184). The release
    has no other path, so this variant aggregates with it unless `aggregation="mean"` drops
    alpha: the paper's I2 (eq. 7) on the release's matching, NOT the authors' code;
  - padding rounds (a side with fewer than 3 turns): the release's data code is not public,
    but its arithmetic reads every one of the `round_num` slots per side: the mask of an
    empty round gives its token mean 0/0 replaced by the features of whatever the slot holds
    (dse_cl_bert.py:65-66), the round attention's -2^32+1 fill leaves a side with no valid
    round 1/3 of the weight per slot (pooling.py:34-37), and nothing in the model skips a
    slot. So `empty_rounds` defaults to "empty_text" for this variant: such a slot holds the
    features of an empty text "[CLS] [SEP]" and weighs 1 (1 + alpha with attention; 4/3 where
    its whole side is empty). "zero" (such a slot weighs 0) is this project's former default,
    kept as an option; the one-seed studies (results/ecd_cpu/study_empty_rounds,
    results/sgd_minilm/study_empty_rounds) measured the two within about one seed spread;
  - similarity cos(r_bar, R_tilde) / 0.1 (l.36-47, 188); loss -mean over the B x K
    entries of log_softmax * labels (l.197): eq. 8 divided by K;
  - training: plain Adam (beta 0.9 / 0.999, epsilon 1e-8, no weight decay;
    wrapper_bert.py:222, config_bert.py:52-53), lr 5e-5 * 0.98^(step / 10,000) floored at
    1e-5 with no warmup (wrapper_bert.py:217-219, config_bert.py:51-57), gradients clipped
    to global norm 3.0 (wrapper_bert.py:360); batch 20 per GPU tower, 10 candidates
    (config_bert.py:36, 48; its default `train_gpu="0,1,2,3"` averages 4 towers' gradients,
    80 examples an update, while its run_train.sh passes one GPU: the presets take 20);
    max length 100 (config_bert.py:39; the paper says 50 for ECD and MDC); trainable: the top
    6 BERT layers and the round attention; embeddings, bottom 6 layers and pooler frozen
    (wrapper_bert.py:341-348); the last layer's output only (dse_cl_bert.py:29, 87).
* `variant="paper_text"`: our reading of the paper's text, the project's first
  implementation: the `num_context_turns` turns nearest to the response on either side,
  M = U R^T / sqrt(d) (eq. 3-4), I2 = mean over the valid turns (eq. 7) or I1 = softmax of a
  two-layer ReLU FFN on each pooled R_hat (eq. 5-6), NT-Xent per example (eq. 8), BERT's
  AdamW with linear warmup and decay.

Both freeze the embeddings, the bottom `num_frozen_layers` layers and BERT's [CLS] pooler,
and give the sentence embedding as the mean-pooled last layer (paper L107; the release's
bert_dse_server.py). The release has no SiameseBERT code: the siamese baselines follow the
paper's text only.
"""

import dataclasses

from absl import logging

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import check_values, field
from dialoguecse_tf.encoder.backbone import freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.models.dialoguecse import MATCHING_SIDES, DialogueCSEModel, ReleasedDialogueCSEModel
from dialoguecse_tf.models.layers import AGGREGATIONS, DEFAULT_ATTENTION_HIDDEN_SIZE
from dialoguecse_tf.objectives.base import register
from dialoguecse_tf.objectives.contrastive import ContrastiveObjective, ContrastiveOptions, candidate_metrics
from dialoguecse_tf.training import optimizers

VARIANTS = ("released", "paper_text")
VARIANT_AGGREGATION = {"released": "attention", "paper_text": "mean"}
EMPTY_ROUNDS = ("zero", "empty_text")
VARIANT_EMPTY_ROUNDS = {"released": "empty_text", "paper_text": "zero"}


@dataclasses.dataclass(frozen=True)
class DialogueCSEOptions(ContrastiveOptions):
    variant: str = field("released", "released: the authors' released code (left and right contexts, (1 + alpha) "
                         "round weighting, Adam with exponential decay); paper_text: our reading of the paper's "
                         "equations (nearest turns, eq. 5-7, AdamW with warmup).", choices=VARIANTS)
    aggregation: str = field("", "Turn aggregation: attention (released: its (1 + alpha) round attention, the "
                             "release's only path; paper_text: I1, eq. 5-6) or mean (released: the rounds' plain "
                             "sum, the paper's I2 on the release's matching, not the authors' code; paper_text: "
                             "I2, eq. 7). Empty: the variant's own, attention for released and mean (I2, the "
                             "paper's best) for paper_text.", choices=("",) + tuple(AGGREGATIONS))
    empty_rounds: str = field("", "released: a padding context round (a side with fewer turns than "
                              "num_context_turns; the release's data code that fills them is not public) holds the "
                              "features of an empty text '[CLS] [SEP]' with weight 1, 4/3 where its whole side is "
                              "empty (empty_text, the reading the release's arithmetic implies) or weighs 0 (zero). "
                              "Empty: the variant's own, empty_text for released and zero for paper_text (whose "
                              "mean skips padding turns).", choices=("",) + EMPTY_ROUNDS)
    attention_hidden_size: int = field(DEFAULT_ATTENTION_HIDDEN_SIZE,
                                       "Hidden units of the I1 scoring FFN (paper_text) or of the round attention "
                                       "(released: 256).", minimum=1)
    temperature: float = field(0.1, "NT-Xent temperature tau (paper and release: 0.1).", minimum=0.0,
                               exclusive_minimum=True)
    lr_decay_rate: float = field(0.98, "released: learning rate factor per lr_decay_steps (continuous).", minimum=0.0,
                                  exclusive_minimum=True, maximum=1.0)
    lr_decay_steps: int = field(10000, "released: steps per lr_decay_rate factor.", minimum=1)
    min_learning_rate: float = field(1e-5, "released: floor of the decayed learning rate.", minimum=0.0)
    clip_norm: float = field(3.0, "released: global gradient-norm clip (paper_text clips at 1, as BERT).",
                              minimum=0.0, exclusive_minimum=True)
    matching_side: str = field("context", "released, study only: pool R_hat over the context's tokens (the "
                               "release) or R_hat' = M^T U over the candidate's tokens (response).",
                               choices=MATCHING_SIDES)
    normalize_matching_tokens: bool = field(False, "released, study only: build M from L2-normalised token "
                                            "vectors.")
    fuse_turns_before_pooling: bool = field(False, "released, study only: sum the rounds' R_hat matrices row by "
                                            "row, then pool once (rounds weigh by token count).")

    def __post_init__(self):
        check_values(self)
        # Frozen: the variant's defaults are written into the options, so config.json names them.
        if not self.aggregation:
            object.__setattr__(self, "aggregation", VARIANT_AGGREGATION[self.variant])
        if not self.empty_rounds:
            object.__setattr__(self, "empty_rounds", VARIANT_EMPTY_ROUNDS[self.variant])
        if self.variant != "released" and self.empty_rounds != "zero":
            raise ValueError("empty_rounds is an option of variant=released (paper_text's records have no "
                             "padding rounds between real ones, and its mean skips them)")
        study = (self.matching_side != "context", self.normalize_matching_tokens, self.fuse_turns_before_pooling)
        if self.variant != "released" and any(study):
            raise ValueError("matching_side, normalize_matching_tokens and fuse_turns_before_pooling are study "
                             "options of variant=released")


@register
class DialogueCSEObjective(ContrastiveObjective):
    """NT-Xent over the cosines of each candidate's context-free and context-aware embeddings,
    the true response the positive and the sampled responses the negatives (see the module
    docstring for the two variants)."""

    name = "dialoguecse"
    paper = ("DialogueCSE",
             'Liu et al., EMNLP 2021, "DialogueCSE: Dialogue-based Contrastive Learning of Sentence Embeddings"',
             "https://arxiv.org/abs/2109.12599")
    summary = "DialogueCSE: MGE, turn aggregation (I1/I2), NT-Xent; variant released or paper_text"
    options_class = DialogueCSEOptions

    @property
    def context_selection(self) -> str:
        return "sides" if self.options.variant == "released" else "nearest"

    def describe(self) -> str:
        return f"variant {self.options.variant}"

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        freeze_bottom_layers(backbone, self.options.num_frozen_layers)
        freeze_pooler(backbone)
        if self.options.variant == "released":
            return ReleasedDialogueCSEModel(backbone, aggregation=self.options.aggregation,
                                            num_length_buckets=num_length_buckets,
                                            attention_size=self.options.attention_hidden_size,
                                            matching_side=self.options.matching_side,
                                            normalize_matching_tokens=self.options.normalize_matching_tokens,
                                            fuse_turns_before_pooling=self.options.fuse_turns_before_pooling,
                                            empty_round_token_ids=self._empty_round_token_ids(tokenizer))
        return DialogueCSEModel(backbone, aggregation=self.options.aggregation,
                                attention_hidden_size=self.options.attention_hidden_size,
                                num_length_buckets=num_length_buckets)

    def _empty_round_token_ids(self, tokenizer):
        if self.options.empty_rounds == "zero":
            return None
        return (tokenizer.cls_id, tokenizer.sep_id)

    def create_optimizer(self, config, num_train_steps: int, model):
        """paper_text: BERT's AdamW; released: the release's Adam with exponential decay and
        gradient clipping (the module docstring), which ignores `num_warmup_steps`."""
        if self.options.variant == "paper_text":
            return super().create_optimizer(config, num_train_steps, model)
        if config.num_warmup_steps:
            logging.warning("variant released: the release has no warmup; num_warmup_steps=%d is ignored",
                            config.num_warmup_steps)
        return optimizers.create_released_optimizer(
            config.learning_rate, self.options.lr_decay_rate, self.options.lr_decay_steps,
            self.options.min_learning_rate, self.options.clip_norm, loss_scaling=config.precision == "float16")

    def example_losses(self, model, batch, training):
        """Eq. 8 (released: divided by K) of each example's [K] candidate cosines, and
        `candidate_metrics` ranked by those cosines."""
        outputs = model(batch, training=training)
        similarities = losses.pair_similarities(outputs["context_free"], outputs["context_aware"])
        if self.options.variant == "released":
            per_example = losses.released_nt_xent_per_example_loss(similarities, self.options.temperature)
        else:
            per_example = losses.nt_xent_per_example_loss(similarities, self.options.temperature)
        return per_example, candidate_metrics(similarities, similarities)
