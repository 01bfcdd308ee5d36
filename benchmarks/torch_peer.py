"""The PyTorch peers of the benchmarks: HuggingFace `BertModel` with each objective's head, loss
and optimizer, written to compute what the library's TensorFlow objective computes.

One peer per objective, each the same maths as its `dialoguecse_tf.objectives` module:
* `TorchDialogueCSE`: `paper_text` (masked mean pooling, eq. 3-4 matching, I2 mean turn
  aggregation, NT-Xent of eq. 8), BERT's AdamW (`create_optimizer`);
* `TorchReleasedDialogueCSE`: `released` (the release's left/right rounds, 0.1-scaled matching
  pooled over the context, (1 + alpha) round attention, NT-Xent / K), its Adam with the
  exponential decay floored at 1e-5 and global clipping at 3;
* `TorchSiamese`: SiameseBERT_M (flattened context, [u; v; |u - v|; u * v] matching MLP, softmax
  ranking loss), BERT's AdamW with warmup;
* `TorchDSE`: DSE (mean pooling, the bias-free two-layer head, HardNeg/Orig loss over the 2N
  texts), `torch.optim.Adam` with the head at a scaled rate, no clipping;
* `TorchDial2vec`: dial2vec (self and cross representations per role within the turn window,
  the release's NT-Xent / S per role, summed), BERT's AdamW with warmup;
* `TorchSimCSE`: unsupervised SimCSE ([CLS] through Linear + tanh, one-directional in-batch
  cross-entropy), AdamW without weight decay, epsilon 1e-8.

Heads are built from the TensorFlow model's weights (`heads` arguments), so both sides start
equal; encoders are length-bucketed as `backbone.encode_sequences` does when given the same
`num_length_buckets`. Benchmark-only: the library never imports torch.

bfloat16 (`load_bert(..., bfloat16=True)`) is the library's bfloat16 in PyTorch's terms: BERT's
forward pass under `torch.autocast("cpu", dtype=torch.bfloat16)`, weights and gradients float32,
no loss scaling, its last layer cast to float32 before any head reads it. Autocast covers BERT
only, not the peer's whole forward pass, because the library keeps heads, similarities and losses
in float32: under autocast they would run in bfloat16 (a logit cosine / 0.05 keeps about 3
significant digits), another loss to check for a small share of the step's products.
"""

import math

import numpy as np
import torch
import transformers

# `losses._SQUARED_NORM_EPSILON`: the floor under a squared norm before its inverse square root.
SQUARED_NORM_EPSILON = 1e-12


def masked_mean(embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(embeddings.dtype)[..., None]
    return (embeddings * mask).sum(-2) / mask.sum(-2).clamp(min=1.0)


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True).clamp(min=SQUARED_NORM_EPSILON))


def cosine(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    return (l2_normalize(first) * l2_normalize(second)).sum(-1)


def released_nt_xent(similarities: torch.Tensor, temperature: float) -> torch.Tensor:
    """`losses.released_nt_xent_per_example_loss`: [B, K] cosines -> [B], NT-Xent / K."""
    logits = similarities / temperature
    return (torch.logsumexp(logits, -1) - logits[:, 0]) / similarities.shape[-1]


class BFloat16BertModel(transformers.BertModel):
    """`BertModel` computing under autocast in bfloat16, its last layer returned in float32."""

    def forward(self, *args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            output = super().forward(*args, **kwargs)
        output.last_hidden_state = output.last_hidden_state.float()
        return output


def load_bert(folder: str, dropout: float | None = None, bfloat16: bool = False) -> transformers.BertModel:
    """The HF folder's encoder without its pooler (no objective here reads BERT's pooler output:
    SimCSE's MLP is a head of its own); `dropout` overrides both of the config's rates; `bfloat16`
    computes in bfloat16 (`BFloat16BertModel`)."""
    rates = {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    model_class = BFloat16BertModel if bfloat16 else transformers.BertModel
    return model_class.from_pretrained(folder, add_pooling_layer=False, attn_implementation="sdpa", **rates)


def freeze_bottom_layers(bert: transformers.BertModel, num_frozen_layers: int) -> None:
    """`backbone.freeze_bottom_layers`: the embeddings and the bottom layers; 0 freezes nothing."""
    if num_frozen_layers == 0:
        return
    for module in [bert.embeddings, *bert.encoder.layer[:num_frozen_layers]]:
        for parameter in module.parameters():
            parameter.requires_grad_(False)


def encode(bert, token_ids: torch.Tensor, padding_mask: torch.Tensor, num_length_buckets: int = 1) -> torch.Tensor:
    """[N, L] -> last layer [N, L, D], in `num_length_buckets` length groups each cut to its longest
    sequence (positions past it zero), as `backbone.encode_sequences`."""
    if num_length_buckets == 1:
        return bert(input_ids=token_ids, attention_mask=padding_mask).last_hidden_state
    seq_length, count = token_ids.shape[1], token_ids.shape[0]
    order = torch.argsort(padding_mask.sum(1), stable=True)
    buckets = min(num_length_buckets, count)
    sizes = [count // buckets + (i < count % buckets) for i in range(buckets)]
    outputs = []
    for group in torch.split(order, sizes):
        mask = padding_mask[group]
        real = mask.any(0).nonzero()
        length = int(real.max()) + 1 if len(real) else 1
        hidden = bert(input_ids=token_ids[group, :length], attention_mask=mask[:, :length]).last_hidden_state
        outputs.append(torch.nn.functional.pad(hidden, (0, 0, 0, seq_length - length)))
    return torch.cat(outputs)[torch.argsort(order)]


def dense(kernel, bias=None) -> torch.nn.Linear:
    """A Keras Dense layer's kernel [in, out] (and bias) as a `torch.nn.Linear`."""
    kernel = np.asarray(kernel)
    layer = torch.nn.Linear(kernel.shape[0], kernel.shape[1], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
        if bias is not None:
            layer.bias.copy_(torch.from_numpy(np.asarray(bias)))
    return layer


def long_tensors(batch: dict, names: dict) -> dict:
    """{argument: record feature name} -> {argument: int64 tensor of the batch's feature}."""
    return {argument: torch.from_numpy(np.asarray(batch[name], dtype=np.int64)) for argument, name in names.items()}


class TorchSentenceEncoder(torch.nn.Module):
    """token ids and mask -> mean-pooled last layer, as `SentenceEncoder.embed_tokens`."""

    def __init__(self, bert: transformers.BertModel):
        super().__init__()
        self.bert = bert.eval()

    @torch.inference_mode()
    def forward(self, token_ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=token_ids, attention_mask=padding_mask).last_hidden_state
        return masked_mean(hidden, padding_mask)


def contrastive_inputs(batch: dict) -> dict:
    """A `ContrastiveRecordSpec` batch -> the contrastive peers' `forward` arguments."""
    from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                    CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK)

    return long_tensors(batch, {"context_ids": CONTEXT_INPUT_IDS, "context_mask": CONTEXT_INPUT_MASK,
                                "turn_mask": CONTEXT_TURN_MASK, "candidate_ids": CANDIDATE_INPUT_IDS,
                                "candidate_mask": CANDIDATE_INPUT_MASK})


def pair_inputs(batch: dict) -> dict:
    from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK

    return long_tensors(batch, {"pair_ids": PAIR_INPUT_IDS, "pair_mask": PAIR_INPUT_MASK})


def dialogue_inputs(batch: dict) -> dict:
    from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                                  DIALOGUE_TURN_IDS)

    return long_tensors(batch, {"ids": DIALOGUE_INPUT_IDS, "mask": DIALOGUE_INPUT_MASK, "roles": DIALOGUE_ROLE_IDS,
                                "turns": DIALOGUE_TURN_IDS})


def encode_contexts_and_candidates(bert, context_ids, context_mask, candidate_ids, candidate_mask, buckets):
    """`models.dialoguecse.encode_contexts_and_candidates`: one encoder call -> ([B, T, L, D], [B, K, L, D])."""
    batch, turns, length = context_ids.shape
    tokens = encode(bert, torch.cat([context_ids.reshape(-1, length), candidate_ids.reshape(-1, length)]),
                    torch.cat([context_mask.reshape(-1, length), candidate_mask.reshape(-1, length)]), buckets)
    context = tokens[: batch * turns].reshape(batch, turns, length, -1)
    return context, tokens[batch * turns:].reshape(batch, candidate_ids.shape[1], length, -1)


class TorchDialogueCSE(torch.nn.Module):
    """DialogueCSE `paper_text` with I2 (mean) aggregation."""

    inputs = staticmethod(contrastive_inputs)

    def __init__(self, bert: transformers.BertModel, num_frozen_layers: int, temperature: float,
                 num_length_buckets: int = 1):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        self.num_length_buckets = num_length_buckets
        freeze_bottom_layers(bert, num_frozen_layers)

    def forward(self, context_ids, context_mask, turn_mask, candidate_ids, candidate_mask):
        context_tokens, candidate_tokens = encode_contexts_and_candidates(
            self.bert, context_ids, context_mask, candidate_ids, candidate_mask, self.num_length_buckets)
        context_free = masked_mean(candidate_tokens, candidate_mask)
        matching = torch.einsum("btid,bkjd->bktij", context_tokens, candidate_tokens) / math.sqrt(
            context_tokens.shape[-1])
        u_mask = context_mask.to(matching.dtype)[:, None, :, :, None]
        r_mask = candidate_mask.to(matching.dtype)[:, :, None, None, :]
        refined = torch.einsum("bktij,bkjd->bktid", matching * u_mask * r_mask, candidate_tokens)
        pooled = masked_mean(refined, context_mask[:, None])  # [B, K, T, D]
        valid = turn_mask.to(pooled.dtype)[:, None, :]
        weights = valid / valid.sum(-1, keepdim=True).clamp(min=1.0)
        context_aware = (pooled * weights[..., None]).sum(2)
        logits = cosine(context_free, context_aware) / self.temperature
        return (torch.logsumexp(logits, -1) - logits[:, 0]).mean()


class TorchReleasedDialogueCSE(torch.nn.Module):
    """DialogueCSE `released` (`models.dialoguecse.ReleasedDialogueCSEModel`): `heads` holds the
    round attention's `w`, `b`, `u`; `empty_round_ids` ([CLS], [SEP]) fills every padding round
    with that empty text and weighs it as a round (empty_rounds "empty_text"), None weighs it 0."""

    inputs = staticmethod(contrastive_inputs)
    MATCHING_SCALE = 0.1

    def __init__(self, bert, num_frozen_layers: int, temperature: float, aggregation: str, heads: dict,
                 num_length_buckets: int = 1, empty_round_ids: tuple | None = None):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        self.aggregation = aggregation
        self.empty_round_ids = empty_round_ids
        self.num_length_buckets = num_length_buckets
        freeze_bottom_layers(bert, num_frozen_layers)
        self.attention = torch.nn.ParameterDict(
            {name: torch.nn.Parameter(torch.from_numpy(np.array(heads[name]))) for name in ("w", "b", "u")})

    def round_attention(self, rounds, round_mask):
        scores = (torch.tanh(rounds @ self.attention["w"] + self.attention["b"]) * self.attention["u"]).sum(-1)
        return torch.softmax(scores.masked_fill(round_mask == 0, -(2.0**32) + 1.0), dim=-1)

    def forward(self, context_ids, context_mask, turn_mask, candidate_ids, candidate_mask):
        if self.empty_round_ids is not None:
            empty = (turn_mask == 0)[..., None]
            filler = torch.zeros(context_ids.shape[-1], dtype=context_ids.dtype)
            filler[0], filler[1] = self.empty_round_ids
            context_ids = torch.where(empty, filler, context_ids)
            context_mask = torch.where(empty, (torch.arange(context_ids.shape[-1]) < 2).to(context_mask.dtype),
                                       context_mask)
        context, candidates = encode_contexts_and_candidates(
            self.bert, context_ids, context_mask, candidate_ids, candidate_mask, self.num_length_buckets)
        context = context * context_mask[..., None].to(context.dtype)
        candidates = candidates * candidate_mask[..., None].to(candidates.dtype)
        context_free = masked_mean(candidates, candidate_mask)
        projections = torch.einsum("bsd,bkld->bksl", masked_mean(context, context_mask), candidates)
        refined = self.MATCHING_SCALE * torch.einsum("bksl,bkld->bksd", projections, candidates)  # [B, K, 2N, D]
        rounds = turn_mask.to(context.dtype)
        if self.aggregation == "attention":
            unmasked_mean = context.sum(2) / context.shape[2]
            half = rounds.shape[1] // 2
            alphas = torch.cat([self.round_attention(unmasked_mean[:, :half], rounds[:, :half]),
                                self.round_attention(unmasked_mean[:, half:], rounds[:, half:])], dim=1)
            weights = 1.0 + alphas
        else:
            weights = torch.ones_like(rounds)
        if self.empty_round_ids is None:
            weights = weights * rounds
        context_aware = (refined * weights[:, None, :, None]).sum(2)
        return released_nt_xent(cosine(context_free, context_aware), self.temperature).mean()


class TorchSiamese(torch.nn.Module):
    """SiameseBERT_M/_S (`models.siamese.SiameseBertModel`): `heads` holds the matching layers'
    `hidden_kernel`, `hidden_bias`, `score_kernel`, `score_bias`."""

    inputs = staticmethod(contrastive_inputs)

    def __init__(self, bert, num_frozen_layers: int, cls_id: int, heads: dict, num_length_buckets: int = 1):
        super().__init__()
        self.bert = bert
        self.cls_id = cls_id
        self.num_length_buckets = num_length_buckets
        freeze_bottom_layers(bert, num_frozen_layers)
        self.matching_hidden = dense(heads["hidden_kernel"], heads["hidden_bias"])
        self.matching_score = dense(heads["score_kernel"], heads["score_bias"])

    def flatten_context(self, context_ids, context_mask, turn_mask):
        """`models.siamese.flatten_context`: `[CLS] u_1 [SEP] u_2 [SEP] ...`, each turn's first real
        token ([CLS]) dropped, cut to min(T * L, max positions)."""
        width = min(context_ids.shape[1] * context_ids.shape[2], self.bert.config.max_position_embeddings)
        keep = (context_mask > 0) & (context_mask.cumsum(-1) > 1) & (turn_mask[..., None] > 0)
        ids = torch.zeros(context_ids.shape[0], width, dtype=context_ids.dtype)
        for row, (tokens, kept) in enumerate(zip(context_ids, keep)):
            flat = torch.cat([torch.tensor([self.cls_id], dtype=tokens.dtype), tokens[kept]])[:width]
            ids[row, : len(flat)] = flat
        mask = (torch.arange(width) < torch.tensor([min(int(k.sum()) + 1, width) for k in keep])[:, None]).long()
        return ids, mask

    def embed(self, ids, mask):
        return masked_mean(encode(self.bert, ids, mask, self.num_length_buckets), mask)

    def forward(self, context_ids, context_mask, turn_mask, candidate_ids, candidate_mask):
        batch, candidates, length = candidate_ids.shape
        context = self.embed(*self.flatten_context(context_ids, context_mask, turn_mask))
        responses = self.embed(candidate_ids.reshape(-1, length), candidate_mask.reshape(-1, length))
        responses = responses.reshape(batch, candidates, -1)
        context = context[:, None].expand_as(responses)
        features = torch.cat([context, responses, (context - responses).abs(), context * responses], -1)
        scores = self.matching_score(torch.relu(self.matching_hidden(features)))[..., 0]
        return torch.nn.functional.cross_entropy(scores, torch.zeros(batch, dtype=torch.long))


def flat_pairs(pair_ids, pair_mask):
    """[B, 2, L] -> [2B, L], pair by pair, as `backbone.encode_pairs`."""
    return pair_ids.reshape(-1, pair_ids.shape[-1]), pair_mask.reshape(-1, pair_mask.shape[-1])


def dse_loss(first, second, temperature: float, contrast_type: str):
    """`losses.dse_per_anchor_loss` (same log-space form), averaged over the 2N anchors."""
    count = first.shape[0]
    texts = torch.cat([first, second])
    logits = texts @ texts.T / temperature
    partner = torch.cat([torch.arange(count, 2 * count), torch.arange(count)])
    excluded = torch.eye(2 * count, dtype=torch.bool) | torch.nn.functional.one_hot(partner, 2 * count).bool()
    positive = logits[torch.arange(2 * count), partner]
    negatives = logits.masked_fill(excluded, -1e9)
    if contrast_type == "Orig":
        negative_mass = torch.logsumexp(negatives, -1)
    else:
        negative_mass = torch.logsumexp(2.0 * negatives, -1) - (torch.logsumexp(negatives, -1)
                                                                - math.log(2 * count - 2))
    return (torch.logsumexp(torch.stack([positive, negative_mass], -1), -1) - positive).mean()


class TorchDSE(torch.nn.Module):
    """DSE (`models.dse.DSEModel`, `losses.dse_per_anchor_loss`): `heads` holds the head's
    `hidden_kernel` and `projection_kernel` (no biases)."""

    inputs = staticmethod(pair_inputs)

    def __init__(self, bert, num_frozen_layers: int, temperature: float, contrast_type: str, heads: dict,
                 num_length_buckets: int = 1):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        self.contrast_type = contrast_type
        self.num_length_buckets = num_length_buckets
        freeze_bottom_layers(bert, num_frozen_layers)
        self.head = torch.nn.Sequential(dense(heads["hidden_kernel"]), torch.nn.ReLU(),
                                        dense(heads["projection_kernel"]))

    def forward(self, pair_ids, pair_mask):
        ids, mask = flat_pairs(pair_ids, pair_mask)
        projections = self.head(masked_mean(encode(self.bert, ids, mask, self.num_length_buckets), mask))
        projections = l2_normalize(projections.reshape(pair_ids.shape[0], 2, -1))
        return dse_loss(projections[:, 0], projections[:, 1], self.temperature, self.contrast_type)


class TorchDial2vec(torch.nn.Module):
    """dial2vec (`models.dial2vec`, all-zero token types), the two roles' losses summed."""

    inputs = staticmethod(dialogue_inputs)

    def __init__(self, bert, num_frozen_layers: int, temperature: float, window: int):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        self.window = window
        freeze_bottom_layers(bert, num_frozen_layers)

    def forward(self, ids, mask, roles, turns):
        batch, samples, length = ids.shape
        ids, mask, roles, turns = (x.reshape(-1, length) for x in (ids, mask, roles, turns))
        hidden = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
        real = mask.to(hidden.dtype)
        role_1 = (roles == 1).to(hidden.dtype) * real
        role_0 = real - role_1
        self_0, self_1 = hidden * role_0[..., None], hidden * role_1[..., None]
        near = ((turns[:, :, None] - turns[:, None, :]).abs() <= self.window).to(hidden.dtype)
        correlation = (self_1 @ self_0.transpose(1, 2)) * near
        cross_0, cross_1 = correlation @ self_0, correlation.transpose(1, 2) @ self_1
        loss = 0.0
        for own, cross, own_mask, cross_mask in ((self_0, cross_0, role_0, role_1), (self_1, cross_1, role_1, role_0)):
            similarities = cosine(masked_mean(own, own_mask), masked_mean(cross, cross_mask)).reshape(batch, samples)
            loss = loss + released_nt_xent(similarities, self.temperature)
        return loss.mean()


class TorchSimCSE(torch.nn.Module):
    """Unsupervised SimCSE, pooler `cls` (`models.simcse.SimCSEModel`): `heads` holds the MLP's
    `kernel` and `bias` (the TF model's re-initialised pooler layer)."""

    inputs = staticmethod(pair_inputs)

    def __init__(self, bert, temperature: float, heads: dict, num_length_buckets: int = 1):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        self.num_length_buckets = num_length_buckets
        self.mlp = dense(heads["kernel"], heads["bias"])

    def forward(self, pair_ids, pair_mask):
        ids, mask = flat_pairs(pair_ids, pair_mask)
        views = torch.tanh(self.mlp(encode(self.bert, ids, mask, self.num_length_buckets)[:, 0]))
        views = l2_normalize(views.reshape(pair_ids.shape[0], 2, -1))
        logits = views[:, 0] @ views[:, 1].T / self.temperature
        return torch.nn.functional.cross_entropy(logits, torch.arange(logits.shape[0]))


def warmup_linear_decay(num_warmup_steps: int, num_train_steps: int):
    """`optimizers.WarmupLinearDecay` as a `LambdaLR` factor of the step."""
    decay_steps = max(num_train_steps - num_warmup_steps, 1)

    def factor(step):
        if step < num_warmup_steps:
            return (step + 1.0) / num_warmup_steps
        return max(0.0, 1.0 - (step - num_warmup_steps) / decay_steps)

    return factor


def exponential_decay_floor(learning_rate, decay_rate, decay_steps, min_learning_rate):
    """`optimizers.ExponentialDecayFloor` as a `LambdaLR` factor of the step."""
    return lambda step: max(learning_rate * decay_rate ** (step / decay_steps), min_learning_rate) / learning_rate


def create_optimizer(model: torch.nn.Module, learning_rate: float, weight_decay: float = 0.01,
                     epsilon: float = 1e-6) -> torch.optim.Optimizer:
    """`optimizers.create_optimizer`'s AdamW: no decay on LayerNorm and biases (clipping is the step's)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(parameter)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=learning_rate, betas=(0.9, 0.999), eps=epsilon)


class TrainStep:
    """One training step of `model` on one fixed batch: forward, backward, clipping of the
    global gradient norm (`clip_norm` None: none), the optimizer and the schedule's step."""

    def __init__(self, model, optimizer, batch: dict, clip_norm: float | None = None, schedule=None):
        self.model, self.optimizer, self.clip_norm = model.train(), optimizer, clip_norm
        self.inputs = model.inputs(batch)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule) if schedule else None
        self.parameters = [p for p in model.parameters() if p.requires_grad]

    def __call__(self) -> float:
        loss = self.model(**self.inputs)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.parameters, self.clip_norm)
        self.optimizer.step()
        if self.scheduler:
            self.scheduler.step()
        return float(loss.detach())
