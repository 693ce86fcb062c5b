"""Intervals for the verdicts: a moving-block bootstrap over each cell's measured steps, and,
over repeats, a Student t prediction of one more run (docs/methodology.md, "Intervals and
verdicts").

Every estimate is carried as an array of REPLICATES values, seeded from the cell id, so a
ratio of two estimates, or a mean over benchmarks, is computed replicate by replicate and its
interval read from the result's percentiles: the same report every time it is built.
"""
import math
import zlib

import numpy as np

REPLICATES = 1000
LEVEL = 0.95


def rng_for(key):
    """A generator seeded from a stable key (a cell id): reproducible intervals."""
    return np.random.default_rng(zlib.crc32(str(key).encode()))


def block_length(n):
    """Blocks of about n^(1/3) steps keep the correlation between neighbouring steps (a slow
    step is often followed by a slow one on a shared machine) inside the resampled blocks."""
    return max(1, int(round(n ** (1.0 / 3))))


def bootstrap_means(samples, rng, replicates=REPLICATES):
    """REPLICATES means of moving-block resamples of `samples` (same length as samples)."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return np.full(replicates, np.nan)
    if n == 1:
        return np.full(replicates, x[0])
    length = block_length(n)
    blocks = int(math.ceil(n / float(length)))
    starts = rng.integers(0, n - length + 1, size=(replicates, blocks))
    index = (starts[:, :, None] + np.arange(length)).reshape(replicates, -1)[:, :n]
    return x[index].mean(axis=1)


def over_repeats(replicate_rows, rng, points=None):
    """What one more run of a measurement would show, from its k repeats (their replicate
    rows, and their values: points, default the rows' means).

    One repeat: its own replicates, which know only the variation between its steps (the
    report calls such verdicts indicative). k >= 2: a Student-t prediction of one more run, on
    the log scale where every value is positive: log(mean) + s x sqrt(1 + 1/k) x T, T drawn
    from t(k - 1), s the standard deviation of the repeats' logs, and never less than the
    typical spread of one repeat's own replicates. Why not a bootstrap over the repeats: with
    3 repeats it has 10 distinct means and (k-1)/k of their spread, far from 95% coverage of
    what a rerun shows (docs/methodology.md, "Intervals and verdicts"). A repeat without a
    value is left out; values not all positive (a communication residual) are taken on the
    linear scale."""
    rows = np.asarray(replicate_rows, dtype=float)
    if rows.ndim == 1:
        rows = rows[None, :]
    points = np.asarray(points if points is not None else np.nanmean(rows, axis=1), dtype=float)
    known = np.isfinite(points)  # a repeat without a value says nothing of the spread
    if known.any() and not known.all():
        rows, points = rows[known], points[known]
    k, replicates = rows.shape
    if k == 1:
        return rows[0]
    logs = np.all(points > 0)
    values = np.log(points) if logs else points
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.nanstd(np.log(rows) if logs else rows, axis=1)
    spread = max(float(np.std(values, ddof=1)), float(np.nanmedian(within)) if np.isfinite(
        within).any() else 0.0)
    centre = math.log(points.mean()) if logs else points.mean()
    # t(1) (two repeats) is Cauchy: its far tail would overflow exp; clipping it at 100 moves
    # no percentile an interval reads (its 97.5% point is 12.7)
    t = np.clip(rng.standard_t(k - 1, size=replicates), -100, 100)
    draws = centre + spread * math.sqrt(1 + 1.0 / k) * t
    return np.exp(draws) if logs else draws


def interval(replicates):
    """(low, high): the percentile interval at LEVEL; (nan, nan) without finite replicates."""
    x = np.asarray(replicates, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return (math.nan, math.nan)
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(x, [tail, 100 - tail])
    return (float(low), float(high))


def constant(value, replicates=REPLICATES):
    return np.full(replicates, float(value) if value is not None else np.nan)
