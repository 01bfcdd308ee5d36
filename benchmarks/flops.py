"""Benchmark 4: hardware utilisation of the encoder's forward pass.

The encoder's achieved FLOP/s (`SentenceEncoder.embed_tokens` on full-length sequences)
is set against the FLOP/s of one large float32 matrix multiply timed in the same run,
the practical ceiling of this machine for dense float32 work.

FLOPs are counted analytically, by the usual convention for transformers: only the
matrix products, 2 FLOPs per multiply-add. Per layer, with N = B * L tokens, hidden D,
intermediate I: 2*N*D*3D (Q, K, V) + 2*2*B*L*L*D (scores and the weighted sum) +
2*N*D*D (output projection) + 2*2*N*D*I (feed-forward). Softmax, GELU, LayerNorm and
the embeddings are left out (they are a few percent), so the fraction is a lower bound.
"""


from absl import app, flags

from benchmarks import common

common.define_flags(repeats=5, hf_folder=True)
flags.DEFINE_list("models", ["minilm", "bert_base_shape"],
                  "minilm: the HF folder's weights; bert_base_shape: a randomly initialised 12 x 768 BERT.")
flags.DEFINE_integer("batch_size", 64, "Sequences per forward pass.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence (all real tokens, no padding).")
flags.DEFINE_integer("matmul_size", 4096, "N of the N x N x N float32 reference matrix multiply.")
flags.DEFINE_bool("include_torch", True, "Also time the PyTorch peer's forward pass on the MiniLM weights.")

FLAGS = flags.FLAGS


def encoder_flops(config, batch_size: int, length: int) -> float:
    tokens = batch_size * length
    dim, inner = config.hidden_size, config.intermediate_size
    per_layer = 2 * tokens * dim * 3 * dim + 4 * batch_size * length * length * dim \
        + 2 * tokens * dim * dim + 4 * tokens * dim * inner
    return float(per_layer * config.num_hidden_layers)


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.bert_config import BertConfig
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.encoder.sentence import SentenceEncoder

    folder = FLAGS.hf_folder or common.default_hf_folder()
    loaded = load_checkpoint(folder, max_seq_length=FLAGS.max_seq_length)
    batch, length = FLAGS.batch_size, FLAGS.max_seq_length
    rng = np.random.default_rng(0)
    token_ids = tf.constant(rng.integers(1000, 20000, size=(batch, length)), tf.int32)
    padding_mask = tf.ones((batch, length), tf.int32)

    size = FLAGS.matmul_size
    left = tf.random.normal((size, size))
    right = tf.random.normal((size, size))
    candidates = {"matmul": lambda: tf.matmul(left, right).numpy()}
    flop_counts = {"matmul": 2.0 * size ** 3}

    configs = {}
    for name in FLAGS.models:
        if name == "minilm":
            backbone, config = loaded.backbone, loaded.config
        elif name == "bert_base_shape":
            config = BertConfig(vocab_size=loaded.config.vocab_size, hidden_size=768, num_hidden_layers=12,
                                num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512)
            backbone = build_backbone(config)
        else:
            raise app.UsageError(f"--models: unknown {name!r}")
        configs[name] = config
        for jit in (False, True):
            encoder = SentenceEncoder(backbone, loaded.tokenizer, trim_padding=False, jit_compile=jit)
            key = f"{name} encoder" + (" +xla" if jit else "")
            candidates[key] = lambda encoder=encoder: encoder.embed_tokens(token_ids, padding_mask).numpy()
            flop_counts[key] = encoder_flops(config, batch, length)
    if FLAGS.include_torch and "minilm" in configs:
        import torch

        from benchmarks.torch_peer import TorchSentenceEncoder, load_bert

        peer = TorchSentenceEncoder(load_bert(folder))
        ids, mask = torch.from_numpy(token_ids.numpy().astype(np.int64)), torch.ones(batch, length, dtype=torch.long)
        candidates["minilm torch peer"] = lambda: peer(ids, mask).numpy()
        flop_counts["minilm torch peer"] = encoder_flops(configs["minilm"], batch, length)

    times = common.time_alternating(candidates, FLAGS.repeats, warmup=1)
    results = {}
    for name, seconds in times.items():
        summary = common.summarize(seconds)
        summary.update(flops=flop_counts[name], flop_per_s=flop_counts[name] / summary["median_s"])
        results[name] = summary
    ceiling = results["matmul"]["flop_per_s"]
    rows = []
    for name, summary in results.items():
        summary["fraction_of_matmul"] = summary["flop_per_s"] / ceiling
        rows.append([name, summary["flops"] / 1e9, summary["median_s"], summary["flop_per_s"] / 1e9,
                     f"{summary['fraction_of_matmul']:.2f}"])
    common.print_table(
        f"Forward FLOP/s: batch {batch} x {length} tokens, matmul {size}^3, median of {FLAGS.repeats}",
        ["candidate", "GFLOP", "s", "GFLOP/s", "of matmul"], rows,
    )
    common.write_results(common.results_path(FLAGS.output_json, "flops"), {
        "benchmark": "flops",
        "settings": {"hf_folder": folder, "batch_size": batch, "max_seq_length": length,
                     "matmul_size": size, "repeats": FLAGS.repeats,
                     "models": {name: config.to_dict() for name, config in configs.items()}},
        "results": results,
    })


if __name__ == "__main__":
    app.run(main)
