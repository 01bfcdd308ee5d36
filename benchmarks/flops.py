"""Benchmark 4: hardware utilisation of the encoder's forward pass.

The encoder's achieved FLOP/s (`SentenceEncoder.embed_tokens` on full-length sequences)
is set against the FLOP/s of one large float32 matrix multiply timed in the same run,
the practical ceiling of this machine for dense float32 work.

FLOPs are counted analytically, by the usual convention for transformers: only the
matrix products, 2 FLOPs per multiply-add. Per layer, with N = B * L tokens, hidden D,
intermediate I: 2*N*D*3D (Q, K, V) + 2*2*B*L*L*D (scores and the weighted sum) +
2*N*D*D (output projection) + 2*2*N*D*I (feed-forward). Softmax, GELU, LayerNorm and
the embeddings are left out (they are a few percent), so the fraction is a lower bound.

`--precision=float32,bfloat16` draws the bfloat16 roofline beside it (issue 51): a bfloat16
N x N x N `tf.matmul`, this machine's ceiling for bfloat16 products (oneDNN's AVX512_BF16 or AMX
kernels, a ceiling of its own, not float32's), and each encoder in bfloat16
(`SentenceEncoder(precision="bfloat16")`'s backbone: bfloat16 compute, float32 weights), whose
FLOP/s is set against that bfloat16 ceiling: how much of the bfloat16 hardware the encoder
uses, which the speed-up over float32 alone cannot say. The PyTorch peer runs its BERT under
`torch.autocast("cpu", dtype=torch.bfloat16)` beside it. Each candidate's `fraction_of_matmul`
is of the product of its own precision; a bfloat16 one's `fraction_of_float32_matmul` is of
float32's. Refused in one line on a CPU without bfloat16 arithmetic; written to
benchmarks/results/flops_bfloat16.json unless told.

  python -m benchmarks.flops                                   # benchmark 4
  python -m benchmarks.flops --precision=float32,bfloat16      # and the bfloat16 roofline
"""


from absl import app, flags

from benchmarks import common

common.define_flags(repeats=5, hf_folder=True, precision=True)
flags.DEFINE_list("models", ["minilm", "bert_base_shape"],
                  "minilm: the HF folder's weights; bert_base_shape: a randomly initialised 12 x 768 BERT.")
flags.DEFINE_integer("batch_size", 64, "Sequences per forward pass.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence (all real tokens, no padding).")
flags.DEFINE_integer("matmul_size", 4096, "N of the N x N x N reference matrix multiply (float32, and bfloat16 with "
                     "--precision=bfloat16).")
flags.DEFINE_bool("include_torch", True, "Also time the PyTorch peer's forward pass on the MiniLM weights.")

FLAGS = flags.FLAGS
FRACTION = ("fraction_of_matmul = the candidate's FLOP/s over the matrix product's of its own precision (matmul for "
            "float32 candidates, matmul bfloat16 for those ending in bfloat16 or bfloat16 +xla); "
            "fraction_of_float32_matmul = a bfloat16 candidate's over float32's")


def named(candidate: str, precision: str) -> str:
    """A candidate's name in `precision`: float32's as in every results file before bfloat16."""
    return candidate if precision == "float32" else f"{candidate} {precision}"


def encoder_flops(config, batch_size: int, length: int) -> float:
    tokens = batch_size * length
    dim, inner = config.hidden_size, config.intermediate_size
    per_layer = 2 * tokens * dim * 3 * dim + 4 * batch_size * length * length * dim \
        + 2 * tokens * dim * dim + 4 * tokens * dim * inner
    return float(per_layer * config.num_hidden_layers)


def main(argv):
    del argv
    precisions = common.precisions(FLAGS.precision)
    import numpy as np
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone, with_precision
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
    candidates, flop_counts = {}, {}
    # The product each candidate's FLOP/s is a fraction of: the one of its own precision.
    ceilings = {}
    for precision in precisions:
        key = named("matmul", precision)
        operands = [tf.cast(matrix, precision) for matrix in (left, right)]  # cast once, outside the timing
        candidates[key] = lambda operands=operands: tf.matmul(*operands).numpy()
        flop_counts[key] = 2.0 * size ** 3
        ceilings[key] = key

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
        for precision in precisions:
            # The backbone itself in float32; in bfloat16 one copy with its weights, for both encoders.
            computing = with_precision(backbone, precision)
            for jit in (False, True):
                encoder = SentenceEncoder(computing, loaded.tokenizer, trim_padding=False, jit_compile=jit)
                key = named(f"{name} encoder", precision) + (" +xla" if jit else "")
                candidates[key] = lambda encoder=encoder: encoder.embed_tokens(token_ids, padding_mask).numpy()
                flop_counts[key] = encoder_flops(config, batch, length)
                ceilings[key] = named("matmul", precision)
    if FLAGS.include_torch and "minilm" in configs:
        import torch

        from benchmarks.torch_peer import TorchSentenceEncoder, load_bert

        ids, mask = torch.from_numpy(token_ids.numpy().astype(np.int64)), torch.ones(batch, length, dtype=torch.long)
        for precision in precisions:
            key = named("minilm torch peer", precision)
            peer = TorchSentenceEncoder(load_bert(folder, bfloat16=precision == "bfloat16"))
            candidates[key] = lambda peer=peer: peer(ids, mask).numpy()
            flop_counts[key] = encoder_flops(configs["minilm"], batch, length)
            ceilings[key] = named("matmul", precision)

    times = common.time_alternating(candidates, FLAGS.repeats, warmup=1)
    results = {}
    for name, seconds in times.items():
        summary = common.summarize(seconds)
        summary.update(flops=flop_counts[name], flop_per_s=flop_counts[name] / summary["median_s"])
        results[name] = summary
    rows = []
    for name, summary in results.items():
        summary["fraction_of_matmul"] = summary["flop_per_s"] / results[ceilings[name]]["flop_per_s"]
        if ceilings[name] != "matmul":
            summary["fraction_of_float32_matmul"] = summary["flop_per_s"] / results["matmul"]["flop_per_s"]
        rows.append([name, summary["flops"] / 1e9, summary["median_s"], summary["flop_per_s"] / 1e9,
                     f"{summary['fraction_of_matmul']:.2f}"])
    common.print_table(
        f"Forward FLOP/s: batch {batch} x {length} tokens, matmul {size}^3, median of {FLAGS.repeats}",
        ["candidate", "GFLOP", "s", "GFLOP/s", "of matmul"], rows,
    )
    common.write_results(common.results_path(FLAGS.output_json, "flops", precisions), {
        "benchmark": "flops",
        "settings": {"hf_folder": folder, "batch_size": batch, "max_seq_length": length,
                     "matmul_size": size, "repeats": FLAGS.repeats, "precision": list(precisions),
                     "models": {name: config.to_dict() for name, config in configs.items()}},
        **({"fraction": FRACTION} if "bfloat16" in precisions else {}),
        "results": results,
    })


if __name__ == "__main__":
    app.run(main)
