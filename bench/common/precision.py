"""How well a worker knows its mean step, while it runs (the verdict size's stop rule).

The 95% interval of the mean by batch means: the steps in order, cut into BATCHES consecutive
batches; the batches' means are close to independent even when neighbouring steps are not (a
slow step on a shared machine is often followed by another), so t x their standard deviation /
sqrt(BATCHES) bounds the mean. Pure Python: it runs inside every trainer, Python 3.6 included.
The report's intervals come from the analysis's block bootstrap, not from this.
"""
import math

BATCHES = 10
T95 = 2.262  # Student's t, 97.5% quantile, BATCHES - 1 = 9 degrees of freedom


def relative_halfwidth(samples):
    """Half-width of the 95% interval of the mean / the mean; inf with too few samples."""
    n = len(samples)
    if n < 2 * BATCHES:
        return float("inf")
    size = n // BATCHES
    tail = samples[n - size * BATCHES:]  # whole batches, the latest steps
    means = [sum(tail[i * size:(i + 1) * size]) / float(size) for i in range(BATCHES)]
    mean = sum(means) / BATCHES
    if mean <= 0:
        return float("inf")
    var = sum((m - mean) ** 2 for m in means) / (BATCHES - 1)
    return T95 * math.sqrt(var / BATCHES) / mean
