"""Intervals for the verdicts (docs/methodology.md, "Intervals and verdicts"): a moving-block
bootstrap over each cell's measured steps; over repeats, a confidence interval of a setting's
expected time from the run-to-run variation pooled over the cells of a benchmark (what a claim
is about), and a Student t prediction of one more run (what `invoke interval-check` checks
against single full-length runs).

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


def over_repeats(replicate_rows, rng, points=None, one_more=True):
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
    linear scale. one_more=False: the interval of the repeats' mean instead (sqrt(1/k) for
    sqrt(1 + 1/k)), for a quantity without a pool to share (communication)."""
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
    draws = centre + spread * math.sqrt((1 if one_more else 0) + 1.0 / k) * t
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


def t_quantile(df, p=1 - (1 - LEVEL) / 2):
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher
    expansion in 1/df (Abramowitz and Stegun 26.7.5: 3.179 for 3 against 3.182, 2.776
    for 4; within 1e-3 from 5 on)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z = float(np.sqrt(2) * _erfinv(2 * p - 1))
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z)
            / (92160 * df ** 4))


def _erfinv(y):
    """Inverse error function by Newton's method on math.erf (no scipy on the controller)."""
    x = 0.0
    for _ in range(60):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


# A paired (blocked) pool needs this many residual degrees of freedom: with 2 system-modes
# and 3 blocks it would have 2 where the one-way model has 4 (fixed before any data).
PAIRED_LEAST_DF = 4


def expected_time(values, key, blocks=None, replicates=REPLICATES, within=None):
    """Confidence intervals of the expected time of each setting of one pool (the cells of one
    benchmark in one run), as replicates: ({setting: replicate array}, model).

    values: {setting: [its repeats' times]}; blocks: {setting: [each repeat's block]} where the
    repeats ran as randomized complete blocks, else None. On the log scale (times are positive
    and vary by a factor): y = log time.
    - one-way: y_gr = mu_g + e_gr, e ~ N(0, s^2) with one s^2 for the pool, pooled over its
      settings with df = sum(k_g - 1). Replicates: mean_g + s sqrt(df / X) Z_g / sqrt(k_g), X ~
      chi^2(df) drawn once per replicate for the whole pool (one estimate of s), Z_g ~ N(0, 1)
      per setting: the log ratio of two settings is then exactly mean difference + t(df) x s
      sqrt(1/k_a + 1/k_b), and a setting with one repeat still gets the pool's s.
    - paired (given blocks that are complete and leave >= PAIRED_LEAST_DF; the report does
      not pair: `invoke interval-check` measured it not to help, and shows it): y_gr = mu_g +
      b_r + e_gr (two-way, additive). The block effect b (the machine's drift between blocks) is
      shared by every setting: replicates add s_b sqrt(df_b / X_b) Z / sqrt(R), Z and X_b
      drawn once per replicate for the pool, so a ratio of two settings cancels it and is
      t(df_e) with df_e = (G - 1)(R - 1); a setting's own interval keeps it.
    s is never less than `within`, the typical spread of one run's own steps (the log sd of a
    repeat's bootstrap replicates): repeats that agree by chance do not make a setting known
    better than its steps allow. Centred on the log of the arithmetic mean (the table's value;
    it exceeds the geometric mean by about s^2/2). None for a pool without any degree of
    freedom."""
    values = {g: np.asarray(v, dtype=float) for g, v in values.items() if len(v)}
    rng = rng_for(key)
    paired = _complete_blocks({g: np.log(v) for g, v in values.items()}, blocks)
    model = _paired_model(paired) if paired else _one_way_model(values)
    if model is None:
        return None, None
    if within and within > model["s"]:
        model = dict(model, s=float(within), floor=True)
    chi = rng.chisquare(model["df"], size=replicates)
    shared = rng.standard_normal(replicates)
    chi_b = rng.chisquare(model["df_b"], size=replicates) if model["df_b"] else None
    out = {}
    for g in sorted(values):
        k = len(values[g])
        draws = model["s"] * np.sqrt(model["df"] / chi) * rng.standard_normal(replicates) / \
            math.sqrt(k)
        if chi_b is not None:
            draws = draws + model["s_b"] * np.sqrt(model["df_b"] / chi_b) * shared / math.sqrt(k)
        out[g] = np.exp(math.log(values[g].mean()) + draws)
    return out, model


def _complete_blocks(logs, blocks):
    """The pool as a settings x blocks matrix of logs, or None where it is not one (no
    blocks, a missing or repeated cell, or too few degrees of freedom for pairing)."""
    if not blocks or len(logs) < 2:
        return None
    names = sorted(logs)
    seen = [list(blocks.get(g, [])) for g in names]
    if any(len(b) != len(set(b)) or sorted(b) != sorted(seen[0]) for b in seen):
        return None
    rows = [dict(zip(b, logs[g])) for g, b in zip(names, seen)]
    order = sorted(seen[0])
    if (len(names) - 1) * (len(order) - 1) < PAIRED_LEAST_DF:
        return None
    return {"names": names, "y": np.array([[r[b] for b in order] for r in rows])}


def pooled_sd(samples):
    """{s, df}: the pooled standard deviation of the logs of each sample (a setting's repeats)
    about its own mean, df = sum(k - 1); s None where no sample has two values."""
    logs = [np.log(np.asarray(v, dtype=float)) for v in samples]
    df = sum(len(x) - 1 for x in logs if len(x))
    if not df:
        return {"s": None, "df": 0}
    ss = sum(float(np.sum((x - x.mean()) ** 2)) for x in logs if len(x))
    return {"s": math.sqrt(ss / df), "df": df}


def _one_way_model(values):
    found = pooled_sd(values.values())
    return dict(found, model="one-way", s_b=0.0, df_b=0) if found["df"] else None


def _paired_model(paired):
    y = paired["y"]
    settings, blocks = y.shape
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    df = (settings - 1) * (blocks - 1)
    s2 = float(np.sum(resid ** 2)) / df
    ms_blocks = settings * float(np.sum((y.mean(0) - y.mean()) ** 2)) / (blocks - 1)
    return {"model": "paired", "s": math.sqrt(s2), "df": df,
            "s_b": math.sqrt(max(0.0, (ms_blocks - s2) / settings)), "df_b": blocks - 1}


def single_run(value, key, s, df, replicates=REPLICATES):
    """One run's value with run-to-run variation measured elsewhere (an earlier interval check's
    s of log time with df): value x exp(s t(df)), as replicates."""
    rng = rng_for(key)
    t = np.clip(rng.standard_t(df, size=replicates), -100, 100)
    return np.exp(math.log(value) + s * t)


def repeats_to_decide(low, high, value, edges, k, df, most=50):
    """How many repeats of each cell would likely put an interval (low, high) around `value`
    wholly inside or outside the band `edges` (lo, hi), the spread staying as measured: the
    log half-width shrinks as t(df') / sqrt(k') (df' grown with the repeats). None: more than
    `most`, or the value on an edge."""
    if not (low > 0 and high > 0 and value > 0) or k < 1:
        return None
    half = (math.log(high) - math.log(low)) / 2
    room = min(abs(math.log(value) - math.log(e)) for e in edges)
    if room <= 0:
        return None
    base = t_quantile(df) if df else 1.96
    for more in range(k + 1, most + 1):
        grown = df * (more - 1) / float(k - 1) if df and k > 1 else df
        if half * (t_quantile(grown) if grown else 1.96) / base * math.sqrt(
                k / float(more)) < room:
            return more
    return None
