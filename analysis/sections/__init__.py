"""The report's sections, each from the module of its topic, each a function of one Context
that returns its blocks (analysis/render.py). analysis/report.py lists them in order:

    verdicts.section_first_screen   the answer, the claims' figure and table
    provenance.section              what was run
    setup_text.setup_section        the setup beside the paper's
    verdicts.section_method         how the claims are judged
    execution.section               execution time (Fig. 3) and the loading note
    execution.section_breakdowns    Figs. 4, 6, 8, 9
    execution.section_table_v       Table V
    resources.section_memory        memory (V-G)
    resources.section_network      bytes per step against the bandwidth bound
    resources.section_scaling       scaling, where the run has several node counts
    operator_profiles.section       Figs. 5, 7, 10 and the operator claims
    checks.section_consistency      internal consistency
    checks.section_failures         failed, warned and disturbed cells

A section may leave on the context what a later one reads (the method's blocks, the operator
table)."""
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Context:
    """What every section reads: the run's folder and the report's, the manifest (one
    stack's view), its records, cells and groups (analysis/tidy.py), the setup (testbed),
    the groups at the reference link (`main`), the system-modes planned, the cells' ids,
    the time they took, the claims an explain result moves, the operator profile
    (sections/operator_profiles.py operator_profile), and the console's summary."""
    run_path: Path
    out: Path
    manifest: dict
    records: object
    cells: object
    groups: object
    bed: dict
    main: object
    planned: list
    ids: set
    spent: str
    moved: dict
    operators: tuple
    summary: dict
    pngs: list = field(default_factory=list)
    method: list = field(default_factory=list)
    operator_table: object = None

    def figure(self, paths):
        """A figure written (its PNG and PDF paths): the PNG, kept for the console."""
        self.pngs.append(paths[0])
        return paths[0]
