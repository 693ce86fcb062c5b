"""What `invoke explain` leaves in its folder: explain.json (copied into a run's folder by
`invoke explain --run`, where the main report reads "what moves it" from it), explain.md and
claims.csv. KEYS names every object's keys in explain.json; the writer (analysis/explain.py)
checks its result against them before it writes, and every reader on reading, so that a key
renamed on one side fails at once and says which, instead of a report that quietly lacks it."""
import json

from . import runfolder
from .errors import UserError

FILE = runfolder.EXPLAIN
MARKDOWN = "explain.md"
CLAIMS_TABLE = "claims.csv"  # one row per claim: its keys less effects and ladders

KEYS = {
    # the whole result: a claim row per claim explained; the system-modes' time effects of
    # each rung; each factor's level read back from every process; the factors left out and
    # why; the base and end settings in words; the run folder of each stack
    "result": ("claims", "system_effects", "levels", "left_out", "not_measurable", "base",
               "end", "runs"),
    "claim": ("id", "paper", "base", "end", "base_low", "base_high", "end_low", "end_high",
              "effects", "product", "interaction", "interaction_low", "interaction_high",
              "sentence", "ladders", "text", "base_verdict", "end_verdict", "comparable"),
    "effect": ("factor", "rung", "side", "value", "low", "high", "why"),
    "system_effect": ("rung", "benchmark", "system", "value", "low", "high"),
    "level": ("setting", "factor", "cell", "process", "planned", "recorded", "ok"),
    "ladder": ("text", "levels", "most"),
    "ladder_level": ("level", "name", "value", "low", "high"),
    "most": ("rung", "value", "low", "high"),
}
NULLABLE = ("most",)  # a ladder none of whose steps could be measured has no largest one
# where each kind of object sits: (kind, the parent's kind, the parent's key, how it holds
# them: a list, a dict by name, or one)
NESTED = (("claim", "result", "claims", list),
          ("system_effect", "result", "system_effects", list),
          ("level", "result", "levels", list), ("effect", "claim", "effects", list),
          ("ladder", "claim", "ladders", dict), ("ladder_level", "ladder", "levels", list),
          ("most", "ladder", "most", None))


def differences(result):
    """Each object of `result` whose keys are not KEYS's for its kind, as sentences; []."""
    found = []
    _compare("result", result, "explain.json", found)
    return found


def _compare(kind, obj, where, found):
    if obj is None and kind in NULLABLE:
        return
    if not isinstance(obj, dict):
        found.append("%s is not an object" % where)
        return
    extra = sorted(set(obj) - set(KEYS[kind]))
    missing = sorted(set(KEYS[kind]) - set(obj))
    if extra or missing:
        found.append("%s (%s): %s" % (where, kind, "; ".join(
            part for part in ("keys the contract does not name: %s" % ", ".join(extra)
                              if extra else "", "missing: %s" % ", ".join(missing)
                              if missing else "") if part)))
    for child, parent, key, shape in NESTED:
        if parent == kind and key in obj:
            value = obj[key]
            items = (enumerate(value) if shape is list and isinstance(value, list) else
                     sorted(value.items()) if shape is dict and isinstance(value, dict) else
                     [(None, value)])
            for name, item in items:
                _compare(child, item, "%s %s%s" % (where, key, "" if name is None else
                                                   "[%s]" % name), found)


def checked(result):
    """The result, once its keys are the contract's; else ValueError naming each object
    that differs (a writer's bug: the contract and the writer changed apart)."""
    wrong = differences(result)
    if wrong:
        raise ValueError("explain.json does not follow contract/explain_result.py:\n  "
                         + "\n  ".join(wrong))
    return result


def read(path):
    """explain.json at `path`, checked; one whose keys differ (written by another version of
    the package) is a UserError naming each difference."""
    result = json.loads(open(str(path)).read())
    wrong = differences(result)
    if wrong:
        raise UserError("%s does not follow this version's explain.json:\n  %s"
                        % (path, "\n  ".join(wrong)),
                        "run the same `invoke explain --run ...` again with this version, or "
                        "move %s out of the run's folder" % path)
    return result
