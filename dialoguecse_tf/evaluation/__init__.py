"""Evaluation of sentence embeddings on the paper's two tasks (section 5.1.2, Table 2).

* Semantic retrieval (SR, `select.txt`): each query ranks its candidates by cosine similarity;
  MAP and MRR over the queries.
* Dialogue STS (D-STS, `sts.txt`): Spearman correlation between the gold 1..5 scores and the
  cosine similarity of each pair.

All numbers are percentages, as in Table 2. Models (trained checkpoints and the baselines of
section 5.2.1) are plain `embed_fn(list[str]) -> np.ndarray` callables whose vectors come from
`SentenceEncoder.encode`; `runner.run_evaluation` ties files, models and results together.
"""
