"""Figures in the style of the paper's, PNG and PDF."""
import matplotlib

matplotlib.use("Agg")  # no display on nodes, CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

SYSTEM_ORDER = ["tensorflow-sync", "tensorflow-async", "pytorch-sync", "mxnet-sync", "mxnet-async"]
COLOURS = {"tensorflow-sync": "#f28e2b", "tensorflow-async": "#ffbe7d",
           "pytorch-sync": "#e15759", "mxnet-sync": "#4e79a7", "mxnet-async": "#a0cbe8"}


def execution_time(cells, out_stem):
    """Fig. 3: execution time per benchmark, one bar per system-mode, log y. A cell that did
    not succeed is marked on the figure where its bar would be, never silently left out."""
    benchmarks = list(dict.fromkeys(cells.benchmark))
    systems = [s for s in SYSTEM_ORDER if s in set(cells.system)] + \
        sorted(set(cells.system) - set(SYSTEM_ORDER))
    means = cells.groupby(["benchmark", "system"]).execution_seconds.mean()
    states = cells.groupby(["benchmark", "system"]).status.agg(lambda s: ",".join(sorted(set(s))))
    width = min(0.3, 0.8 / max(1, len(systems)))
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(benchmarks) + 2), 3.6))
    for i, system in enumerate(systems):
        x = np.arange(len(benchmarks)) + (i - (len(systems) - 1) / 2.0) * width
        heights = [means.get((b, system), np.nan) for b in benchmarks]
        ax.bar(x, heights, width, label=system, color=COLOURS.get(system))
        for xi, bench, height in zip(x, benchmarks, heights):
            state = states.get((bench, system), "not run")
            if state != "succeeded" or not np.isfinite(height):
                ax.annotate(state, (xi, 0.02), xycoords=("data", "axes fraction"),
                            rotation=90, ha="center", va="bottom", fontsize=7, color="crimson")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(benchmarks)))
    ax.set_xticklabels(benchmarks, rotation=15)
    ax.set_ylabel("execution time (s, log scale)")
    ax.set_title("Execution time per benchmark (cf. paper Fig. 3)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths = [str(out_stem) + ".png", str(out_stem) + ".pdf"]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths
