"""The run's setup beside the paper's, as report blocks: the report of a run and the
explanation of a claim both open with it."""
from . import render, testbed


def setup_section(bed):
    """The run's setup beside the paper's (testbed.describe)."""
    paper = bed["paper"]
    accelerator = (bed.get("vm") or {}).get("accelerator")
    machines = [[", ".join(m["nodes"]), m["logical_cpus"] or "?", m["physical_cores"] or "?",
                 m["threads"], "pinned" if m["pinned"] else "-", shared_cell(m),
                 m["memory_mb"] or "?"] + ([ACCELERATORS.get(accelerator, accelerator)]
                                           if accelerator else [])
                for m in bed["machines"]]
    versions = ["%s: %s (paper %s)" % (k, "/".join(v["run"]) or "not provisioned", v["paper"])
                for k, v in sorted(bed["versions"].items())]
    plans = bed["steps"]["run"]
    steps = ", ".join(("%d-%d epochs x %d = up to %d" % (s["epochs"], s["max_epochs"],
                                                          s["steps_per_epoch"], s["steps"])
                       if s["adaptive"] else "%d epoch(s) x %d = %d" % (
                           s["epochs"], s["steps_per_epoch"], s["steps"]))
                      + (" (%s)" % ", ".join(s["networks"]) if len(plans) > 1 else "")
                      for s in plans) or "?"
    facts = ["nodes: %d (paper %d VMs, %d vCPUs and %d MB each, the package's reading of "
             "its 16 GB)"
             % (len(bed["nodes"]), paper["nodes"], paper["vcpus_per_node"],
                paper["memory_mb_per_node"])] + (
                 ["layout on this machine: %s" % bed["layout"]] if bed["layout"] else []) + [
             "nodes share cores: " + shares_text(bed),
             "CPU: %s (paper: \"%s\", section IV-A)" % (
                 " / ".join(testbed.cpu_models(bed)) or "not known (no host facts)", paper["cpu"]),
             "kernels, as each framework's processes said: " + testbed.kernels_text(bed, paper),
             "link: %s (paper: %s)" % (bed["link"]["text"], paper["link"]),
             "versions: " + "; ".join(versions),
             "Python: %s (paper %s)" % ("/".join(bed["python"]) or "?", paper["python"]),
             "data: %s (paper: %s)" % ("/".join(bed["data"]) or "?", paper["data"]),
             "steps per worker: %s (paper: %d epochs x %d = %d)"
             % (steps, paper["epochs"], paper["steps_per_epoch"], bed["steps"]["paper"]),
             "same arithmetic in every framework: %s" % bed["same_math"]] + vm_facts(bed)
    blocks = [("h2", "The setup beside the paper's"), ("list", facts),
              ("p", testbed.sources_text()),
              ("table", ["machine's nodes", "logical CPUs", "physical cores",
                         "compute threads given", "CPU affinity", "cores shared", "memory MB"]
               + (["VM accelerator"] if accelerator else []), machines)]
    blocks += contention_blocks(bed.get("contention"))
    if bed["deviations"]:
        blocks += [("p", "Deviations from the paper's setup (named beside each verdict):"),
                   ("list", ["**%s**: %s" % (d["key"], d["text"]) for d in bed["deviations"]])]
    if bed["shares_cores"]:
        blocks.append(("p", "These nodes share cores: the measurements check the machinery, "
                            "they do not judge the frameworks. Every claim comparing "
                            "frameworks' times is marked not comparable."))
    return blocks


ACCELERATORS = {"kvm": "KVM", "qemu": "QEMU TCG (emulated CPU)"}


def vm_facts(bed):
    """The VMs' provider, box and accelerator, where the nodes are Vagrant VMs."""
    vm = bed.get("vm") or {}
    if not vm:
        return []
    return ["VMs: %s, box %s, accelerator %s (%s)" % (
        vm.get("provider"), vm.get("box"), ACCELERATORS.get(vm.get("accelerator"),
                                                           vm.get("accelerator")),
        vm.get("why", ""))]


def shares_text(bed):
    """"no", "yes (measured: ...)", "no (not ruled out on node2: ...)", "unknown (...)"."""
    text = {True: "yes", False: "no", None: "unknown (no host facts)"}[bed["shares_cores"]]
    if any(m.get("measured") for m in bed["machines"]):
        return text + " (measured: the contention probe below)"
    unsure = testbed.unsure(bed.get("contention"))
    if unsure and text == "no":
        return text + " (not ruled out on %s: the contention probe below)" % ", ".join(unsure)
    return text


def shared_cell(machine):
    """The setup table's "cores shared": yes / no / unknown, and from what."""
    if machine["shared"] is None:
        return "unknown"
    if not machine["shared"]:
        return "no"
    if machine.get("inferred_shared"):
        return "yes (%s threads on %s CPUs)" % (machine["threads"], machine["logical_cpus"])
    return "yes (measured: contention probe)"


def contention_blocks(probe):
    """The contention probe's figures (harness/run/contention.py): interference between the
    nodes measured, each node against its own noise."""
    if not probe:
        return [("p", "Contention probe: not run (a run made before it existed): sharing is "
                      "inferred from the inventory and the host facts only.")]
    unsure = testbed.unsure(probe)
    rows = [[name, "%.0f" % v["alone"], render.number(v["together"], "%.0f"),
             "-" if v["loss"] is None else "%+.1f%%" % (-100 * v["loss"]),
             _probe_range(v), _noise_cell(v),
             "yes" if v.get("shared") else "not ruled out" if name in unsure else "no",
             "-" if v["steal"] is None else "%.1f%%" % (100 * v["steal"])]
            for name, v in sorted(probe["nodes"].items())]
    rule = probe.get("rule") or "shared when a node is slower by more than %.0f%%" % (
        100 * probe["threshold"])
    return [("p", "Contention probe: interference between the nodes, measured. A fixed CPU "
                  "kernel with each node's thread budget, under its CPU affinity, %.1f s on "
                  "each node alone, then on all nodes at once, %s rounds, each node alone "
                  "before and after each round (in %s; medians). The median change alone "
                  "against itself is the node's own noise (the largest beside it). Rule: %s. "
                  "Found: %s.%s%s"
             % (probe["probe_seconds"], probe.get("rounds") or "several", probe["unit"], rule,
                _found(probe), settled_text(probe),
                " Measured %d s before this run, for a run on the same nodes, and reused "
                "here." % probe["reused_after"] if probe.get("reused_after") is not None
                else "")),
            ("table", ["node", "alone", "all at once", "change", "change per round",
                       "alone against itself", "shares cores", "steal time"], rows)]


def _found(probe):
    """What the probe found, in the words of its three outcomes."""
    if probe["shared"]:
        return "some nodes share cores, so the run counts as sharing cores"
    unsure = testbed.unsure(probe)
    if unsure:
        return "sharing not ruled out on %s: a median loss over %.0f%%, but not %.0f%% beyond " \
            "the node's own noise, or not in every round but one; the claims are judged, " \
            "with this named beside them" % (", ".join(unsure), 100 * probe["threshold"],
                                             100 * probe["threshold"])
    return "no node shares cores"


def _noise_cell(v):
    """"+-2.2%" or "+-2.2% (at most +-8.0%)": the median change alone, and the largest."""
    if v.get("noise") is None:
        return "-"
    text = "+-%.1f%%" % (100 * v["noise"])
    if v.get("noise_max") is None or round(1000 * v["noise_max"]) == round(1000 * v["noise"]):
        return text
    return text + " (at most +-%.1f%%)" % (100 * v["noise_max"])


def _probe_range(v):
    if v.get("loss_low") is None:
        return "-"
    return "%+.0f%% to %+.0f%%" % (-100 * v["loss_high"], -100 * v["loss_low"])


def settled_text(probe):
    return " Before it measured, it %s." % probe["settled"] if probe.get("settled") else ""
