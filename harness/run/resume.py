"""`invoke bench --run ID` on a run that exists: run what is unfinished, keep what was measured.

Unfinished: pending cells, cells left `running` by a controller that died, and cells failed by
an interrupt. `--retry-failed` adds the other failed cells, `--force` every cell. An earlier
attempt of a cell that runs again is moved to `.attempts/`, never overwritten.
"""
from collections import Counter
from dataclasses import fields

from ..results import run_manifest
from . import launch
from contract.errors import UserError
from ..plan.matrix import Cell
from contract.runfolder import RunFolder


def plan(path, options):
    """(every cell of the run, the cells to run now); options: BenchOptions, whose
    cell-choosing ones a resumed run refuses (its cells come from its manifest)."""
    run_manifest.check_format(path)
    options.refuse_choosing(path.name)
    retry_failed, force = options.retry_failed, options.force
    run = RunFolder(path)
    cells = [cell_from(settings) for settings in run.manifest().get("cells", [])]
    todo, kept, disturbed = [], Counter(), 0
    for cell in cells:
        status = run.status(cell.id)
        if should_run(status, retry_failed, force):
            todo.append(cell)
        else:
            kept[status["status"]] += 1
            disturbed += bool(status.get("disturbed"))
    print("resuming run %s: %d cell(s) to run; kept: %s%s"
          % (path.name, len(todo), ", ".join("%d %s" % (n, s) for s, n in sorted(kept.items()))
             or "none", "" if retry_failed or force or not (kept["failed"] or disturbed)
             else " (--retry-failed reruns the failed and the disturbed ones)"), flush=True)
    return cells, todo


def should_run(status, retry_failed, force):
    state = status.get("status", "pending")
    if force or state in ("pending", "running"):
        return True
    if state == "failed":
        return retry_failed or status.get("reason") == "interrupted"
    # disturbed in both attempts: left out of the verdicts, so run again like a failed one
    return bool(retry_failed and status.get("disturbed"))


def cell_from(settings):
    names = {f.name for f in fields(Cell)}
    cell = Cell(**{k: v for k, v in settings.items() if k in names})
    if cell.id != settings.get("id"):
        raise UserError("the manifest's cell %s does not match this version's cell ids"
                        % settings.get("id"), "resume it with the version that started it "
                        "(manifest.json names the commit), or start a new run")
    return cell


def prepare(path, cells, nodes):
    """Before running cells again: stop what a dead controller left running (by recorded pid),
    move each earlier attempt aside, mark the cells pending."""
    by_name = {node.name: node for node in nodes}
    run = RunFolder(path)
    for cell in cells:
        launch.kill_recorded(run.status(cell.id).get("processes") or [], by_name)
        run.set_aside(cell.id)
