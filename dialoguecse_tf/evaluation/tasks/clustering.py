"""Domain categorisation (dial2vec, section 4.2; its `metrics.py` l.585-611): k-means with k =
the number of labels on the dialogue embeddings, repeated max(3, 10 - N // 500) times and
averaged; purity (the share of dialogues in their cluster's majority label), NMI and ARI.
The release leaves k-means unseeded; repeat r here uses random_state r, k-means++ and 10
initialisations, max_iter 500, tol 1e-5."""

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.dialogue_base import DialogueEvaluator


def purity(clusters, labels) -> float:
    labels = np.asarray(labels)
    majority = sum(np.unique(labels[clusters == c], return_counts=True)[1].max() for c in np.unique(clusters))
    return float(majority / len(labels))


def clustering_scores(vectors, labels, repeats: int | None = None) -> dict:
    """{"purity", "nmi", "ari"} in percent, averaged over `repeats` seeded k-means runs."""
    labels = np.asarray(labels)
    repeats = repeats or max(3, 10 - len(labels) // 500)
    k = len(np.unique(labels))
    scores = {"purity": [], "nmi": [], "ari": []}
    for seed in range(repeats):
        clusters = KMeans(n_clusters=k, n_init=10, max_iter=500, tol=1e-5, random_state=seed).fit_predict(
            np.asarray(vectors, np.float64))
        scores["purity"].append(purity(clusters, labels))
        scores["nmi"].append(normalized_mutual_info_score(labels, clusters))
        scores["ari"].append(adjusted_rand_score(labels, clusters))
    return {key: 100.0 * float(np.mean(values)) for key, values in scores.items()}


@register_task
class ClusteringEvaluator(DialogueEvaluator):
    name = "clustering"
    task = "clustering"
    label = "Clustering"
    description = "k-means of the dialogue embeddings into as many clusters as labels (purity, NMI, ARI)"
    metrics = (("purity", "Purity"), ("nmi", "NMI"), ("ari", "ARI"))
    primary_metric = "purity"

    def __call__(self, encode_dialogues) -> dict:
        return clustering_scores(self.vectors(encode_dialogues), self.data.labels)
