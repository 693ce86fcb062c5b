"""The report's checks of itself (internal consistency) and the cells that failed, warned or
stayed disturbed."""
from contract import analysis_folder

from .. import consistency, network, render


def consistency_section(out, records, groups, table, manifest, net=None):
    checks = consistency.run_all(records, groups, table, manifest, net)
    checks.to_csv(out / analysis_folder.CONSISTENCY_TABLE, index=False)
    can_fail = checks[checks.not_applicable == ""]
    failed = can_fail[~can_fail.ok]
    reasons = sorted(set(checks.not_applicable) - {""})
    blocks = [("h2", "Internal consistency"),
              ("p", "Checked in every analysis: Fig. 3 against the breakdown's sum; the steady "
                    "wall step against the phase timers' step (for a coordinator: against a "
                    "worker's closure); profiled forward and backward "
                    "operator time against the calibrated forward and backward, per system-mode; "
                    "each operator table per worker (a worker's compute operators cannot take "
                    "longer than its profiled step); the bytes each node sent per step against "
                    "the fewest the placement of the roles allows; where the roles ran as Slurm "
                    "job steps with accounting, Slurm's MaxRSS of each step against the "
                    "sampler's peak. %d of the %d checks that can fail on this setup pass%s."
                    % (len(can_fail) - len(failed), len(can_fail), "; %d more shown but not "
                       "counted, as they cannot fail here (%s)" % (
                           len(checks) - len(can_fail), "; ".join(reasons)) if reasons else ""))]
    if len(failed):
        blocks.append(("p", "**Warning**: %d check(s) failed; the figures are below. Where "
                            "nodes share cores, profiled steps run beside the other workers "
                            "and servers while the calibration runs alone: the profiled "
                            "operator times are inflated by that contention." % len(failed)))
    return blocks + [("table", ["check", "benchmark", "system", "value", "against", "ratio",
                                "accepted", "result"],
                      [[r.check, r.benchmark, r.system, "%.4g" % r.value, "%.4g" % r.against,
                        render.number(r.ratio, "%.3f"), r.accepted, "not counted" if r.not_applicable
                        else "ok" if r.ok else "WARNING"]
                       for r in checks.itertuples()])]


def failures_section(cells, disturbed_text):
    failed = cells[cells.status != "succeeded"]
    items = ["`%s`: %s%s" % (r.cell_id, r.status, " (%s)" % r.reason if r.reason else "")
             for r in failed.itertuples()]
    blocks = [("h2", "Failed or missing cells"),
              ("list", items) if items else ("p", "None: every planned cell succeeded.")]
    warned = cells[cells.warning.fillna("") != ""] if "warning" in cells else cells.iloc[0:0]
    if not warned.empty:
        blocks += [("p", "Cells that succeeded with a warning (a part missing, a second "
                         "attempt):"),
                   ("list", ["`%s`: %s" % (r.cell_id, r.warning) for r in warned.itertuples()])]
    disturbed = cells[cells.disturbed.fillna("") != ""] if "disturbed" in cells \
        else cells.iloc[0:0]
    if not disturbed.empty:
        blocks += [("p", "Cells disturbed in both attempts, shown but left out of the "
                         "verdicts:"),
                   ("list", ["`%s`: %s" % (r.cell_id, r.disturbed)
                             for r in disturbed.itertuples()]),
                   ("p", "What to do: " + disturbed_text.split(": ", 1)[1])]
    return blocks


def disturbed_note(cells, run_id):
    """"" or what the console and the report say when cells stayed disturbed: how many, the
    worst figure, and what to do (the claims that need them are "not measured")."""
    if "disturbed" not in cells:
        return ""
    hit = cells[cells.disturbed.fillna("") != ""]
    if hit.empty:
        return ""
    return ("%d cell(s) disturbed in both attempts and left out of the claims (other "
            "programs took up to %s and steal up to %s of a node's CPUs; the bound, 5%%, is on "
            "the two together, after 0.15 CPU-s of other programs' time a process): stop "
            "what else runs on the nodes, then `invoke bench --run %s --retry-failed`, "
            "`invoke collect --run %s` and `invoke analyze --run %s`" % (
                len(hit), _worst(hit, "others_cpu"), _worst(hit, "steal"), run_id, run_id,
                run_id))


def _worst(cells, column):
    """The largest share in `column` as "31%", or "?" where no cell has it."""
    worst = cells[column].max() if column in cells else None
    return "%.0f%%" % (100 * worst) if worst is not None and worst == worst else "?"



def section_consistency(ctx):
    return consistency_section(ctx.out, ctx.records, ctx.groups, ctx.operator_table,
                               ctx.manifest, network.table(ctx.groups, ctx.records, ctx.cells,
                                                           ctx.manifest))


def section_failures(ctx):
    return failures_section(ctx.cells, ctx.summary["disturbed"])
