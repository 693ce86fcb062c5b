"""`invoke explain`: run the settings of the ladder (harness/plan/ladder.py), round by round,
then take each claim apart (analysis/explain.py).

Cells live in one run per stack, results/explain-runs/<stack>-<layout>/, which every explain
on the same inventory, node count and size shares: a cell measured by an earlier explain
(same id: same settings, the factor's variables included) is kept, not run again. Repeats are
interleaved: round k runs repeat k of every setting, stack after stack, so a drifting machine
hits every rung alike. A cell that fails in round 0 runs once more; a setting whose cell
fails twice is not run again: its rungs are "not measurable here" with the cells' error, and a
path factor is measured from today's setting instead.
"""
import hashlib
import os
import time
from pathlib import Path

from . import commands
from contract.errors import UserError
from .nodes import access, inventory, stacks
from .plan import ladder
from .results import run_manifest
from contract import runfolder
from contract.explain_plan import PLAN
from contract.runfolder import CellStatus, RunFolder
from .run import hooks, preflight

DEFAULT_BENCHMARKS = "lenet5-cifar10,resnet18-cifar10"


def chosen_claims(claim_ids, benchmarks):
    """The ratio claims to take apart: the headline and operator claims (or those named) with
    a benchmark among `benchmarks`; -> [(claim, its benchmarks here)]."""
    from analysis import claims
    reference = claims.load_reference()
    pool = reference.get("headline", []) + reference.get("operators", [])
    wanted = [c.strip() for c in claim_ids.split(",") if c.strip()] if claim_ids else None
    known = {c["id"] for c in pool}
    if wanted and set(wanted) - known:
        raise UserError("unknown or not a ratio claim: %s" % ", ".join(sorted(set(wanted) - known)),
                        "ratio claims are: %s" % ", ".join(sorted(known)))
    out = []
    for claim in pool:
        if wanted and claim["id"] not in wanted:
            continue
        here = [b for b in claim.get("benchmarks", claims.PAPER_BENCHMARKS) if b in benchmarks]
        if here:
            out.append((claim, here))
    if not out:
        raise UserError("no chosen claim is about %s" % ", ".join(benchmarks),
                        "choose --benchmarks among the claims' (or --claims about them)")
    return out


class Plan:
    def __init__(self, inv, default_stack, size, benchmarks, claim_ids, factor_names,
                 repeats):
        self.inv, self.size, self.repeats = inv, size, repeats
        self.default_stack = default_stack
        self.benchmarks = [b.strip() for b in benchmarks.split(",") if b.strip()]
        self.claims = chosen_claims(claim_ids, self.benchmarks)
        from analysis import claims
        self.systems = sorted({s for c, _ in self.claims for k in ("numerator", "denominator")
                               for s in claims.sides(c[k])})
        self.factors, self.left_out = ladder.choose(factor_names, inv.name,
                                                    [h.vcpus for h in inv.hosts])
        if not self.factors:
            raise UserError("no factor can be applied here: %s" % "; ".join(
                "%s %s" % kv for kv in self.left_out.items()),
                "choose --factors among registry/factors.yml's that apply to this inventory")
        self.base, self.end = ladder.ends(self.factors)
        self.rungs = ladder.rungs(self.factors)
        self.not_measurable = {}  # setting key -> why

    def settings(self):
        seen = {}
        for setting in [self.base, self.end] + [s for r in self.rungs for s in (r.before,
                                                                               r.after)]:
            seen.setdefault(setting.key, setting)
        return list(seen.values())

    def cells_of(self, setting):
        """(stack, cells) of a setting: the claims' benchmarks x system-modes, every repeat."""
        benchmarks = sorted({b for _, bs in self.claims for b in bs})
        return ladder.cells(setting, self.factors, self.default_stack, self.size,
                            len(self.inv.hosts), benchmarks, self.systems, self.repeats)

    def by_stack(self):
        """stack -> cells (each once), in the order of the settings."""
        out = {}
        for setting in self.settings():
            stack, cells = self.cells_of(setting)
            known = out.setdefault(stack, {})
            for cell in cells:
                known.setdefault(cell.id, cell)
        return {stack: list(cells.values()) for stack, cells in out.items()}

    def run_id(self, stack):
        layout = "%s|%d|%s" % (self.inv.name, len(self.inv.hosts), self.size)
        return "%s-%s" % (stack, hashlib.sha1(layout.encode()).hexdigest()[:6])


def run(options):
    """`invoke explain`; options: harness/plan/options.py ExplainOptions."""
    inventory_name, results, repeats = options.inventory, options.results, options.repeats
    inv = inventory.load(inventory_name)
    plan = Plan(inv, options.stack, options.size, options.benchmarks or DEFAULT_BENCHMARKS,
                options.claims, options.factors, repeats)
    runs = Path(results) / "explain-runs"
    print_plan(plan)
    check_stacks(plan, inv)
    started, todo = time.time(), unmeasured(plan, runs, range(repeats))
    for round_ in range(repeats):
        run_round(plan, inventory_name, runs, round_)
        if round_ == 0:
            fall_back(plan, inventory_name, runs)
        print_eta(time.time() - started, todo - unmeasured(plan, runs, range(repeats)),
                  unmeasured(plan, runs, range(round_ + 1, repeats)), round_, repeats)
    from analysis import explain as analysis
    out = Path(results) / ("explain-%s" % run_manifest.new_run_id())
    write_plan(plan, runs, out)
    return analysis.build(out)


def write_plan(plan, runs, out):
    """What the analysis needs of the plan, as a file in the explain folder (contract/explain_plan.py
    PLAN): `invoke analyze --run explain-<id>` rebuilds the result from it and the runs."""
    settings = []
    for setting in plan.settings():
        stack, cells = plan.cells_of(setting)
        settings.append({"levels": setting.levels, "stack": stack, "run": plan.run_id(stack),
                         "cells": [{"id": c.id, "framework": c.framework} for c in cells]})
    out.mkdir(parents=True, exist_ok=True)
    runfolder.write_json(out / PLAN, {
        "inventory": plan.inv.name, "size": plan.size, "repeats": plan.repeats,
        "runs": os.path.relpath(str(runs), str(out)), "factors": plan.factors,
        "left_out": plan.left_out, "not_measurable": plan.not_measurable,
        "claims": plan.claims, "base": plan.base.levels, "end": plan.end.levels,
        "rungs": [r.data() for r in plan.rungs], "settings": settings})


def unmeasured(plan, runs, rounds):
    """How many cells of these rounds are still pending (a cell an earlier explain measured
    costs nothing: the ETA counts only what is left to run)."""
    rounds, count = set(rounds), 0
    for stack, cells in plan.by_stack().items():
        folder = RunFolder(runs / plan.run_id(stack))
        count += sum(1 for c in cells if c.repeat in rounds and (
            not folder.exists() or folder.status(c.id)["status"] == "pending"))
    return count


def print_eta(spent, ran, left, round_, repeats):
    each = spent / ran if ran else 0.0
    print("explain: round %d/%d done after %.0f s (%d cell(s) run, %.0f s each); %d cell(s) "
          "left, ETA %.0f s" % (round_ + 1, repeats, spent, ran, each, left, each * left),
          flush=True)


def print_plan(plan):
    print("explain: %d claim(s) on %s; system-modes %s" % (
        len(plan.claims), ", ".join(plan.benchmarks), ", ".join(plan.systems)))
    for name, why in plan.left_out.items():
        print("  factor %s left out: %s" % (name, why))
    for rung in plan.rungs:
        print("  rung %-40s (%s)" % (rung.name, rung.side))
    stacks = plan.by_stack()
    print("  %d cell(s) in %d run(s) (%s), %d repeat(s) interleaved" % (
        sum(len(c) for c in stacks.values()), len(stacks), ", ".join(stacks), plan.repeats),
        flush=True)


def check_stacks(plan, inv):
    """Every stack the ladder needs is provisioned on every node before any cell runs: a
    release ladder needs one stack per release (`invoke provision --stack <each>`)."""
    nodes = access.connect_all(inv)
    for stack, cells in plan.by_stack().items():
        try:
            preflight.check(nodes, stacks.load(stack), cells, inv)
        except UserError as error:
            raise UserError("stack %s is not ready for the ladder: %s" % (stack, error.cause),
                            "invoke provision --inventory %s --stack %s --size %s, then "
                            "invoke explain again (what ran is kept)" % (inv.name, stack,
                                                                         plan.size))


class Round(hooks.GivenCells):
    """The run's hook (harness/run/hooks.py): a stack's run has the ladder's cells (planned
    here, in the order of the settings), and round k runs repeat k of each alone."""

    def __init__(self, round_, cells=None):
        super().__init__(cells)
        self.round = round_

    def after(self, stage, run, value, cell=None):
        value = super().after(stage, run, value, cell)
        if stage != "plan":
            return value
        return value._replace(todo=[c for c in value.todo if c.repeat == self.round])


def run_round(plan, inventory_name, runs, round_):
    for stack, cells in plan.by_stack().items():
        path = runs / plan.run_id(stack)
        if RunFolder(path).exists():
            add_cells(path, cells)
            commands.bench_named(inventory_name, stack, plan.size, str(runs),
                                 run=path.name, repeats=None, hooks=[Round(round_)])
        else:
            links = sorted({c.link for c in cells if c.link})
            commands.bench_named(inventory_name, stack, plan.size, str(runs), run=path.name,
                                 network=",".join(links) or None, hooks=[Round(round_, cells)])


def add_cells(path, cells):
    """Cells an earlier explain did not plan join the shared run, pending."""
    folder = RunFolder(path)
    manifest = folder.manifest()
    known = {c["id"] for c in manifest.get("cells", [])}
    new = [c for c in cells if c.id not in known]
    if not new:
        return
    manifest["cells"] += [dict(c.settings, id=c.id, config_hash=c.config_hash, link_mbit=None)
                          for c in new]
    folder.write_manifest(manifest)
    for cell in new:
        folder.save_status(CellStatus(cell.id), time.time())


def fall_back(plan, inventory_name, runs):
    """After round 0: a failed cell runs once more (a flake passes, a setting that cannot run
    here fails again); a setting with a cell failed twice is not measurable here, and a path
    rung that needs one is measured from today's setting instead (its round 0 runs at once)."""
    for stack, cells in plan.by_stack().items():
        path = runs / plan.run_id(stack)
        first = [c for c in cells if c.repeat == 0 and not RunFolder(path).attempts(c.id)]
        if failures(path, first):  # each failed cell is retried once, not at every explain
            commands.bench_named(inventory_name, stack, plan.size, str(runs), run=path.name,
                                 repeats=None, retry_failed=True, hooks=[Round(0)])
    for setting in plan.settings():
        stack, cells = plan.cells_of(setting)
        failed = failures(runs / plan.run_id(stack), [c for c in cells if c.repeat == 0])
        if failed:
            known = ladder.known_failure(plan.factors, setting, stack)
            plan.not_measurable[setting.key] = "; ".join(failed) + (
                " (known: %s)" % known if known else "")
    redo = []
    for rung in list(plan.rungs):
        if rung.side == "path" and (rung.before.key in plan.not_measurable
                                    or rung.after.key in plan.not_measurable):
            other = ladder.from_today(rung, plan.end)
            plan.rungs.append(other)
            redo.append(other)
            print("explain: %s cannot run from 2021's setting (%s); measured from today's "
                  "instead" % (rung.name, plan.not_measurable.get(rung.after.key)
                               or plan.not_measurable.get(rung.before.key)), flush=True)
    skip_later_rounds(plan, runs)
    if redo:
        run_round(plan, inventory_name, runs, 0)


def failures(path, cells):
    folder = RunFolder(path)
    out = []
    for cell in cells:
        status = folder.status(cell.id)
        if status["status"] == "failed":
            out.append("%s: %s" % (cell.id, status["reason"] or "failed"))
    return out


def skip_later_rounds(plan, runs):
    """A setting that failed in round 0 is not run again: its later cells (those no measurable
    setting shares) are marked failed with the reason, so that nothing is skipped silently."""
    needed = set()  # (stack, cell id): cells of two stacks may have one id
    for s in plan.settings():
        if s.key not in plan.not_measurable:
            stack, cells = plan.cells_of(s)
            needed |= {(stack, c.id) for c in cells}
    for key, why in plan.not_measurable.items():
        setting = next(s for s in plan.settings() if s.key == key)
        stack, cells = plan.cells_of(setting)
        folder = RunFolder(runs / plan.run_id(stack))
        for cell in cells:
            if cell.repeat > 0 and (stack, cell.id) not in needed \
                    and folder.status(cell.id)["status"] == "pending":
                folder.save_status(CellStatus(cell.id, status="failed", reason=(
                    "not run: its setting failed in round 0 (%s)" % why)[:500]), time.time())
