"""One run -> results/<run-id>/analysis/: tables (CSV), the paper's figures (PNG, PDF), and
report.md + a self-contained report.html: what was run, every figure, the paper's claims with
verdicts, failed or missing cells and why. The report is SECTIONS in order, each from the
module of its topic (analysis/sections/)."""
from pathlib import Path

import pandas as pd

from contract import analysis_folder, ledger as ledger_schema, manifest as manifests, runfolder
from contract.runfolder import RunFolder

from . import explain, figures, ledger as ledgers, releases, render, setup_text, testbed, tidy
from . import variation
from .sections import (Context, checks, execution, operator_profiles, provenance, resources,
                       verdicts)

SECTIONS = (verdicts.section_first_screen, provenance.section,
            lambda ctx: setup_text.setup_section(ctx.bed), verdicts.section_method,
            execution.section, execution.section_breakdowns, execution.section_table_v,
            resources.section_memory, resources.section_network, resources.section_scaling,
            operator_profiles.section, checks.section_consistency, checks.section_failures,
            lambda ctx: ledgers.beside_blocks(ctx.summary.pop("ledger"),
                                              ctx.summary["claims"], ctx.manifest))


def build(run_path, quiet=False, out=None, ledger=None):
    """out: the folder to write into (default <run>/analysis); ledger: the ledger whose
    interval coverage the method's section quotes (default: the results folder's). A run of
    several stacks gets each stack's report in a folder of its own (analysis/<stack>/) and,
    on top, the report that sets them side by side (analysis/releases.py)."""
    run_path = Path(run_path)
    out = Path(out) if out else run_path / "analysis"
    out.mkdir(exist_ok=True)
    manifest = RunFolder(run_path).manifest()
    records = tidy.load_records(run_path / runfolder.RECORDS)
    names = manifests.stack_names(manifest)
    ledger = Path(ledger) if ledger else run_path.parent / ledger_schema.FILE
    if len(names) == 1:
        return build_stack(run_path, manifests.view(manifest, names[0]), records, out, quiet,
                           ledger)
    built = {name: build_stack(run_path, manifests.view(manifest, name),
                               records[records["stack"] == name], out / name, True, ledger)
             for name in names}
    return releases.build(run_path, manifest, records, built, out, quiet)


def build_stack(run_path, manifest, records, out, quiet=False, ledger=None):
    """The report of a run under one stack: manifest, that stack's view (contract/manifest.py
    view); records, its records; ledger: the ledger the method's coverage line and the
    last section read (default: the results folder's)."""
    ledger = Path(ledger) if ledger else Path(run_path).parent / ledger_schema.FILE
    out.mkdir(exist_ok=True)
    cells = tidy.cell_table(records)
    groups = tidy.group_table(cells, variation.newest(
        run_path, manifest.get("size"), variation.cpus_of(manifest),
        dict(zip(cells.benchmark, cells.steps_per_epoch))))
    records.to_csv(out / analysis_folder.RECORDS_TABLE, index=False)
    cells.to_csv(out / analysis_folder.CELLS_TABLE, index=False)
    groups.to_csv(out / analysis_folder.GROUPS_TABLE, index=False)
    summary = {"disturbed": checks.disturbed_note(cells, manifest.get("run_id")),
               "coverage": ledgers.coverage_text(ledger, ledgers.machine(manifest)[2]),
               "ledger": ledger}
    blocks, pngs = sections(run_path, out, manifest, records, cells, groups, summary)
    claims_table(summary.pop("claims")).to_csv(out / analysis_folder.CLAIMS_TABLE, index=False)
    (out / runfolder.REPORT).write_text(render.markdown(blocks))
    (out / runfolder.REPORT_HTML).write_text(render.to_html(blocks, "Reproduction report: run %s"
                                                    % manifest.get("run_id")))
    if not quiet:
        print("report:  %s\n         %s\nfigures: %s" % (out / runfolder.REPORT, out / runfolder.REPORT_HTML,
                                                        ", ".join(pngs)))
        if summary["disturbed"]:
            print("disturbed: %s" % summary["disturbed"])
    return dict(summary, report=out / runfolder.REPORT, html=out / runfolder.REPORT_HTML, figures=pngs,
                cells=cells, groups=groups)


CLAIM_COLUMNS = ("id", "kind", "section", "paper", "tolerance", "measured", "low", "high",
                 "verdict", "interval_verdict", "direction", "deviations")


def claims_table(rows):
    """The claims as the report judged them, one row each, for other tools (the ledger)."""
    return pd.DataFrame([{c: row.get(c) for c in CLAIM_COLUMNS} for row in rows],
                        columns=CLAIM_COLUMNS)


def sections(run_path, out, manifest, records, cells, groups, summary):
    """(the report's blocks, its figures' PNGs); summary: filled with what the console prints
    after the report's path (the layout, the setup's node and thread deviations, the verdicts'
    tally)."""
    ctx = context(run_path, out, manifest, records, cells, groups, summary)
    figures.stamp("")  # no caveat of an earlier report in this process
    blocks = [block for section in SECTIONS for block in section(ctx)]
    summary["layout"] = ctx.bed["layout"]
    summary["against_paper"] = [d["text"] for d in ctx.bed["deviations"]
                                if d["key"] in ("nodes", "threads", "shared_cores")]
    return blocks, ctx.pngs


def context(run_path, out, manifest, records, cells, groups, summary):
    """The Context every section reads (analysis/sections/__init__.py)."""
    bed = testbed.describe(manifest)
    ids = provenance.cell_ids(manifest)
    return Context(
        run_path=run_path, out=out, manifest=manifest, records=records, cells=cells,
        groups=groups, bed=bed, main=tidy.reference_groups(groups),  # the assumed link
        planned=sorted({c["system"] for c in manifest.get("cells", [])}), ids=ids,
        spent=provenance.minutes(provenance.cells_seconds(run_path, ids)),
        moved=explain.moves(run_path), summary=summary,
        operators=operator_profiles.operator_profile(records, cells, bed))
