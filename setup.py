"""Installs the dialoguecse_tf library and its stage entry points."""

import setuptools

setuptools.setup(
    name="dialoguecse_tf",
    version="0.1.0",
    description=(
        "TensorFlow 2 / Keras reproduction of DialogueCSE (Liu et al., EMNLP 2021): "
        "dialogue-based contrastive learning of sentence embeddings."
    ),
    packages=setuptools.find_packages(include=["dialoguecse_tf", "dialoguecse_tf.*"]),
    # The demo corpus generator reads its templates from these at import.
    package_data={"dialoguecse_tf.data.demo": ["template_files/*.json"]},
    python_requires=">=3.10,<3.13",
    install_requires=[
        "tensorflow==2.20.0",
        "tensorflow-text==2.20.1",
        "tf-models-official==2.20.0",
        "keras==3.15.1",
        "keras-hub==0.32.0",
        "numpy",
        "scipy",
        "scikit-learn",
        "absl-py==1.4.0",
        "safetensors",
        "bm25s==0.3.16",
    ],
    entry_points={"console_scripts": ["dialoguecse-embed=dialoguecse_tf.cli.embed:run",
                                      "dialoguecse-experiment=dialoguecse_tf.cli.experiment:run"]},
    extras_require={
        # torch, transformers and sentence-transformers reload the HuggingFace export in its
        # tests (torch 2.13.0 is the CPU build this machine class keeps on disk).
        "test": ["pytest", "pytest-xdist==3.8.0", "matplotlib", "hypothesis", "torch==2.13.0", "transformers==5.23.0",
                 "sentence-transformers==6.2.0", "apache-beam==2.77.0"],
        "plot": ["matplotlib"],
        # Record building on Apache Beam (--engine=beam, docs/records_on_beam.md); it moves
        # protobuf to 6.33, which TensorFlow 2.20 reads.
        "beam": ["apache-beam==2.77.0"],
        # Only the benchmarks' PyTorch peer needs these (benchmarks/README.md).
        "bench": ["torch==2.13.0", "transformers==5.23.0"],
    },
)
