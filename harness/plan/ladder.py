"""`invoke explain`'s plan: the settings it must measure to take a claim's gap apart.

A setting gives every chosen factor (registry/factors.yml) one level. The base is 2021's
software here (each factor at its `paper` level), the end today's (each at its `today` level).
Each rung changes one factor of one setting, so that its effect is the claim's ratio after
over before:
  - a factor on the path (paper level != today level) is moved from the base, one level at a
    time, the others kept at 2021's; where that cannot run (a cell fails), it is measured from
    the end instead (today's setting with the factor put back);
  - a what-if factor (the same level at both ends) is moved from the end.
The path's effects multiply to what the end measures only where factors do not interact: the
remainder, end / (base x the effects), is shown as the interaction (analysis/explain.py).
"""
import registry

from . import matrix
from contract.errors import UserError
from contract.explain_plan import Rung, Setting


def choose(names, inventory_name, vcpus, all_factors=None):
    """(chosen factors, {left-out factor: why}); names None: every factor that differs between
    2021's software and today's."""
    all_factors = all_factors or registry.factors()
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else \
        [n for n, f in all_factors.items()
         if str(f["paper"]) != str(f["today"]) and f.get("default", True)]
    unknown = [n for n in wanted if n not in all_factors]
    if unknown:
        raise UserError("unknown factor(s) %s" % ", ".join(unknown),
                        "factors are (registry/factors.yml): %s" % ", ".join(all_factors))
    stackers = [n for n in wanted if set(all_factors[n]["apply"]) & {"stack", "releases"}]
    if len(stackers) > 1:
        raise UserError("factors %s each choose the stack: one ladder can climb one of them"
                        % " and ".join(stackers), "name one of them in --factors")
    chosen, left = {}, {}
    for name in wanted:
        why = not_applicable(all_factors[name], inventory_name, vcpus)
        if why:
            left[name] = why
        else:
            chosen[name] = all_factors[name]
    return chosen, left


def not_applicable(factor, inventory_name, vcpus):
    needs = factor.get("needs") or {}
    if "inventory" in needs and needs["inventory"] != inventory_name:
        return "applies only on the %s inventory (this run: %s)" % (needs["inventory"],
                                                                  inventory_name)
    if "vcpus_above" in needs and min(vcpus) <= needs["vcpus_above"]:
        return ("the nodes have %d vCPU(s): its levels would run alike (needs more than %d)"
                % (min(vcpus), needs["vcpus_above"]))
    return ""


def ends(factors):
    base = Setting(tuple(sorted((n, str(f["paper"])) for n, f in factors.items())))
    end = Setting(tuple(sorted((n, str(f["today"])) for n, f in factors.items())))
    return base, end


def rungs(factors):
    """The rungs of the plan, path factors first (from the base), then what-ifs (from the
    end)."""
    base, end = ends(factors)
    out = []
    for name, factor in factors.items():
        levels = registry.level_values(factor)
        first, last = levels.index(str(factor["paper"])), levels.index(str(factor["today"]))
        if first == last:
            out += [Rung(name, end, end.moved(name, v), "what-if")
                    for v in levels if v != levels[first]]
            continue
        chain = levels[min(first, last):max(first, last) + 1]
        chain = chain if first < last else chain[::-1]  # from 2021's level to today's
        out += [Rung(name, base.moved(name, a), base.moved(name, b), "path")
                for a, b in zip(chain, chain[1:])]
    return out


def from_today(rung, end):
    """The same step of a path factor, measured from today's setting (`end`) instead."""
    return Rung(rung.factor, end.moved(rung.factor, rung.before.get(rung.factor)),
                end.moved(rung.factor, rung.after.get(rung.factor)), "from today")


def run_of(setting, factors, default_stack):
    """How a setting runs: (stack, framework -> "NAME=value;...", threads, link)."""
    stack, environment, threads, link = default_stack, {}, 0, ""
    for name, value in setting.levels:
        how = factors[name]["apply"]
        if how.get("stack"):
            stack = value
        elif how.get("releases"):
            stack = registry.release_stack(how["releases"], value)
        elif how.get("threads"):
            threads = 0 if value == "vcpus" else int(value)
        elif how.get("network"):
            link = value
        else:
            for framework in factors[name].get("frameworks") or registry.frameworks():
                pairs = [p for p in environment.get(framework, "").split(";") if p]
                environment[framework] = ";".join(sorted(pairs + ["%s=%s" % (
                    how["environment"], value)]))
    return stack, environment, threads, link


def cells(setting, factors, default_stack, size, nodes, benchmarks, systems, repeats):
    """(stack, the setting's cells: every benchmark x system-mode, every repeat)."""
    stack, environment, threads, link = run_of(setting, factors, default_stack)
    planned = matrix.plan(size, nodes, benchmarks=benchmarks, systems=systems,
                          repeats=repeats, networks=[link] if link else None,
                          environment=environment, threads=threads)
    return stack, planned


def known_failure(factors, setting, stack):
    """The factors file's note on a level known not to run on a stack ("" where none)."""
    for name, value in setting.levels:
        for known in factors[name].get("known") or []:
            if str(known["level"]) == value and known.get("stack") in (None, stack):
                return known["why"]
    return ""
