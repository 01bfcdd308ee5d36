"""Each objective's TensorFlow training step, built as `stage.run_stage` builds it, beside its
PyTorch peer (`torch_peer`) on the same weights, heads and batch: what `objective_steps.py` times
and `tests/repository/test_torch_peers.py` checks.

The TensorFlow step is the registered objective's: its options and training settings from the
objective's English CPU preset (`PRESETS`), its record checks and batch preparation, its model
around a backbone loaded from the HuggingFace folder, `initialize_from`, its `create_optimizer`
and `training.loop.build_train_step`. The peer copies the heads the TensorFlow model starts
with and builds the optimizer the objective builds (update rule, rates, schedule, weight decay
and its exclusions, clipping).

A `precision` override (`build_steps(..., precision="bfloat16")`) reaches the TensorFlow step as
the stage's `--precision` reaches `stage.run_stage`: as the TrainConfig's `precision`, in which
the backbone is built (`build_backbone(..., precision=)`) and which the objective's
`create_optimizer` reads. The peer of a bfloat16 step runs its BERT under `torch.autocast` in
bfloat16 (`torch_peer.load_bert(..., bfloat16=True)`).
"""

import keras
import numpy as np
import tensorflow as tf
import torch

from benchmarks import torch_peer
from dialoguecse_tf.presets import get_preset
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET,
                                                ContrastiveRecordSpec)
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS, DialogueRecordSpec)
from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK, PairRecordSpec
from dialoguecse_tf.stage import configure

# Each objective's English CPU preset (MiniLM), the shapes the benchmark times.
PRESETS = {"dialoguecse": "cpu_en_dialoguecse", "siamese_m": "cpu_en_siamese_m", "dse": "cpu_dse",
           "dial2vec": "cpu_dial2vec", "simcse": "cpu_simcse"}
# Padding regimes, the same on both sides: the preset's length buckets, or every sequence at max_seq_length.
PADDINGS = ("buckets", "padded")
# The first ids of BERT's vocabularies are special or unused tokens.
FIRST_WORD_ID = 5


def check_choices(objectives, paddings) -> None:
    """Refuses objectives without a preset here and unknown padding regimes, naming the flag."""
    from absl import app

    unknown = sorted(set(objectives) - set(PRESETS))
    if unknown:
        raise app.UsageError(f"--objectives: unknown {unknown}; choose from {sorted(PRESETS)}")
    unknown = sorted(set(paddings) - set(PADDINGS))
    if unknown:
        raise app.UsageError(f"--padding: unknown {unknown}; choose from {PADDINGS}")


def preset_objective(name: str, **overrides):
    """(objective, TrainConfig) of `name`'s preset, `overrides` winning."""
    values = {**get_preset(PRESETS[name]), **overrides}
    return configure(values.pop("objective"), **values)


def _ids_and_mask(rng, shape, length, vocab_size):
    """Token ids with lengths uniform in [length / 4, length], left-aligned, padding 0."""
    lengths = rng.integers(max(length // 4, 2), length + 1, size=shape)
    mask = (np.arange(length) < lengths[..., None]).astype(np.int32)
    return rng.integers(FIRST_WORD_ID, vocab_size, size=shape + (length,)).astype(np.int32) * mask, mask


def synthetic_records(objective, config, vocab_size: int, seed: int):
    """(record spec, one global batch of synthetic records at the objective's shape)."""
    rng = np.random.default_rng(seed)
    batch, length = config.train_batch_size, config.max_seq_length
    options = objective.options
    if objective.record_type == "contrastive":
        layout = objective.context_selection
        spec = ContrastiveRecordSpec(length, options.num_context_turns, options.num_negatives, layout)
        slots = spec.num_context_slots
        context_ids, context_mask = _ids_and_mask(rng, (batch, slots), length, vocab_size)
        # Every other example lacks its farthest turn (the first slot of "sides", the last of "nearest").
        turn_mask = np.ones((batch, slots), np.int32)
        turn_mask[::2, 0 if layout == "sides" else slots - 1] = 0
        context_ids *= turn_mask[..., None]
        context_mask *= turn_mask[..., None]
        if layout == "sides":
            turns = options.num_context_turns
            offsets = np.concatenate([np.arange(-turns, 0), np.arange(1, turns + 1)])
        else:
            offsets = -np.arange(1, slots + 1)
        candidate_ids, candidate_mask = _ids_and_mask(rng, (batch, spec.num_candidates), length, vocab_size)
        return spec, {CONTEXT_INPUT_IDS: context_ids, CONTEXT_INPUT_MASK: context_mask, CONTEXT_TURN_MASK: turn_mask,
                      CONTEXT_TURN_OFFSET: np.broadcast_to(offsets, (batch, slots)) * turn_mask,
                      CANDIDATE_INPUT_IDS: candidate_ids, CANDIDATE_INPUT_MASK: candidate_mask}
    if objective.record_type == "pairs":
        # SimCSE trains on an utterance paired with itself; DSE on consecutive utterances.
        pairing = "self" if objective.name == "simcse" else "consecutive"
        ids, mask = _ids_and_mask(rng, (batch, 2), length, vocab_size)
        if pairing == "self":
            ids[:, 1], mask[:, 1] = ids[:, 0], mask[:, 0]
        return PairRecordSpec(length, pairing), {PAIR_INPUT_IDS: ids, PAIR_INPUT_MASK: mask}
    return DialogueRecordSpec(length, options.num_negatives), synthetic_dialogues(
        rng, (batch, options.num_negatives + 1), length, vocab_size)


def synthetic_dialogues(rng, shape, length, vocab_size):
    """Dialogues filling all `length` tokens (dial2vec's records hold the first 512 of each,
    and most dialogues are longer): [CLS], then turns of 8-24 tokens, roles alternating."""
    ids, roles, turns = (np.zeros(shape + (length,), np.int32) for _ in range(3))
    for index in np.ndindex(*shape):
        position, turn = 1, 0
        ids[index][0] = 2
        while position < length:
            size = min(int(rng.integers(8, 25)), length - position)
            ids[index][position:position + size] = rng.integers(FIRST_WORD_ID, vocab_size, size=size)
            roles[index][position:position + size] = turn % 2
            turns[index][position:position + size] = turn
            position += size
            turn += 1
    return {DIALOGUE_INPUT_IDS: ids, DIALOGUE_INPUT_MASK: np.ones(shape + (length,), np.int32),
            DIALOGUE_ROLE_IDS: roles, DIALOGUE_TURN_IDS: turns}


def prepared_batch(objective, spec, records: dict) -> dict:
    """The records checked and prepared by the objective, as NumPy int32 (both sides' input)."""
    objective.check_records(spec, "synthetic")
    batch = objective.prepare_batch({name: tf.constant(value) for name, value in records.items()})
    return {name: tf.cast(value, tf.int32).numpy() for name, value in batch.items()}


def tensorflow_step(objective, config, loaded, batch: dict, num_length_buckets: int, dropout: float):
    """(step: () -> first loss as a float, the model) as `stage.run_stage` builds them."""
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.training.loop import build_train_step

    keras.utils.set_random_seed(config.random_seed)
    bert_config = loaded.config.replace(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        backbone = build_backbone(bert_config, precision=config.precision)
        model = objective.build_model(backbone, bert_config, loaded.tokenizer, num_length_buckets)
        backbone.set_weights(loaded.backbone.get_weights())
        objective.initialize_from(model, loaded)
        optimizer = objective.create_optimizer(config, config.num_train_steps, model)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)

    def step_fn(model_, batch_, training):
        return objective.compute_loss(model_, batch_, training, config.train_batch_size)

    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step, config.jit_compile)
    return (lambda: float(train_step(iterator)[0])), model


def _numpy(variable):
    return keras.ops.convert_to_numpy(variable)


def torch_step(objective, config, folder: str, tf_model, batch: dict, num_length_buckets: int, dropout: float,
               cls_id: int) -> torch_peer.TrainStep:
    """The objective's PyTorch peer, its heads copied from `tf_model`, with the objective's optimizer,
    its BERT in bfloat16 where `config.precision` is."""
    torch.manual_seed(config.random_seed)
    options, name = objective.options, objective.name
    bert = torch_peer.load_bert(folder, dropout, bfloat16=config.precision == "bfloat16")
    rate, steps, warmup = config.learning_rate, config.num_train_steps, config.num_warmup_steps
    if name == "dialoguecse":
        if options.variant == "paper_text":
            if options.aggregation != "mean":
                raise ValueError("the PyTorch peer of dialoguecse paper_text has I2 (aggregation=mean) only")
            model = torch_peer.TorchDialogueCSE(bert, options.num_frozen_layers, options.temperature,
                                                num_length_buckets)
            return torch_peer.TrainStep(model, torch_peer.create_optimizer(model, rate), batch, 1.0,
                                        torch_peer.warmup_linear_decay(warmup, steps))
        study = (options.matching_side != "context", options.normalize_matching_tokens,
                 options.fuse_turns_before_pooling)
        if any(study):
            raise ValueError("the PyTorch peer of dialoguecse released has the release's defaults only "
                             "(no study option)")
        attention = tf_model.round_attention
        heads = {"w": _numpy(attention.w), "b": _numpy(attention.b), "u": _numpy(attention.u)}
        empty_round_ids = tf_model.empty_round_token_ids  # ([CLS], [SEP]) with empty_rounds=empty_text
        model = torch_peer.TorchReleasedDialogueCSE(bert, options.num_frozen_layers, options.temperature,
                                                    options.aggregation, heads, num_length_buckets, empty_round_ids)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=rate,
                                     betas=(0.9, 0.999), eps=1e-8)
        return torch_peer.TrainStep(model, optimizer, batch, options.clip_norm, torch_peer.exponential_decay_floor(
            rate, options.lr_decay_rate, options.lr_decay_steps, options.min_learning_rate))
    if name in ("siamese_m", "siamese_s"):
        heads = {"hidden_kernel": _numpy(tf_model.matching_hidden.kernel),
                 "hidden_bias": _numpy(tf_model.matching_hidden.bias),
                 "score_kernel": _numpy(tf_model.matching_score.kernel),
                 "score_bias": _numpy(tf_model.matching_score.bias)}
        model = torch_peer.TorchSiamese(bert, options.num_frozen_layers, cls_id, heads, num_length_buckets)
        return torch_peer.TrainStep(model, torch_peer.create_optimizer(model, rate), batch, 1.0,
                                    torch_peer.warmup_linear_decay(warmup, steps))
    if name == "dse":
        hidden, projection = tf_model.head.layers
        heads = {"hidden_kernel": _numpy(hidden.kernel), "projection_kernel": _numpy(projection.kernel)}
        model = torch_peer.TorchDSE(bert, options.num_frozen_layers, options.temperature, options.contrast_type,
                                    heads, num_length_buckets)
        encoder = [p for p in model.bert.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam([{"params": encoder},
                                      {"params": list(model.head.parameters()),
                                       "lr": rate * options.head_learning_rate_scale}],
                                     lr=rate, betas=(0.9, 0.999), eps=1e-8)
        return torch_peer.TrainStep(model, optimizer, batch)
    if name == "dial2vec":
        if options.role_segment_ids:
            raise ValueError("the PyTorch peer of dial2vec feeds all-zero token types (role_segment_ids=False)")
        model = torch_peer.TorchDial2vec(bert, options.num_frozen_layers, options.temperature, options.window)
        return torch_peer.TrainStep(model, torch_peer.create_optimizer(model, rate), batch, 1.0,
                                    torch_peer.warmup_linear_decay(warmup, steps))
    if name == "simcse":
        if options.pooler != "cls":
            raise ValueError("the PyTorch peer of simcse has the cls pooler (with its MLP) only")
        heads = {"kernel": _numpy(tf_model.mlp.kernel), "bias": _numpy(tf_model.mlp.bias)}
        model = torch_peer.TorchSimCSE(bert, options.temperature, heads, num_length_buckets)
        optimizer = torch_peer.create_optimizer(model, rate, weight_decay=options.weight_decay, epsilon=1e-8)
        return torch_peer.TrainStep(model, optimizer, batch, 1.0, torch_peer.warmup_linear_decay(warmup, steps))
    raise ValueError(f"no PyTorch peer for objective {name!r}")


def build_steps(name: str, folder: str, loaded, num_length_buckets: int, dropout: float, seed: int = 0,
                **overrides) -> dict:
    """{"tf": step, "torch": step, "batch": the prepared batch, "config": TrainConfig} for objective
    `name` at its preset (`overrides` winning), both encoders loaded from `folder` (`loaded` is its
    `checkpoints.load_checkpoint`) with both dropout rates at `dropout`."""
    objective, config = preset_objective(name, **overrides)
    spec, records = synthetic_records(objective, config, loaded.config.vocab_size, seed)
    batch = prepared_batch(objective, spec, records)
    tf_run, tf_model = tensorflow_step(objective, config, loaded, batch, num_length_buckets, dropout)
    torch_run = torch_step(objective, config, folder, tf_model, batch, num_length_buckets, dropout,
                           loaded.tokenizer.cls_id)
    return {"tf": tf_run, "torch": torch_run, "batch": batch, "config": config, "objective": objective}
