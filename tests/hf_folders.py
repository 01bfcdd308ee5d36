"""HuggingFace BERT folders written from Google-named arrays (numpy_bert.random_bert_weights), for
the tests that load a HuggingFace checkpoint: the loader's own and the stages started from one."""

import json
import shutil

import numpy as np


def write_hf_folder(folder, weights, config, vocab_file, prefix="", hf_act="gelu"):
    """Writes a HuggingFace BERT folder: torch Linear layout ([out, in]) and HF names."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"{prefix}embeddings.position_ids": np.arange(config.max_position_embeddings)[None]}
    for name, value in weights.items():
        hf = name.replace("bert/", "", 1).replace("layer_", "layer/").replace("/", ".")
        if hf.endswith(".kernel"):
            hf, value = hf[: -len("kernel")] + "weight", value.T
        elif "LayerNorm" in hf:
            hf = hf.replace(".gamma", ".weight").replace(".beta", ".bias")
        elif name.startswith("bert/embeddings/"):
            hf += ".weight"
        tensors[prefix + hf] = np.ascontiguousarray(value)
    save_file(tensors, str(folder / "model.safetensors"))
    hf_config = {**config.to_dict(), "hidden_act": hf_act, "model_type": "bert"}
    (folder / "config.json").write_text(json.dumps(hf_config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    shutil.copy(vocab_file, folder / "vocab.txt")
    return folder
