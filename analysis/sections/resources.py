"""Memory (section V-G), the network against its bandwidth bound, and scaling beyond the
paper."""
from contract import analysis_folder

from .. import figures, memory, network, render, tidy


def memory_section(run_path, out, records, cells, figure):
    series = memory.load_series(run_path, cells)
    blocks = [("h2", "Memory (cf. paper section V-G)")]
    if not series.empty:
        blocks.append(("img", figure(figures.memory_over_time(series, out / "memory_rss")),
                       "RSS over time per system-mode and role"))
    peaks = memory.peak_table(records)
    peaks.to_csv(out / analysis_folder.MEMORY_TABLE, index=False)
    blocks.append(("table", ["system", "role", "peak RSS MB (with its loader processes)",
                             "own peak RSS MB (the memory claims' measure)"],
                   [[r.system, r.role, render.number(r.peak_rss_mb, "%.0f"),
                     render.number(r.peak_own_rss_mb, "%.0f")] for r in peaks.itertuples()]))
    return blocks


def network_section(out, groups, records, cells, manifest, figure):
    net = network.table(groups, records, cells, manifest)
    net.to_csv(out / analysis_folder.NETWORK_TABLE, index=False)
    blocks = [("h2", "Network: bytes per step and the bandwidth bound"),
              ("p", network.rate_sentence(cells, manifest) + " Bound: the fewest bytes a node "
                    "must send per step, from where the roles are placed: ring all-reduce "
                    "2(n-1)/n x model; parameter servers 2(n-1)/n x model too, as the share "
                    "held by the server on a worker's own node never crosses the network "
                    "(analysis/network.py). Sent bytes below it are flagged in the consistency "
                    "checks. Efficiency = bound / measured communication. Where the coordinator "
                    "times the steps (registry `timed_by`), the bytes are node 1's, the "
                    "coordinator's node. On the local cluster every node "
                    "shares `lo`: bytes sent are the whole cluster's.")]
    if net.communication.notna().any():
        blocks.append(("img", figure(figures.communication_bound(
            net, out / "network_bound", network.bound_label(cells, manifest))),
                       "Communication vs the bandwidth bound"))
    if net.link_mbit.nunique() > 1:
        blocks.append(("img", figure(figures.communication_vs_bandwidth(
            net, out / "network_bandwidth")), "Communication time against link bandwidth"))
    blocks.append(("table", ["benchmark", "system", "Mbit/s", "model MB", "sent MB/step/node",
                             "bound MB/step", "bound s/step", "communication s/step",
                             "efficiency"],
                   [[r.benchmark, r.system, render.number(r.link_mbit, "%g"), render.number(r.model_mb, "%.2f"),
                     render.number(r.bytes_sent_per_step_mb, "%.2f"), render.number(r.bound_mb_per_step, "%.2f"),
                     render.number(r.bound_seconds, "%.4f"), render.number(r.communication, "%.4f"),
                     render.number(r.efficiency, "%.2f")] for r in net.itertuples()]))
    return blocks


def scaling_section(out, groups, figure):
    if groups.nodes.nunique() < 2:
        return []
    table = tidy.scaling_table(groups)
    table.to_csv(out / analysis_folder.SCALING_TABLE, index=False)
    blocks = [("h2", "Scaling (beyond the paper)"),
              ("p", "Each cell on the first k nodes, local batch %d (the global batch grows "
                    "with k). Throughput = k x %d / step time; speedup over one node; "
                    "efficiency = speedup / k." % ((tidy.PAPER["local_batch"],) * 2))]
    if table.speedup.notna().any():
        blocks.append(("img", figure(figures.scaling(table, out / "scaling")),
                       "Speedup and scaling efficiency"))
    blocks.append(("table", ["benchmark", "system", "links", "nodes", "images/s", "speedup",
                             "efficiency", "note"],
                   [[r.benchmark, r.system, r.link or "-", r.nodes, render.number(r.images_per_s, "%.1f"),
                     render.number(r.speedup, "%.2f"), render.number(r.efficiency, "%.2f"), r.note or "-"]
                    for r in table.itertuples()]))
    return blocks



def section_memory(ctx):
    return memory_section(ctx.run_path, ctx.out, ctx.records, ctx.cells, ctx.figure)


def section_network(ctx):
    return network_section(ctx.out, ctx.groups, ctx.records, ctx.cells, ctx.manifest,
                           ctx.figure)


def section_scaling(ctx):
    return scaling_section(ctx.out, ctx.groups, ctx.figure)
