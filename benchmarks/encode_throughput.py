"""Benchmark 1: sentences/s of `encode()` and of the exported SavedModel vs HF transformers.

Both sides hold the same weights (one HuggingFace BERT folder loaded by each), embed the
same sentences at the same batch size and maximum length, and mean-pool. Before timing,
the vectors are compared (max abs diff must stay under --max_abs_diff). Two input regimes:

* `padded`: every batch padded to --max_seq_length on both sides (the plain path);
* `fast`: both sides sort sentences by length and pad each batch to its longest
  sentence (the project's default `encode()`; on the HF side, what sentence-transformers
  does), so neither pays for padding the other skips.

Candidates run alternately in one process; the table gives median sentences/s and the
ratio to the PyTorch peer of the same regime.

`--precision=float32,bfloat16` adds `encode()` in bfloat16 in both regimes (issue 51):
`SentenceEncoder(..., precision="bfloat16")`, as `dialoguecse-embed --precision=bfloat16` and
`from_checkpoint(..., precision="bfloat16")` run it (BERT in bfloat16, float32 weights, vectors
pooled in float32), beside the PyTorch peer in bfloat16 (BERT under
`torch.autocast("cpu", dtype=torch.bfloat16)`, pooled in float32; `torch_peer.load_bert`). The
same weights and sentences; bfloat16 vectors agree with float32's to a cosine, not to 1e-3
(`--min_cosine_bfloat16`, checked before timing). Each bfloat16 `encode()` gets its speed ratio
over the float32 peer (`ratio_to_torch`), the bfloat16 peer and its own float32 path. The run
writes benchmarks/results/encode_throughput_bfloat16.json unless told, and is refused in one line
on a CPU without bfloat16 arithmetic.

  python -m benchmarks.encode_throughput                                     # benchmark 1
  python -m benchmarks.encode_throughput --precision=float32,bfloat16        # and in bfloat16
"""

import atexit
import shutil
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common

common.define_flags(repeats=5, hf_folder=True, precision=True)
flags.DEFINE_string("texts_file", None, "One sentence per line; default: utterances of the project's demo corpus.")
flags.DEFINE_integer("num_sentences", 512, "Sentences embedded per timed pass.")
flags.DEFINE_integer("batch_size", 64, "Sentences per batch, both sides.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence at most (with [CLS] and [SEP]).")
flags.DEFINE_float("max_abs_diff", 1e-3, "Largest allowed difference between the two sides' float32 vectors.")
flags.DEFINE_float("min_cosine_bfloat16", 0.999,
                   "--precision=bfloat16: smallest allowed cosine between a bfloat16 candidate's vector of a sentence "
                   "and the float32 peer's (bfloat16 keeps 8 significant bits, so its vectors differ by more than "
                   "--max_abs_diff; a wrong weight or mask still turns them further).")

FLAGS = flags.FLAGS
# What the bfloat16 candidates' fields mean, in the results file.
BFLOAT16_KEYS = ("candidates ending in bfloat16: encode() with SentenceEncoder(precision='bfloat16'), the peer with "
                 "BERT under torch.autocast('cpu', torch.bfloat16); min_cosine_bfloat16: each one's smallest cosine "
                 "to the float32 peer's vectors (torch padded); ratio_to_torch: sentences/s over the float32 peer's "
                 "of its regime, ratio_to_torch_bfloat16 over the bfloat16 peer's, ratio_to_tf_float32 over the same "
                 "encode() in float32")


def load_texts(texts_file, num_sentences):
    if texts_file:
        with open(texts_file, encoding="utf-8") as reader:
            texts = [line.strip() for line in reader if line.strip()]
    else:
        from dialoguecse_tf.data.demo import generate_dialogues

        texts = list(dict.fromkeys(turn.text for d in generate_dialogues(2000, seed=7) for turn in d.turns))
    if len(texts) < num_sentences:
        raise ValueError(f"need {num_sentences} sentences, found {len(texts)}")
    return texts[:num_sentences]


def min_cosine(vectors, reference) -> float:
    """The smallest cosine between a row of `vectors` and the same row of `reference`."""
    vectors, reference = np.asarray(vectors, np.float64), np.asarray(reference, np.float64)
    norms = np.linalg.norm(vectors, axis=-1) * np.linalg.norm(reference, axis=-1)
    return float(np.min((vectors * reference).sum(-1) / norms))


class HuggingFaceEncoder:
    """The PyTorch peer: BertTokenizerFast + BertModel (in bfloat16 with `bfloat16`) + masked mean
    pooling."""

    def __init__(self, folder, max_seq_length, bfloat16=False):
        import torch
        import transformers

        from benchmarks.torch_peer import TorchSentenceEncoder, load_bert

        self.torch = torch
        self.tokenizer = transformers.BertTokenizerFast.from_pretrained(folder)
        self.model = TorchSentenceEncoder(load_bert(folder, bfloat16=bfloat16))
        self.max_seq_length = max_seq_length

    def embed_batch(self, texts, padding):
        inputs = self.tokenizer(texts, padding=padding, truncation=True, max_length=self.max_seq_length,
                                return_tensors="pt", return_token_type_ids=False)
        return self.model(inputs["input_ids"], inputs["attention_mask"]).numpy()

    def encode(self, texts, batch_size, fast):
        from dialoguecse_tf.encoder.sentence import encode_in_batches

        padding = "longest" if fast else "max_length"
        return encode_in_batches(texts, lambda batch: self.embed_batch(batch, padding), 0, batch_size,
                                 sort_by_length=fast)


def main(argv):
    del argv
    precisions = common.precisions(FLAGS.precision)
    bfloat16 = "bfloat16" in precisions
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder, export_savedmodel

    folder = FLAGS.hf_folder or common.default_hf_folder()
    texts = load_texts(FLAGS.texts_file, FLAGS.num_sentences)
    loaded = load_checkpoint(folder, max_seq_length=FLAGS.max_seq_length)
    ours = {
        "padded": SentenceEncoder(loaded.backbone, loaded.tokenizer, trim_padding=False),
        "fast": SentenceEncoder(loaded.backbone, loaded.tokenizer),
        "fast+xla": SentenceEncoder(loaded.backbone, loaded.tokenizer, jit_compile=True),
    }
    export_dir = tempfile.mkdtemp(prefix="encode-bench-")
    # Scratch: each call's SavedModel would otherwise stay behind in the temporary folder.
    atexit.register(shutil.rmtree, export_dir, ignore_errors=True)
    saved = ExportedEncoder(export_savedmodel(ours["fast"], export_dir))
    peer = HuggingFaceEncoder(folder, FLAGS.max_seq_length)
    batch = FLAGS.batch_size

    candidates = {
        "tf encode() padded": lambda: ours["padded"].encode(texts, batch, sort_by_length=False),
        "torch padded": lambda: peer.encode(texts, batch, fast=False),
        "tf encode() fast": lambda: ours["fast"].encode(texts, batch),
        "tf encode() fast+xla": lambda: ours["fast+xla"].encode(texts, batch),
        "tf SavedModel fast": lambda: saved.encode(texts, batch),
        "torch fast": lambda: peer.encode(texts, batch, fast=True),
    }
    peers = {"tf encode() padded": "torch padded", "tf encode() fast": "torch fast",
             "tf encode() fast+xla": "torch fast", "tf SavedModel fast": "torch fast"}
    # A bfloat16 encode()'s other yardsticks: (the bfloat16 peer, its own float32 path).
    bfloat16_peers = {}
    if bfloat16:
        ours_bfloat16 = {regime: SentenceEncoder(loaded.backbone, loaded.tokenizer, trim_padding=regime == "fast",
                                                 precision="bfloat16") for regime in ("padded", "fast")}
        peer_bfloat16 = HuggingFaceEncoder(folder, FLAGS.max_seq_length, bfloat16=True)
        candidates.update({
            "tf encode() padded bfloat16": lambda: ours_bfloat16["padded"].encode(texts, batch, sort_by_length=False),
            "torch padded bfloat16": lambda: peer_bfloat16.encode(texts, batch, fast=False),
            "tf encode() fast bfloat16": lambda: ours_bfloat16["fast"].encode(texts, batch),
            "torch fast bfloat16": lambda: peer_bfloat16.encode(texts, batch, fast=True),
        })
        for regime in ("padded", "fast"):
            peers[f"tf encode() {regime} bfloat16"] = f"torch {regime}"
            bfloat16_peers[f"tf encode() {regime} bfloat16"] = (f"torch {regime} bfloat16", f"tf encode() {regime}")

    our_ids = loaded.tokenizer(texts)["token_ids"].numpy()
    hf_ids = peer.tokenizer(texts, padding="max_length", truncation=True, max_length=FLAGS.max_seq_length)["input_ids"]
    id_mismatches = int(sum(list(a) != list(b) for a, b in zip(our_ids, hf_ids)))
    reference = candidates["torch padded"]()
    vectors = {name: run() for name, run in candidates.items()}
    differences = {name: common.max_abs_diff(value, reference) for name, value in vectors.items()}
    worst = max(value for name, value in differences.items() if not name.endswith("bfloat16"))
    print(f"tokenization: {id_mismatches} of {len(texts)} sentences tokenized differently; "
          f"max abs diff of the float32 vectors: {worst:.2e}")
    if worst >= FLAGS.max_abs_diff:
        raise SystemExit(f"error: the two sides disagree (max abs diff {worst:.2e} >= {FLAGS.max_abs_diff}); not timing")
    cosines = {name: min_cosine(value, reference) for name, value in vectors.items() if name.endswith("bfloat16")}
    if bfloat16:
        print(f"bfloat16: smallest cosine to the float32 peer's vectors: {cosines}")
        if min(cosines.values()) < FLAGS.min_cosine_bfloat16:
            raise SystemExit(f"error: a bfloat16 candidate's vectors are too far from float32's (smallest cosine "
                             f"{min(cosines.values()):.6f} < --min_cosine_bfloat16={FLAGS.min_cosine_bfloat16}); "
                             "not timing")

    times = common.time_alternating(candidates, FLAGS.repeats, warmup=0)
    rows, results = [], {}
    for name, seconds in times.items():
        summary = common.summarize(seconds)
        summary["sentences_per_s"] = len(texts) / summary["median_s"]
        results[name] = summary
    for name, summary in results.items():
        peer_name = peers.get(name)
        ratio = summary["sentences_per_s"] / results[peer_name]["sentences_per_s"] if peer_name else None
        summary["ratio_to_torch"] = ratio
        rows.append([name, summary["sentences_per_s"], summary["min_s"], summary["max_s"],
                     f"{ratio:.2f}x" if ratio else "-", f"{differences[name]:.1e}"])
        if bfloat16:
            if name in bfloat16_peers:
                bfloat16_peer, own_float32 = bfloat16_peers[name]
                summary["ratio_to_torch_bfloat16"] = (summary["sentences_per_s"]
                                                      / results[bfloat16_peer]["sentences_per_s"])
                summary["ratio_to_tf_float32"] = summary["sentences_per_s"] / results[own_float32]["sentences_per_s"]
            rows[-1] += [f"{cosines[name]:.6f}" if name in cosines else "-",
                         *(f"{summary[key]:.2f}x" if key in summary else "-"
                           for key in ("ratio_to_torch_bfloat16", "ratio_to_tf_float32"))]
    header = ["candidate", "sentences/s", "min s", "max s", "vs torch", "max|diff|"]
    if bfloat16:
        header += ["min cosine", "vs torch bf16", "vs tf fp32"]
    common.print_table(
        f"Encoding throughput: {len(texts)} sentences, batch {batch}, max_seq_length {FLAGS.max_seq_length}, "
        f"median of {FLAGS.repeats}", header, rows,
    )
    settings = {"hf_folder": folder, "num_sentences": len(texts), "batch_size": batch,
                "max_seq_length": FLAGS.max_seq_length, "repeats": FLAGS.repeats,
                "texts_file": FLAGS.texts_file or "demo corpus (seed 7)", "precision": list(precisions)}
    if bfloat16:
        settings["min_cosine_bfloat16"] = FLAGS.min_cosine_bfloat16
    common.write_results(common.results_path(FLAGS.output_json, "encode_throughput", precisions), {
        "benchmark": "encode_throughput",
        "settings": settings,
        "token_id_mismatches": id_mismatches,
        "max_abs_diff": differences,
        **({"min_cosine_bfloat16": cosines, "bfloat16": BFLOAT16_KEYS} if bfloat16 else {}),
        "results": results,
        "peak_rss_mib": common.peak_rss_mib(),
    })


if __name__ == "__main__":
    app.run(main)
