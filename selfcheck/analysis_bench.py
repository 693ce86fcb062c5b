"""`invoke analysis-bench`: how long the analysis of a paper-sized run takes (goal < 30 s).

The fixture: 30 cells (6 benchmarks x 5 system-modes) x `repeats` x 3 nodes, each process
with 3,950 measured steps and a 1 Hz memory log of `hours` hours; analysed by the same code as `invoke analyze`."""
import tempfile
import time

import numpy as np

from analysis import report
from analysis.claims import PAPER_BENCHMARKS
from analysis.figures import SYSTEM_ORDER
from contract import nodefolder, paper
from selfcheck import known_run

GOAL_SECONDS = 30.0


def paper_sized(path, repeats, hours):
    """Every process with the paper's measured steps (all but the warm-up: the bootstrap's
    input)."""
    rng = np.random.default_rng(0)
    measured = paper.STEPS - 10
    cells = [known_run.cell(b, s, 1000.0 + 10 * r + i, repeat=r,
                            samples=(1000.0 / paper.STEPS) * rng.uniform(0.9, 1.1, measured))
             for r in range(repeats) for i, b in enumerate(PAPER_BENCHMARKS)
             for s in SYSTEM_ORDER]
    return known_run.write_run(path, cells, memory_rows=int(hours * 3600))


def run(repeats=3, hours=1.0):
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        path = paper_sized(tmp, repeats, hours)
        built_in = time.perf_counter() - started
        files = list(path.glob("*/*/*/" + nodefolder.MEMORY))
        rows = sum(1 for f in files for _ in open(f)) - len(files)
        started = time.perf_counter()
        built = report.build(path, quiet=True)
        seconds = time.perf_counter() - started
    print("fixture: %d cells, %d memory logs, %d memory rows (%.1f h at 1 Hz each), written "
          "in %.1f s" % (len(built["cells"]), len(files), rows, hours, built_in))
    print("analysis: %.1f s for %d figures and report.md/.html (goal < %.0f s: %s)"
          % (seconds, len(built["figures"]), GOAL_SECONDS,
             "ok" if seconds < GOAL_SECONDS else "OVER"))
    return seconds
