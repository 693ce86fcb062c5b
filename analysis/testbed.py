"""The testbed: the run's setup beside the paper's. Nodes, the cores under them against the
threads given, whether nodes share cores, memory, the link, versions, data and steps, built
from the manifest alone (inventory, host facts, cells). `invoke collect` writes the same flags
into manifest.json (key `setup`) for other tools; the report names, beside every verdict, the
deviations that bear on it. No pandas or matplotlib: the controller's collect imports it.
"""
import functools
import re
from pathlib import Path

import yaml

import registry

REFERENCE = Path(__file__).resolve().parent / "reference" / "paper.yml"
PACKAGES = registry.version_packages()  # version name -> the packages that give it


@functools.lru_cache(maxsize=None)
def _reference(path):
    return yaml.safe_load(Path(path).read_text())


def paper_setup(path=REFERENCE):
    return _reference(path)["setup"]


def paper_sources(path=REFERENCE):
    return _reference(path)["sources"]


def where_stated(source):
    """"section IV-A", "Table IV", "not stated", or "the package's reading of section IV-A":
    where a setup value of paper.yml `sources` comes from."""
    section = str(source.get("section") or "")
    where = (section if section.startswith("Table") else "section " + section) \
        if section else "not stated"
    if source.get("assumption"):
        return "the package's reading" + (" of %s" % where if section else "")
    if source.get("not_stated") and section:
        return "not stated (%s gives only part)" % where
    return where


# deviation key -> the setup value of paper.yml whose source its text gives as the paper's
CITED = {"threads": "vcpus_per_node", "nodes": "nodes", "memory": "memory_mb_per_node",
         "versions": "versions", "python": "python", "link": "link", "data": "data",
         "steps": "steps_per_epoch"}


def sources_text(path=REFERENCE):
    """Where each of the paper's setup values above comes from (paper.yml `sources`): its
    section, "not stated", or the package's reading, grouped."""
    groups = {}
    for key, source in paper_sources(path).items():
        groups.setdefault(where_stated(source), []).append(key)
    return "The paper's setup values: %s." % "; ".join(
        "%s: %s" % (", ".join(keys), where) for where, keys in groups.items())


def describe(manifest, paper=None):
    """{machines, nodes, shares_cores, link, versions, python, data, steps, deviations}."""
    paper = paper or paper_setup()
    nodes = _nodes(manifest)
    machines = _machines(nodes)
    probe = manifest.get("contention")
    _apply_probe(machines, probe)
    setup = {"machines": machines, "nodes": nodes,
             "shares_cores": _any_flag(m["shared"] for m in machines),
             "link": _link(manifest), "versions": _versions(manifest, paper),
             "python": sorted(_pythons(manifest)), "data": _data(manifest),
             "steps": _steps(manifest, paper), "paper": paper,
             "layout": (manifest.get("inventory") or {}).get("layout") or "",
             "contention": probe, "same_math": same_math_text(manifest),
             "vm": manifest.get("vm") or {}, "kernels": manifest.get("kernels") or {},
             "kernel_defaults": _kernel_defaults(manifest),
             "benchmarks": sorted({c["benchmark"] for c in manifest.get("cells", [])
                                   if c.get("benchmark")}),
             "systems": {name: registry.system(name, manifest) for name in sorted(
                 {c["system"] for c in manifest.get("cells", []) if c.get("system")})}}
    setup["deviations"] = deviations(setup, paper)
    return setup


def same_math_text(manifest):
    """Whether the frameworks' arithmetic was checked on this run's stack (`invoke
    same-math`), when, and with what outcome."""
    stack = (manifest.get("stack") or {}).get("name") or "?"
    record = manifest.get("same_math")
    if not record:
        return "no result on this machine for the %s stack (`invoke same-math --stack %s`); " \
            "the results on the developers' machines are in docs/methodology.md, \"Same " \
            "arithmetic\"" % (stack, stack)
    if record.get("benchmark"):
        stack = "%s stack, %s" % (stack, record["benchmark"])
    else:
        stack += " stack"
    when = record.get("when") or "?"
    if record.get("commit"):
        when += ", commit %s" % record["commit"]
    if record.get("ok"):
        return "passed for the %s on %s (largest loss difference between frameworks " \
               "%.1e%s; run %s)" % (stack, when,
                                    record.get("largest_loss_difference") or 0.0,
                                    ", within %gx each framework's own noise floor"
                                    % record["noise_floor"] if record.get("noise_floor")
                                    else "", record.get("run"))
    parted = "; ".join("%s %s at step %s, layer %s" % (p["system"], p["what"], p["step"],
                                                        p["layer"])
                       for p in record.get("parted") or []) or \
        "; ".join(record.get("failed") or []) or "see the run"
    return "FAILED for the %s on %s: %s (run %s)" % (stack, when, parted,
                                                          record.get("run"))


def _nodes(manifest):
    facts = manifest.get("host_facts") or {}
    seen = manifest.get("cpu") or {}  # read by the run's own processes
    out = []
    for host in manifest.get("inventory", {}).get("hosts", []):
        fact = facts.get(host["name"]) or {}
        out.append({"name": host["name"], "threads": host.get("vcpus"),
                    "cpus": host.get("cpus") or "", "machine": _machine_key(host, fact),
                    "logical_cpus": _usable_cpus(fact),
                    "physical_cores": fact.get("physical_cores"),
                    "memory_mb": fact.get("memory_mb"),
                    "cpu": seen.get(host["name"]) or (
                        {"model": fact["cpu_model"]} if fact.get("cpu_model") else None)})
    return out


def _usable_cpus(fact):
    """The CPUs the node's processes may run on (their affinity, `nproc`), where fewer than
    the machine's; None without facts."""
    known = [n for n in (fact.get("cpu_count"), fact.get("usable_cpus")) if n]
    return min(known) if known else None


def _machine_key(host, fact):
    """Which physical machine a node is on: its machine id where the facts have one; nodes
    reached without SSH (`local`) are on the controller's; else each address is its own."""
    if fact.get("machine_id"):
        return fact["machine_id"]
    return "controller" if host.get("connection") == "local" else host.get("address")


def _machines(nodes):
    by_key = {}
    for node in nodes:
        by_key.setdefault(node["machine"], []).append(node)
    out = []
    for key, members in by_key.items():
        cpus = members[0]["logical_cpus"]
        threads = sum(n["threads"] or 0 for n in members)
        shared = None if not cpus else threads > cpus
        out.append({"machine": key, "nodes": [n["name"] for n in members],
                    "logical_cpus": cpus, "physical_cores": members[0]["physical_cores"],
                    "threads": threads, "memory_mb": members[0]["memory_mb"],
                    "pinned": all(n["cpus"] for n in members), "shared": shared})
    return out


def slowed(probe):
    """The nodes the contention probe found sharing cores (harness/run/contention.py: a loss
    beyond its threshold and the node's own noise, round after round); a probe from before
    that rule (no per-node verdict): a loss beyond the threshold."""
    return sorted(name for name, v in ((probe or {}).get("nodes") or {}).items()
                  if v.get("shared", v.get("loss") is not None and
                           v["loss"] > probe["threshold"]))


def unsure(probe):
    """The nodes whose sharing the contention probe could not rule out: a median loss over
    its threshold, but not that far beyond the node's own noise, or not in every round but
    one. A probe saved before this outcome: a node it did not find shared with a median loss
    over the threshold; one from before the per-node verdict: none (slowed() reads it)."""
    return sorted(name for name, v in ((probe or {}).get("nodes") or {}).items()
                  if v.get("undecided", "shared" in v and not v["shared"] and
                           (v.get("loss") or 0) > probe["threshold"]))


def _apply_probe(machines, probe):
    """Sharing measured wins over sharing inferred where it finds sharing; where it finds
    none, an inference of sharing (more threads than CPUs) stands."""
    if not probe:
        return
    losing = set(slowed(probe))
    for m in machines:
        m["inferred_shared"] = bool(m["shared"])
        m["measured"] = bool(losing & set(m["nodes"]))
        if m["measured"]:
            m["shared"] = True
        elif m["shared"] is None:
            m["shared"] = False


def _any_flag(flags):
    """True if any is True, False if all are False, None (unknown) otherwise."""
    flags = list(flags)
    if any(f is True for f in flags):
        return True
    return False if flags and all(f is False for f in flags) else None


def _link(manifest):
    hosts = manifest.get("inventory", {}).get("hosts", [])
    facts = manifest.get("host_facts") or {}
    rates = sorted({c.get("link_mbit") for c in manifest.get("cells", [])
                    if c.get("link_mbit")} | ({(manifest.get("network") or {}).get(
                        "rate_mbit")} - {None}))
    if hosts and all(h.get("cluster_interface") == "lo" for h in hosts):
        return {"kind": "loopback", "text": "loopback (`lo`): every node on one machine, "
                                            "no traffic leaves it"}
    if rates:
        return {"kind": "shaped", "mbit": rates,
                "text": "emulated links shaped to %s Mbit/s (tc tbf)"
                        % ", ".join("%g" % r for r in rates)}
    # the kernel says -1 where a NIC reports no speed (virtio in a VM): not reported
    speeds = sorted({s for s in ((facts.get(h["name"]) or {}).get("link_speed_mbit")
                                 for h in hosts) if s is not None and s > 0})
    names = sorted({str(h.get("cluster_interface") or "?") for h in hosts})
    return {"kind": "interface", "mbit": speeds,
            "text": "interface %s, %s" % (", ".join(names), "%s Mbit/s" % ", ".join(
                "%g" % s for s in speeds) if speeds else "speed not reported")}


def _installed(manifest):
    """(framework env, python, {package: version}) for every node's env."""
    for node, envs in sorted((manifest.get("installed") or {}).items()):
        for framework, env in sorted((envs or {}).items()):
            packages = {k.replace("_", "-").lower(): v
                        for k, v in (env or {}).get("packages", {}).items()}
            yield framework, (env or {}).get("python"), packages


def _kernel_defaults(manifest):
    """{framework: [library]}: what each framework's release runs by default on the nodes'
    CPUs, as provisioning asked it with the package's setting unset (bench/common/envinfo.py)."""
    found = {}
    for envs in (manifest.get("installed") or {}).values():
        for framework, env in (envs or {}).items():
            library = ((env or {}).get("default_kernels") or {}).get("library")
            if library:
                found.setdefault(framework, set()).add(library)
    return {framework: sorted(libraries) for framework, libraries in found.items()}


def _versions(manifest, paper):
    found = {name: set() for name in paper["versions"]}
    for _, _, packages in _installed(manifest):
        for name, aliases in PACKAGES.items():
            found[name].update(packages[a] for a in aliases if a in packages)
    return {name: {"paper": str(paper["versions"][name]), "run": sorted(found[name])}
            for name in paper["versions"]}


def _pythons(manifest):
    return {python for _, python, _ in _installed(manifest) if python}


def _data(manifest):
    return sorted({c.get("data") for c in manifest.get("cells", []) if c.get("data")})


def _steps(manifest, paper):
    """The run's step plans: epochs x steps_per_epoch, or for the verdict size (precision)
    from `epochs` up to `max_epochs` epochs (`steps` is then the most it may run)."""
    networks = {}  # plan -> the networks run with it (the verdict size: LeNet-5's own)
    for c in manifest.get("cells", []):
        if c.get("epochs") and c.get("steps_per_epoch"):
            plan = (c["epochs"], c["steps_per_epoch"], max(c.get("max_epochs") or 0, c["epochs"])
                    if c.get("precision") else c["epochs"])
            networks.setdefault(plan, set()).add(c.get("network") or "?")
    return {"run": [{"epochs": e, "steps_per_epoch": s, "max_epochs": m, "steps": m * s,
                     "adaptive": m != e, "networks": sorted(networks[(e, s, m)])}
                    for e, s, m in sorted(networks)],
            "paper": paper["epochs"] * paper["steps_per_epoch"],
            "paper_epochs": paper["epochs"]}


def deviations(setup, paper):
    """[{key, text}]: every way the run's setup differs from the paper's."""
    out = []

    def add(key, text):
        out.append({"key": key, "text": text})

    _machine_deviations(setup, paper, add)
    _size_deviations(setup, paper, add)
    _cpu_deviation(setup, paper, add)
    _version_deviations(setup, paper, add)
    _kernel_deviations(setup, paper, out)
    _coordinator_deviations(setup, out)
    _data_deviations(setup, paper, add)
    _step_deviations(setup, add)
    _parameter_deviation(setup, out)
    sources = paper_sources()
    for deviation in out:  # every value given as the paper's says where the paper gives it
        if deviation["key"] in CITED:
            deviation["text"] += " (the paper's value: %s)" % where_stated(
                sources[CITED[deviation["key"]]])
    return out


def _machine_deviations(setup, paper, add):
    """Emulated CPUs, cores the probe found shared, and machines holding more than one node."""
    vm = setup.get("vm") or {}
    if vm.get("accelerator") == "qemu":
        add("emulated_cpu", "the nodes are VMs on QEMU's TCG emulation (%s): their CPUs are "
            "emulated, 1/50 to 1/300 of the host's speed, and no framework's time says how "
            "fast it is; the package runs no calibration pass on them, so "
            "forward and backward are not measured" % vm.get("why", "KVM not usable"))
    losing = slowed(setup.get("contention"))
    if losing:
        add("shared_cores", probe_sharing_text(setup, losing))
    elif unsure(setup.get("contention")):
        add("sharing_unsure", probe_unsure_text(setup["contention"]))
    for m in setup["machines"]:
        if m["shared"] and not m.get("measured"):
            add("shared_cores", "nodes %s share one machine's %s logical CPUs with %d compute "
                "threads: a descheduled peer looks like communication"
                % (", ".join(m["nodes"]), m["logical_cpus"], m["threads"]))
        elif len(m["nodes"]) > 1 and m["memory_mb"]:
            add("memory", "nodes %s share one machine's %d MB of memory (paper: %d MB per "
                "node)" % (", ".join(m["nodes"]), m["memory_mb"], paper["memory_mb_per_node"]))


def _size_deviations(setup, paper, add):
    """Threads per worker and the number of nodes (so the global batch)."""
    threads = sorted({n["threads"] for n in setup["nodes"]} - {None})
    if threads and threads != [paper["vcpus_per_node"]]:
        add("threads", "%s compute thread(s) per worker (paper: %d vCPUs per node; a thread "
            "per vCPU is the package's reading, the paper states no thread count)"
            % ("/".join(map(str, threads)), paper["vcpus_per_node"]))
    if len(setup["nodes"]) != paper["nodes"]:
        count = len(setup["nodes"])
        add("nodes", "%d nodes (paper: %d), so a step's global batch is %d x %d = %d images, "
            "not Table IV's %d" % (count, paper["nodes"], count, paper["local_batch"],
                                   count * paper["local_batch"], paper["global_batch"]))


def _cpu_deviation(setup, paper, add):
    models = cpu_models(setup)
    # the paper's words read as a VM's CPU model name (QEMU's "Intel Core Processor (...)",
    # the package's reading): any other model, an Intel Xeon included, is another CPU; the
    # same name, a CPU whose instruction sets may still differ (the paper states none)
    if models:
        same = all(m.startswith("Intel Core Processor") for m in models)
        add("cpu", "%s (paper: \"%s\", section IV-A, its instruction sets not stated%s): "
            "which kernels a framework runs, and how fast, depends on the CPU" % (
                " / ".join(models), paper["cpu"], "; the same model name, read by the package "
                "as QEMU's generic Intel models, whose instruction sets vary" if same else ""))


def _data_deviations(setup, paper, add):
    """The link, synthetic data, and how the data is read (the page cache)."""
    if setup["link"]["kind"] in ("loopback", "shaped"):
        add("link", "%s (paper: %s)" % (setup["link"]["text"], paper["link"]))
    if "synthetic" in setup["data"]:
        add("data", "synthetic data in the CIFAR format (paper: %s)" % paper["data"])
    if setup["data"]:
        add("page_cache", "how the data is read: %s; the others read their shard into memory "
            "once, at start-up, so their loading holds no disk reads, where the paper says "
            "they load every batch \"directly from disk, no matter how many times the same "
            "batch is requested\" (section V-G), the loading and memory difference it gives "
            "%s's caching; and every file may come from the operating system's page cache "
            "(an earlier cell read it), which the paper does not mention" % (
                "; ".join("%s reads its records from disk in the first epoch and caches them "
                          "after (as the paper says, section V-G)" % name
                          for name in registry.caching_frameworks()),
                " and ".join(registry.caching_frameworks())))


# Table II's parameter counts against the package's networks: trainable parameters with 10,
# 100 and 1,000 outputs, as `python -m bench.<framework>.models` prints them and
# tests/test_networks.py checks them alike in every framework (docs/methodology.md,
# "Networks"). Where they differ, the cause is the package's reading: Table II's counts are
# those of the ImageNet networks, whose last layer has 1,000 outputs; on CIFAR it has 10 or
# 100. For AlexNet the head is not all of it.
TABLE_II = {
    "alexnet": {"paper": "62M", "inputs": 4096,
                "counts": {10: 57044810, 100: 57413540, 1000: 61100840},
                "rest": "its feature layers (64-192-384-256-256 channels) hold 1.28M fewer "
                        "parameters than Krizhevsky et al.'s widths in one tower (62.4M with "
                        "1,000 outputs)"},
    "resnet50": {"paper": "25M", "inputs": 2048,
                 "counts": {10: 23528522, 100: 23712932, 1000: 25557032},
                 "rest": "the layers before the last are the same"},
}


def _millions(count):
    return "%.1fM" % (count / 1e6)


def _parameter_deviation(setup, out):
    """Table II's counts for AlexNet and ResNet-50 are not the package's: a deviation of those
    benchmarks' communication claims (what a step exchanges is the parameters)."""
    named = {b: b.split("-")[0] for b in setup.get("benchmarks") or []}
    hit = sorted(b for b, network in named.items() if network in TABLE_II)
    if not hit:
        return
    networks = sorted({named[b] for b in hit})
    hundred = [n for n in networks if "%s-cifar100" % n in hit]
    out.append({"key": "parameters", "benchmarks": hit, "text": (
        "%s: Table II gives %s parameters; the package's networks have %s with CIFAR-10's "
        "10 classes%s. The package's reading of the cause: Table II's counts are the ImageNet "
        "networks', whose last layer has 1,000 outputs (%s x 990 more weights: %s with 1,000 "
        "outputs); %s" % (
            ", ".join(networks),
            ", ".join("%s %s" % (n, TABLE_II[n]["paper"]) for n in networks),
            ", ".join("%s %s" % (n, _millions(TABLE_II[n]["counts"][10])) for n in networks),
            "".join(" (%s %s with CIFAR-100's 100)" % (n, _millions(TABLE_II[n]["counts"][100]))
                    for n in hundred),
            " and ".join("{:,}".format(TABLE_II[n]["inputs"]) for n in networks),
            ", ".join("%s %s" % (n, _millions(TABLE_II[n]["counts"][1000])) for n in networks),
            "; ".join("for %s %s" % (n, TABLE_II[n]["rest"]) for n in networks)))})


def cpu_models(setup):
    """The nodes' CPUs in words (bench/common/cpuinfo.py): as the run's processes read them,
    else the model provisioning's host facts name (none without either)."""
    return sorted({cpu_text(n["cpu"]) for n in setup["nodes"] if n.get("cpu")})


def cpu_text(cpu):
    """"AMD EPYC 7B13, AVX2, AVX-512F, 2 thread(s) per core, under a hypervisor"; the model
    alone where only provisioning's facts name it."""
    if cpu.get("isa") is None:
        return cpu.get("model") or "?"
    parts = [cpu.get("model") or "?"] + (cpu["isa"] or ["no AVX2"])
    if cpu.get("threads_per_core"):
        parts.append("%d thread(s) per core" % cpu["threads_per_core"])
    if cpu.get("hypervisor"):
        parts.append("under a hypervisor")
    return ", ".join(parts)


def _release(version):
    """1.7.0.post2 and 2.13.0+cpu are builds of releases 1.7.0 and 2.13.0."""
    return re.sub(r"(\.post\d+)?(\+.*)?$", "", version)


def _version_deviations(setup, paper, add):
    # a framework the nodes do not have ran nothing here: no deviation of this run's
    differ = ["%s %s" % (name, "/".join(v["run"])) for name, v in
              sorted(setup["versions"].items())
              if v["run"] and sorted({_release(r) for r in v["run"]}) != [v["paper"]]]
    if differ:
        add("versions", "%s (paper: %s)" % (", ".join(differ), ", ".join(
            "%s %s" % kv for kv in sorted(paper["versions"].items()))))
    if setup["python"] and setup["python"] != [str(paper["python"])]:
        add("python", "Python %s (paper: %s)" % ("/".join(setup["python"]), paper["python"]))


def _kernel_deviations(setup, paper, out):
    """Where a framework's own processes said they ran other kernels than the paper names
    (section V-E): `tf_kernels` for TensorFlow on oneDNN, not Eigen (the paper's explanation
    of its backward pass; `invoke explain` measured this factor alone at x0.15-0.47 on
    TensorFlow's claims), `kernels` for the others. Each bears only on claims about that
    framework (`systems`)."""
    source = paper_sources()["kernels"]
    for framework, seen in sorted((setup.get("kernels") or {}).items()):
        expected = (paper.get("kernels") or {}).get(framework)
        ran = [library for library in seen.get("library") or [] if library != expected]
        if not expected or not ran:
            continue
        entry = registry.frameworks()[framework]
        out.append({"key": entry.get("kernels_deviation", "kernels"),
                    "systems": [s for s, system in registry.systems().items()
                                if system["framework"] == framework],
                    "text": "%s ran %s kernels, as its own processes said (%s)%s; the paper "
                            "says it uses %s (section %s: \"%s\")" % (
                                entry["name"], "/".join(seen["library"]),
                                seen.get("read") or "?",
                                _set_by_package(seen.get("read"), entry["name"],
                                                (setup.get("kernel_defaults") or {}).get(
                                                    framework)),
                                expected, source["section"],
                                " ".join(source["quote"].split()))})


def _set_by_package(read, name, default=None):
    """Where a process's answer names a setting it ran under (VAR=value, not unset), that the
    package's scripts set it, and what the release runs by default on these CPUs where
    provisioning asked it (default: [library]): the default depends on the release and the
    CPU (docs/methodology.md)."""
    settings = [v for v in re.findall(r"\b[A-Z][A-Z0-9_]+=([^\s,;)]+)", read or "")
                if v != "unset"]
    if not settings:
        return ""
    return ", a setting of the package's scripts; %s's own default on these CPUs: %s" % (
        name, "%s (provisioning asked it with the setting unset)" % "/".join(default)
        if default else "not asked (provisioned before the package asked it)")


def _coordinator_deviations(setup, out):
    """The package's choices where the paper is silent, for the system-modes with a
    coordinator: where it runs (`placement`), and, where it times the steps, that the
    paper's two definitions of communication part (`async_communication`)."""
    for name, entry in sorted((setup.get("systems") or {}).items()):
        role = entry.get("coordinator")
        if not role:
            continue
        out.append({"key": "placement", "systems": [name], "text": (
            "%s's %s runs on node 1 beside that node's %s: the package's placement (the paper "
            "says \"both a parameter server and a worker task are executed on each virtual "
            "machine\", section IV-A, and not where a coordinator ran)" % (
                name, role, " and ".join(entry.get("roles") or [])))})
        if entry.get("timed_by") == "coordinator":
            out.append({"key": "async_communication", "systems": [name], "text": (
                "%s's communication is the execution time less start-up, loading, forward and "
                "backward (the package's reading of section IV-C, start-up also taken out), "
                "which holds the %s's dispatch; the paper means \"data exchange and any "
                "synchronization overheads\" (section V), in the asynchronous case \"the time "
                "consumed in data transfer over the network\" (section V-F): Table V below "
                "shows the dispatch apart (the split is the package's reading)" % (name, role))})


def kernels_text(setup, paper):
    """"tensorflow: oneDNN (paper: Eigen); pytorch: oneDNN, AVX2 (paper: oneDNN)": what each
    framework's processes said they ran, or why that is not known."""
    parts = []
    run = {entry["framework"] for entry in (setup.get("systems") or {}).values()}
    for framework, expected in sorted((paper.get("kernels") or {}).items()):
        seen = (setup.get("kernels") or {}).get(framework)
        if not seen and framework not in run:
            ran = "not run"
        elif not seen:
            ran = "not read (no process of the run recorded it)"
        elif not seen.get("library"):
            ran = "not read (%s)" % "; ".join(seen.get("errors") or ["?"])
        else:
            ran = ", ".join(seen["library"] + (seen.get("isa") or []))
        parts.append("%s: %s (paper: %s)" % (framework, ran, expected))
    return "; ".join(parts)


def _step_deviations(setup, add):
    steps = setup["steps"]
    short = [s for s in steps["run"] if s["steps"] < steps["paper"]]
    if any(not s["adaptive"] for s in short):
        add("steps", "%s, projected to the paper's %d (start-up + steady "
            "step x the remaining steps)" % (_counts([s for s in short if not s["adaptive"]]),
                                             steps["paper"]))
    if any(s["adaptive"] for s in short):
        add("steps", "up to %s (the verdict size: until the mean step is "
            "known), projected to the paper's %d (start-up + the first epoch's steps at its "
            "rate + 9 epochs at the later epochs' rate)"
            % (_counts([s for s in short if s["adaptive"]]), steps["paper"]))
    if any(s["epochs"] < 2 for s in steps["run"]):
        add("epochs", "fewer than 2 epochs: what input caching changes after epoch 1 "
            "(%s, paper section V-G) was not measured" % caching_note())


def _counts(plans):
    """"32 steps per worker"; where networks differ, "32 steps per worker for alexnet, resnet18
    / 128 for lenet5". No parenthesis: the first screen keeps a deviation's words up to its
    first one."""
    if len(plans) == 1:
        return "%d steps per worker" % plans[0]["steps"]
    first = "%d steps per worker for %s" % (plans[0]["steps"], ", ".join(plans[0]["networks"]))
    return " / ".join([first] + ["%d for %s" % (s["steps"], ", ".join(s["networks"]))
                                 for s in plans[1:]])


def caching_note():
    """"TensorFlow caches its input": the frameworks whose input pipeline caches after epoch 1."""
    names = registry.caching_frameworks()
    return "%s cache%s its input" % (" and ".join(names), "" if len(names) > 1 else "s")


def probe_sharing_text(setup, losing):
    """The deviation the probe found: what it measured, and where the inventory gives the
    nodes CPUs of their own, that it says otherwise (memory bandwidth, a hypervisor that puts
    two vCPUs on one core, another guest)."""
    probe = setup["contention"]
    own = [m for m in setup["machines"] if set(losing) & set(m["nodes"]) and m["pinned"]
           and not m.get("inferred_shared")]
    return "the contention probe: %s ran %s slower with the other nodes running (more than " \
        "%.0f%% beyond its own noise, round after round): the nodes interfere as nodes " \
        "sharing cores do%s" % (
            ", ".join(losing), "/".join("%.0f%%" % (100 * probe["nodes"][n]["loss"])
                                        for n in losing), 100 * probe["threshold"],
            ", though the inventory gives each node CPUs of its own" if own else "")


def probe_unsure_text(probe):
    """The deviation where the probe could neither find sharing nor rule it out."""
    return "the contention probe could not rule out shared cores: %s (sharing needs a " \
        "median loss %.0f%% beyond the node's own noise, and a loss over %.0f%% in every round " \
        "but one): the claims are judged, and these nodes' times may hold that interference" % (
            "; ".join(_unsure_node_text(n, probe["nodes"][n]) for n in unsure(probe)),
            100 * probe["threshold"], 100 * probe["threshold"])


def _unsure_node_text(name, v):
    """"node2 ran 29% slower with the others running (rounds -42% to -12%), alone against
    itself +-40%"."""
    return "%s ran %.0f%% slower with the others running (rounds %+.0f%% to %+.0f%%), alone " \
        "against itself +-%.0f%%" % (name, 100 * v["loss"], -100 * v["loss_high"],
                                     -100 * v["loss_low"], 100 * v["noise"])


def flags(setup):
    """The machine-readable part, for manifest.json."""
    return {"shares_cores": setup["shares_cores"], "link": setup["link"]["kind"],
            "data": setup["data"], "deviations": [d["key"] for d in setup["deviations"]],
            "contention": {k: (setup.get("contention") or {}).get(k)
                           for k in ("shared", "undecided", "worst_loss", "threshold")},
            "machines": [{k: m[k] for k in ("nodes", "logical_cpus", "threads", "shared",
                                            "pinned")} for m in setup["machines"]]}
