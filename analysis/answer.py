"""The report's first screen: what was run in one line, the claims' tally, the deviations that
bear on most claims (named once, with what each is expected to do to the numbers), and what
would decide the inconclusive claims. The claims table then names, per row, only what sets
that claim apart from the common list."""
import re
from collections import Counter

from . import claims

# What each deviation of the setup is expected to do to the numbers: the package's
# expectation, not a measurement and not the paper's (docs/methodology.md has the evidence
# where there is some). One line each: the first screen lists them.
EFFECT = {
    "shared_cores": "nodes take CPU from each other: time claims not comparable",
    "sharing_unsure": "shared cores not ruled out: ratios may be skewed",
    "emulated_cpu": "emulated CPUs, 50-300x slower and uneven: time claims not comparable",
    "cpu": "other kernels at another speed: times differ, ratios move where one framework "
           "gains more",
    "threads": "compute slower than on the paper's 4 vCPUs (IV-A); frameworks that thread "
               "differently move apart",
    "nodes": "smaller global batch, fewer peers: communication and its ratios move",
    "memory": "none on time unless memory runs short",
    "versions": "kernels and communication changed since: any ratio may move",
    "python": "a little less overhead per step: small against compute",
    "tf_kernels": "oneDNN, not the paper's Eigen (V-E): that framework's compute likely faster "
                  "than the paper's, its gaps smaller",
    "kernels": "that framework's compute time moves",
    "placement": "a coordinator on node 1 takes a little CPU: that system-mode a little slower",
    "async_communication": "the coordinator's dispatch held in that system-mode's "
                           "communication: larger than a transfer",
    "link": "communication shorter than on any network: favours who communicates most",
    "data": "the same work per step: time unchanged",
    "page_cache": "loading shorter than from disk",
    "steps": "a short run reads a few percent off the long one (docs/methodology.md, "
             "\"The verdict size\")",
    "epochs": "input caching after epoch 1 unseen: a caching framework's loading reads "
              "high",
    "parameters": "5.1-8.0% fewer parameters to exchange than Table II's: communication a "
                  "little shorter",
}


def run_shape(manifest):
    """(benchmarks, system-modes, repeats, hosts) of a run, from its manifest."""
    cells = manifest.get("cells") or []
    return (sorted({c["benchmark"] for c in cells if c.get("benchmark")}),
            {c["system"] for c in cells if c.get("system")},
            1 + max([c.get("repeat") or 0 for c in cells] or [0]),
            (manifest.get("inventory") or {}).get("hosts") or [])


def run_line(manifest, bed, minutes):
    """One line: size, benchmarks, system-modes, repeats, nodes, stack, data, time."""
    benchmarks, systems, repeats, hosts = run_shape(manifest)
    threads = sorted({h.get("vcpus") for h in hosts if h.get("vcpus")})
    versions = ", ".join("%s %s" % (name, "/".join(v["run"]) or "-")
                         for name, v in sorted(bed["versions"].items()))
    return ("**What was run:** the %s size, %d system-mode(s) x %s, %d repeat(s), on %d "
            "%s node(s) of %s thread(s); %s (stack %s); %s data; the cells took %s." % (
                manifest.get("size"), len(systems), ", ".join(benchmarks) or "no benchmark",
                repeats, len(hosts), (manifest.get("inventory") or {}).get("name", "?"),
                "/".join(map(str, threads)) or "?", versions,
                (manifest.get("stack") or {}).get("name"), "/".join(bed["data"]) or "?",
                minutes))


def indicative(groups):
    """", indicative" where a cell has one usable repeat and its interval knows the steps of
    that run only (run-to-run variation measured neither in the run nor by an interval check):
    every verdict then says so, the operator claims' too."""
    if not len(groups):
        return ""
    return ", indicative" if (groups.interval[groups.succeeded > 0]
                              == "steps of one run").any() else ""


def tally(rows):
    """'3 reproduced, 5 inconclusive, 29 not measured' in a fixed order of the verdicts."""
    return _counted([r["verdict"] for r in rows], ["reproduced", "not reproduced",
                                                   "inconclusive", "partial", "not comparable",
                                                   "not measured"])


def directions(rows):
    """" Direction alone: 16 holds, 7 contradicted.": a claim not reproduced in size may still
    hold in direction (the table's direction column, counted)."""
    found = [r["direction"] for r in rows if r.get("direction")]
    return " Direction alone: %s." % _counted(found, ["holds", "contradicted", "unclear",
                                                      "not judged"]) if found else ""


def _counted(words, order):
    """'2 holds, 1 not judged': each word (its text before ' (') counted, in `order`, any
    other word last."""
    counts = Counter(w.split(" (")[0] for w in words)
    return ", ".join("%d %s" % (counts[w], w) for w in sorted(
        counts, key=lambda w: order.index(w) if w in order else len(order)))


def common_deviations(rows):
    """The deviations that bear on more than half of the claims, in the order first seen."""
    keys = [r["deviations"].split("; ") for r in rows if r["deviations"]]
    counts = Counter(k for found in keys for k in found)
    return [k for k in counts if counts[k] * 2 > len(rows)]


def apart(row, common):
    """What sets one claim's deviations apart from the common list: '+ placement',
    'not memory; cpu', or 'the common list'."""
    mine = row["deviations"].split("; ") if row["deviations"] else []
    extra = [k for k in mine if k not in common]
    missing = [k for k in common if k not in mine]
    parts = (["+ " + "; ".join(extra)] if extra else []) + \
        (["not " + "; ".join(missing)] if missing else [])
    return ", ".join(parts) or "the common list"


def deviation_items(common, bed):
    """Each common deviation once: what it is here, and what it is expected to do."""
    texts = {}
    for d in bed["deviations"]:
        texts.setdefault(d["key"], d["text"])
    return ["**%s** (%s): %s" % (key, _first_clause(texts.get(key, "")),
                                 EFFECT.get(key, "not stated"))
            for key in common]


def _first_clause(text):
    """The deviation's own words up to its first ' (', ';', ': ' or ', as': what differs, not
    its sources (the setup section gives each whole)."""
    cuts = [i for i in (text.find(sep) for sep in (" (", "; ", ": ", ", as ")) if i > 0]
    return text[:min(cuts or [len(text)])]


def decide_items(rows):
    """For the inconclusive claims: what would likely decide them, the claims grouped."""
    grouped = {}
    for r in rows:
        if r["verdict"].startswith("inconclusive"):
            grouped.setdefault(r.get("decide") or "no estimate of the repeats that would "
                               "decide it", []).append(claims.label(r["id"]))
    return ["%s: %s" % (how, ", ".join(ids)) for how, ids in sorted(grouped.items(), key=_fewest)]


def _fewest(item):
    """The groups in order of the repeats they need (those that name none last)."""
    found = re.search(r"about (\d+) repeats", item[0])
    return (int(found.group(1)) if found else 10 ** 6, item[0])


def blocks(rows, common, manifest, bed, minutes, forest, notes, operator_rows=()):
    """The first screen's blocks; common: common_deviations(rows), which the claims table
    uses too; forest: the claims figure's block (or none); notes: the evidence's one-line
    caveats (smoke, indicative); operator_rows: the paper's operator claims, judged in their
    own section and counted here apart."""
    apart = "; the operator claims (their own section): %s" % tally(operator_rows) \
        if operator_rows else ""
    out = [("p", run_line(manifest, bed, minutes)),
           ("p", "**Claims: %s%s.**%s%s" % (tally(rows), apart, directions(rows),
                                            "".join(" " + n for n in notes)))]
    side = []
    if common:
        side += [("p", "Deviations that bear on most claims, and what each is expected to do "
                       "(the package's expectation; each claim's row names only what differs "
                       "from this list, the setup section each whole):"),
                 ("list", deviation_items(common, bed))]
    decide = decide_items(list(rows) + list(operator_rows))
    if decide:
        side += [("p", "What would decide the inconclusive claims:"), ("list", decide)]
    out.append(("columns", [forest] if forest else [], side))  # side by side in report.html
    return out
