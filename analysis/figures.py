"""Figures in the style of the paper's, PNG and PDF. A cell that did not run or did not
succeed is marked on the figure where its bar would be, never silently left out."""
import matplotlib

matplotlib.use("Agg")  # no display on nodes, CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import registry  # noqa: E402

from . import claims  # noqa: E402
from .tidy import PHASES  # noqa: E402

SYSTEM_ORDER = registry.ordered(registry.systems())
COLOURS = {name: entry["colour"] for name, entry in registry.systems().items()}
# Colours that mean something other than a system-mode never take a system-mode's colour
# (registry/systems.yml): blue is mxnet-sync in every figure, never "forward" in another.
PHASE_COLOURS = {"startup": "#b07aa1", "loading": "#59a14f", "forward": "#76b7b2",
                 "backward": "#9c755f", "communication": "#bab0ac"}
ROLE_COLOURS = {"worker": "#59a14f", "chief": "#b07aa1", "ps": "#9c755f", "server": "#9c755f",
                "scheduler": "#76b7b2"}
MEASURED, PAPER, BAND, BOUND = "#1b1b1b", "#b07aa1", "#bab0ac", "#76b7b2"
# the run's caveats (smoke, shared cores, indicative), stamped on every figure saved
STAMP = {"text": ""}


def stamp(text):
    """Every figure saved after this carries `text` at its foot, as the report's words do."""
    STAMP["text"] = text
# the paper's figure numbers for the per-benchmark breakdowns
BREAKDOWN_FIGURES = {"lenet5-cifar10": "fig4", "alexnet-cifar10": "fig6",
                     "resnet18-cifar10": "fig8a", "resnet18-cifar100": "fig8b",
                     "resnet50-cifar10": "fig9a", "resnet50-cifar100": "fig9b"}


def ordered_systems(systems):
    present = set(systems)
    return [s for s in SYSTEM_ORDER if s in present] + sorted(present - set(SYSTEM_ORDER))


def save(fig, out_stem):
    if STAMP["text"]:
        fig.text(0.995, 0.005, STAMP["text"], ha="right", va="bottom", fontsize=6,
                 color="crimson")
    paths = [str(out_stem) + ".png", str(out_stem) + ".pdf"]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths


def finish(fig, ax, out_stem, title, ylabel, legend=7, outside=False):
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    if outside:  # beside the axes: bars of every height stay visible
        ax.legend(fontsize=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=legend)
    fig.tight_layout()
    return save(fig, out_stem)


def mark_missing(ax, x, state):
    ax.annotate(state, (x, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                ha="center", va="bottom", fontsize=7, color="crimson")


def execution_time(groups, out_stem, planned_systems=None):
    """Fig. 3: paper-scale execution time per benchmark (projected from the measured steps),
    one bar per system-mode, log y, the 95% interval as the error bar; start-up as a tick at
    its own height (parts do not stack on a log axis)."""
    benchmarks = list(dict.fromkeys(groups.benchmark))
    systems = ordered_systems(list(groups.system) + list(planned_systems or []))
    index = groups.set_index(["benchmark", "system"])
    width = min(0.3, 0.8 / max(1, len(systems)))
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(benchmarks) + 2) + 1.8, 3.6))
    for i, system in enumerate(systems):
        x = np.arange(len(benchmarks)) + (i - (len(systems) - 1) / 2.0) * width
        rows = [index.loc[(b, system)] if (b, system) in index.index else None
                for b in benchmarks]
        ok = [r is not None and r.succeeded for r in rows]
        heights = np.array([r.execution_seconds if k else np.nan for r, k in zip(rows, ok)])
        low = np.array([r.ci_low if k else np.nan for r, k in zip(rows, ok)])
        high = np.array([r.ci_high if k else np.nan for r, k in zip(rows, ok)])
        errors = np.nan_to_num(np.vstack([heights - low, high - heights]).clip(min=0))
        ax.bar(x, heights, width, yerr=errors, label=system, color=COLOURS.get(system),
               capsize=2)
        ax.plot(x, [r.startup if k else np.nan for r, k in zip(rows, ok)], ls="none",
                marker="_", ms=max(4.0, 200 * width), mew=1.5, color="black")
        for xi, row, height in zip(x, rows, heights):
            if not np.isfinite(height):
                mark_missing(ax, xi, "not run" if row is None else _state(row))
    ax.plot([], [], ls="none", marker="_", ms=10, mew=1.5, color="black",
            label="start-up (its own height)")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(benchmarks)))
    ax.set_xticklabels(benchmarks, rotation=15)
    return finish(fig, ax, out_stem, "Execution time projected to the paper's length "
                  "(cf. paper Fig. 3)",
                  "execution time (s, log scale)", legend=7, outside=True)


def _state(group):
    """Why a planned group has no bar: its status, or that its cells stayed disturbed."""
    if not group.succeeded and getattr(group, "disturbed", 0):
        return "disturbed, left out"
    return group.status


def breakdown(groups, benchmark, out_stem, planned_systems=None):
    """Figs. 4, 6, 8, 9: time per phase over the paper's run, stacked, per system-mode:
    start-up, then loading, forward, backward, communication (tidy._paper_totals); each
    bar's total is Fig. 3's bar."""
    here = groups[groups.benchmark == benchmark].set_index("system")
    systems = ordered_systems(list(here.index) + list(planned_systems or []))
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(systems) + 1.5) + 1.5, 3.4))
    x = np.arange(len(systems))
    bottom = np.zeros(len(systems))
    for phase in ["startup"] + PHASES:
        values = np.array([_phase(here, s, phase) for s in systems])
        ax.bar(x, np.nan_to_num(values), 0.6, bottom=bottom,
               label="start-up" if phase == "startup" else phase,
               color=PHASE_COLOURS[phase])
        bottom += np.clip(np.nan_to_num(values), 0, None)
    for xi, system in zip(x, systems):
        if system not in here.index:
            mark_missing(ax, xi, "not run")
        elif not here.loc[system].succeeded:
            mark_missing(ax, xi, _state(here.loc[system]))
    ax.set_xticks(x)
    ax.set_xticklabels(systems, rotation=20, fontsize=8)
    return finish(fig, ax, out_stem, "Breakdown of execution time, projected to the paper's length (%s)"
                  % benchmark, "time over the run (s)", outside=True)


def _phase(here, system, phase):
    if system not in here.index or not here.loc[system].succeeded:
        return np.nan
    return here.loc[system][phase + "_total"]


def memory_over_time(series, out_stem):
    """RSS over time, one panel per system-mode, one line per process coloured by role."""
    systems = ordered_systems(series.system.unique())
    fig, axes = plt.subplots(len(systems), 1, figsize=(6, 1.8 * len(systems) + 0.6),
                             sharex=False, squeeze=False)
    for ax, system in zip(axes[:, 0], systems):
        seen = set()
        for (cell, process), line in series[series.system == system].groupby(
                ["cell_id", "process"]):
            role = line.role.iloc[0]
            ax.plot(line.elapsed_s, line.rss_mb, lw=0.8, color=ROLE_COLOURS.get(role, "grey"),
                    label=None if role in seen else role)
            seen.add(role)
        ax.set_title(system, fontsize=8)
        ax.set_ylabel("RSS (MB)", fontsize=7)
        ax.legend(fontsize=6, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the process started")
    fig.tight_layout()
    return save(fig, out_stem)


def communication_bound(net, out_stem, rate_label="bandwidth bound"):
    """Measured communication time per step beside the bandwidth bound, per cell group, on a
    linear axis from zero: a log axis cut at the smaller bar made the bound look negligible.
    rate_label says at what rate, and whether that rate is assumed."""
    net = net.dropna(subset=["communication"])
    labels = ["%s\n%s" % (r.benchmark, r.system) for r in net.itertuples()]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(labels) + 1.5), 3.6))
    ax.bar(x - 0.2, net.communication, 0.4, label="measured communication", color=BAND)
    ax.bar(x + 0.2, net.bound_seconds, 0.4, label=rate_label, color=BOUND)
    ax.set_ylim(bottom=0)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, fontsize=6)
    return finish(fig, ax, out_stem, "Communication vs the bandwidth bound", "s per step")


def communication_vs_bandwidth(net, out_stem):
    """Beyond the paper: communication time per step against the link rate, per system-mode
    and benchmark (log-log)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (benchmark, system), rows in net.dropna(subset=["communication"]).groupby(
            ["benchmark", "system"]):
        rows = rows.sort_values("link_mbit")
        ax.plot(rows.link_mbit, rows.communication.clip(lower=1e-5), marker="o",
                color=COLOURS.get(system), label="%s %s" % (system, benchmark))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("link rate (Mbit/s)")
    return finish(fig, ax, out_stem, "Communication against bandwidth",
                  "communication (s per step)", legend=6)


def scaling(table, out_stem):
    """Speedup and scaling efficiency against node count, per system-mode (and benchmark)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.4))
    for (benchmark, system, link), rows in table.groupby(["benchmark", "system", "link"]):
        label = " ".join(x for x in (system, benchmark, link) if x)
        left.plot(rows.nodes, rows.speedup, marker="o", color=COLOURS.get(system), label=label)
        right.plot(rows.nodes, rows.efficiency, marker="o", color=COLOURS.get(system))
    top = int(table.nodes.max())
    left.plot([1, top], [1, top], ls=":", color="grey", label="linear")
    left.set_xlabel("nodes")
    left.set_ylabel("speedup over 1 node")
    right.set_xlabel("nodes")
    right.set_ylabel("scaling efficiency")
    right.set_ylim(0, 1.2)
    left.legend(fontsize=6)
    fig.suptitle("Scaling (throughput, local batch fixed)", fontsize=9)
    fig.tight_layout()
    return save(fig, out_stem)


def operator_profile(table, benchmarks, out_stem, title, planned_systems=None):
    """Figs. 5, 7, 10: time per step of each canonical operator category, one bar per
    system-mode, one panel per benchmark (compute categories; data and communication are in
    the report's table). A system-mode without a profile is marked, not dropped."""
    from .operators import NOT_COMPUTE
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(6.5 * len(benchmarks), 3.8),
                             squeeze=False)
    for ax, benchmark in zip(axes[0], benchmarks):
        here = table[(table.benchmark == benchmark) & ~table.category.isin(NOT_COMPUTE)]
        categories = sorted(here.category.unique()) or ["(no profile)"]
        systems = ordered_systems(list(here.system) + list(planned_systems or []))
        width = 0.8 / max(1, len(systems))
        x = np.arange(len(categories))
        for i, system in enumerate(systems):
            rows = here[here.system == system].set_index("category").seconds
            heights = [rows.get(c, 0.0) * 1e3 for c in categories]
            xs = x + (i - (len(systems) - 1) / 2.0) * width
            ax.bar(xs, heights, width, label=system, color=COLOURS.get(system))
            if rows.empty:
                mark_missing(ax, xs[0], "%s: no profile" % system)
        ax.set_xticks(x)
        ax.set_xticklabels(categories, rotation=35, ha="right", fontsize=7)
        ax.set_title(benchmark, fontsize=9)
        ax.set_ylabel("ms per step")
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return save(fig, out_stem)


def claims_forest(rows, out_stem, caveats=""):
    """The claims at a glance: per ratio claim, the measured ratio with its 95% interval, the
    paper's value (a diamond) and the tolerance band around it (shaded), on a log axis. A
    claim with no measurement is listed with its verdict (in its label), not dropped; order
    claims (no number in the paper) are left to the table."""
    import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)
    ratio = [r for r in rows if isinstance(r.get("paper"), (int, float))]
    fig, ax = plt.subplots(figsize=(11, 0.4 * len(ratio) + 1.4))
    for y, row in enumerate(reversed(ratio)):
        paper, tol = float(row["paper"]), float(row["tolerance"] or 0.0)
        ax.fill_betweenx([y - 0.3, y + 0.3], paper / (1 + tol), paper * (1 + tol),
                         color=BAND, alpha=0.45, lw=0)
        ax.plot([paper], [y], marker="D", color=PAPER, ms=4)
        measured = row.get("measured")
        if isinstance(measured, (int, float)) and measured == measured:
            low, high = row.get("low"), row.get("high")
            if low is not None and high is not None and low == low and high == high:
                ax.plot([low, high], [y, y], color=MEASURED, lw=2)
            ax.plot([measured], [y], marker="o", color=MEASURED, ms=4)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2))  # 0.5, 1, 2, 4, 8
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1.0, color="grey", lw=0.6, ls=":")
    ax.set_yticks(range(len(ratio)))
    ax.set_yticklabels(["%s [%s]" % (claims.label(r["id"]), r["verdict"])
                        for r in reversed(ratio)], fontsize=9)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_ylim(-0.7, len(ratio) - 0.3)
    ax.set_xlabel("ratio (log): measured, black, with its 95% interval; paper, purple diamond; "
                  "tolerance band, grey", fontsize=9)
    ax.set_title("The paper's claims%s" % (" (%s)" % caveats if caveats else ""), fontsize=10)
    fig.subplots_adjust(left=0.5, right=0.97, top=1 - 0.5 / fig.get_figheight(),
                        bottom=0.75 / fig.get_figheight())
    return save(fig, out_stem)


STACK_COLOURS = ("#4e79a7", "#e15759")  # the paper's releases, today's


def claims_forest_two(sides, labels, out_stem):
    """The claims under two stacks at a glance, legible at a reviewer's screen width: per ratio
    claim (labels: [(id, short words)], in the paper's order), the paper's value (a diamond)
    and tolerance band (shaded), and each stack's measured ratio with its 95% interval (sides:
    [(stack, {claim id: row})], the paper's releases first), the verdicts at the right."""
    import matplotlib.ticker  # noqa: F401 (matplotlib.ticker below)
    shown = [(cid, words) for cid, words in labels
             if isinstance((sides[0][1].get(cid) or {}).get("paper"), (int, float))]
    fig, ax = plt.subplots(figsize=(13, 0.42 * len(shown) + 1.6))
    for y, (cid, _) in enumerate(reversed(shown)):
        first = sides[0][1][cid]
        paper, tol = float(first["paper"]), float(first["tolerance"] or 0.0)
        ax.fill_betweenx([y - 0.38, y + 0.38], paper / (1 + tol), paper * (1 + tol),
                         color=BAND, alpha=0.45, lw=0)
        ax.plot([paper], [y], marker="D", color=PAPER, ms=6)
        for offset, (_, rows), colour in zip((0.16, -0.16), sides, STACK_COLOURS):
            row = rows.get(cid) or {}
            measured, low, high = row.get("measured"), row.get("low"), row.get("high")
            if not isinstance(measured, (int, float)) or measured != measured:
                continue
            if low is not None and high is not None and low == low and high == high:
                ax.plot([low, high], [y + offset] * 2, color=colour, lw=2.2)
            ax.plot([measured], [y + offset], marker="o", color=colour, ms=5)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.tick_params(axis="x", labelsize=10)
    ax.axvline(1.0, color="grey", lw=0.6, ls=":")
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([words for _, words in reversed(shown)], fontsize=10)
    right = ax.twinx()
    right.set_ylim(-0.7, len(shown) - 0.3)
    right.set_yticks(range(len(shown)))
    right.set_yticklabels([" | ".join((rows.get(cid) or {}).get("verdict", "-").split(" (")[0]
                                      for _, rows in sides) for cid, _ in reversed(shown)],
                          fontsize=9)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    handles = [plt.Line2D([], [], color=c, marker="o", lw=2.2, label=name)
               for (name, _), c in zip(sides, STACK_COLOURS)]
    handles += [plt.Line2D([], [], color=PAPER, marker="D", lw=0, label="the paper"),
                plt.Rectangle((0, 0), 1, 1, color=BAND, alpha=0.45, label="tolerance band")]
    ax.legend(handles=handles, fontsize=9, loc="upper center", ncol=4,
              bbox_to_anchor=(0.5, 1 + 0.55 / fig.get_figheight()), frameon=False)
    ax.set_xlabel("ratio (log scale); verdicts at the right: %s" % " | ".join(
        name for name, _ in sides), fontsize=10)
    fig.subplots_adjust(left=0.38, right=0.79, top=1 - 0.75 / fig.get_figheight(),
                        bottom=0.7 / fig.get_figheight())
    return save(fig, out_stem)
