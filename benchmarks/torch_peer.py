"""The PyTorch peer of the benchmarks: HuggingFace `BertModel` with DialogueCSE's head.

Built to be the same computation as `dialoguecse_tf.models.DialogueCSEModel` (same
masked mean pooling, matching-guided embedding of eq. 3-4, I2 mean turn aggregation,
NT-Xent of eq. 8) and the same optimizer as `dialoguecse_tf.training.optimizers.create_optimizer`
(AdamW, decay 0.01 off LayerNorm and biases, epsilon 1e-6, global clip norm 1), so the
two frameworks' step times measure the same work. Benchmark-only: the library never
imports torch.
"""

import math

import numpy as np
import torch
import transformers


def masked_mean(embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(embeddings.dtype)[..., None]
    return (embeddings * mask).sum(-2) / mask.sum(-2).clamp(min=1.0)


def load_bert(folder: str) -> transformers.BertModel:
    """The HF folder's encoder without its pooler (mean pooling never reaches it)."""
    return transformers.BertModel.from_pretrained(folder, add_pooling_layer=False, attn_implementation="sdpa")


class TorchSentenceEncoder(torch.nn.Module):
    """token ids and mask -> mean-pooled last layer, as `SentenceEncoder.embed_tokens`."""

    def __init__(self, bert: transformers.BertModel):
        super().__init__()
        self.bert = bert.eval()

    @torch.inference_mode()
    def forward(self, token_ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=token_ids, attention_mask=padding_mask).last_hidden_state
        return masked_mean(hidden, padding_mask)


class TorchDialogueCSE(torch.nn.Module):
    """DialogueCSE with I2 (mean) aggregation; inputs as in `ContrastiveRecordSpec`."""

    def __init__(self, bert: transformers.BertModel, num_frozen_layers: int, temperature: float):
        super().__init__()
        self.bert = bert
        self.temperature = temperature
        for parameter in bert.embeddings.parameters():
            parameter.requires_grad_(False)
        for layer in bert.encoder.layer[:num_frozen_layers]:
            for parameter in layer.parameters():
                parameter.requires_grad_(False)

    def forward(self, context_ids, context_mask, turn_mask, candidate_ids, candidate_mask):
        batch, turns, length = context_ids.shape
        candidates = candidate_ids.shape[1]
        tokens = self.bert(
            input_ids=torch.cat([context_ids.reshape(-1, length), candidate_ids.reshape(-1, length)]),
            attention_mask=torch.cat([context_mask.reshape(-1, length), candidate_mask.reshape(-1, length)]),
        ).last_hidden_state
        dim = tokens.shape[-1]
        context_tokens = tokens[: batch * turns].reshape(batch, turns, length, dim)
        candidate_tokens = tokens[batch * turns:].reshape(batch, candidates, length, dim)

        context_free = masked_mean(candidate_tokens, candidate_mask)
        matching = torch.einsum("btid,bkjd->bktij", context_tokens, candidate_tokens) / math.sqrt(dim)
        u_mask = context_mask.to(matching.dtype)[:, None, :, :, None]
        r_mask = candidate_mask.to(matching.dtype)[:, :, None, None, :]
        refined = torch.einsum("bktij,bkjd->bktid", matching * u_mask * r_mask, candidate_tokens)
        pooled = masked_mean(refined, context_mask[:, None])  # [B, K, T, D]
        valid = turn_mask.to(pooled.dtype)[:, None, :]
        weights = valid / valid.sum(-1, keepdim=True).clamp(min=1.0)
        context_aware = (pooled * weights[..., None]).sum(2)

        similarities = torch.nn.functional.cosine_similarity(context_free, context_aware, dim=-1, eps=1e-6)
        logits = similarities / self.temperature
        return (torch.logsumexp(logits, -1) - logits[:, 0]).mean()


def create_optimizer(model: torch.nn.Module, learning_rate: float) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if "LayerNorm" in name or name.endswith("bias") else decay).append(parameter)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=learning_rate, betas=(0.9, 0.999), eps=1e-6,
    )


def train_step(model: TorchDialogueCSE, optimizer: torch.optim.Optimizer, batch: dict) -> float:
    loss = model(**batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    return float(loss.detach())


def to_torch_batch(batch: dict) -> dict:
    """A `ContrastiveRecordSpec` batch of NumPy arrays -> `TorchDialogueCSE.forward` kwargs."""
    from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                    CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK)

    def tensor(name):
        return torch.from_numpy(np.asarray(batch[name], dtype=np.int64))

    return {
        "context_ids": tensor(CONTEXT_INPUT_IDS),
        "context_mask": tensor(CONTEXT_INPUT_MASK),
        "turn_mask": tensor(CONTEXT_TURN_MASK),
        "candidate_ids": tensor(CANDIDATE_INPUT_IDS),
        "candidate_mask": tensor(CANDIDATE_INPUT_MASK),
    }
