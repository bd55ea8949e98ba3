"""Kernel bandwidth scales: how far a query lies from its nearest prompt token.

The Gaussian-kernel heads of the classifier and of the supervised denoiser
try bandwidths as multiples of this scale.
"""

import torch


def nearest_neighbour_scale(features, prompt_features, exclude, chunk=512):
    """Median distance of the queries to their nearest prompt token (not their own).

    Positive distances only (duplicates would make it 0); the features'
    root-mean-square norm where every neighbour is a duplicate.
    """
    nearest = []
    for start in range(0, len(features), chunk):
        distances = torch.cdist(features[start : start + chunk], prompt_features)
        rows = torch.arange(len(distances), device=distances.device)
        own = exclude[start : start + chunk]
        mine = own >= 0
        distances[rows[mine], own[mine]] = torch.inf
        distances[distances == 0] = torch.inf
        nearest.append(distances.min(dim=1).values)
    nearest = torch.cat(nearest)
    nearest = nearest[torch.isfinite(nearest)]
    if len(nearest) == 0:
        return float(prompt_features.square().sum(dim=1).mean().sqrt()) or 1.0
    return float(nearest.median())
