"""What else ran on the node while the cell did: measured by every process of the cell over
its lifetime, from the kernel's own counters (docs/methodology.md, "Interference").

- others' CPU: the busy time of the node's CPUs (this process's affinity set) less the CPU
  time of the cell's processes (every process whose working directory is in the cell's
  folder, on any node that shares this machine), as a share of those CPUs' time;
- steal: time the hypervisor gave the node's CPUs to someone else;
- pressure: the share of time some task waited for a CPU or for I/O (/proc/pressure, where
  the kernel has it);
- run-queue wait: how long this process's threads waited for a CPU per second they ran
  (/proc/self/task/*/schedstat).

Standard library and psutil, Python 3.6: it runs on the nodes.
"""
import atexit
import os
import threading
import time

from .probe import pressure_us

try:
    import psutil
except ImportError:  # a self-check without it: others' CPU is then not known
    psutil = None

TICK = float(os.sysconf("SC_CLK_TCK"))
# Each process leaves its final CPU time here, in its own folder, as it finishes: a sibling
# that exits between two scans would otherwise take the CPU it used since the last one with
# it, and that time (up to SCAN_SECONDS of a busy CPU) would be counted as another program's.
FINAL = "cpu_final.txt"


def start(marker):
    """A Tracker, or None where the kernel's counters cannot be read: the measurement is then
    missing, never the cell's result."""
    try:
        tracker = Tracker(marker)
        atexit.register(_leave_final_cpu)  # again at the end: the result written, teardown
        return tracker
    except Exception:  # noqa: BLE001 (any failure here must not cost the result)
        return None


def finish(tracker):
    """The tracker's figures, {} where there is none or reading them failed."""
    try:
        return tracker.finish() if tracker is not None else {}
    except Exception:  # noqa: BLE001
        return {}


class Tracker(object):
    """The counters at the start and the end of the process, and in between the CPU time of
    the cell's processes as last seen: one that exits (a loader worker, another role) keeps
    the time it had. tick() is the sampler thread's (its own subtree, as the sampler found
    it, every call; a scan of every process every SCAN_SECONDS, or less often where a scan
    takes more than SCAN_SHARE of that: the scan reads each process's working directory)."""

    SCAN_SECONDS = 2.0  # a scan of 65 processes took 0.7 ms here
    SCAN_SHARE = 0.02  # at most this share of the time in scans: slower CPUs scan less often

    def __init__(self, marker):
        self.marker = marker
        self.cpus = os.sched_getaffinity(0)  # as started: a framework may rebind its thread
        self.lock = threading.Lock()  # tick() runs in the sampler thread, finish() in main
        self.first = self.counters()
        self.seen = {}  # pid -> CPU seconds when last seen
        self.folders = {}  # pid -> its working directory (where it leaves FINAL)
        self.start_cpu = {}  # pid -> CPU seconds when first seen (0 if it started after us)
        self.scanned = 0.0
        self.every = self.SCAN_SECONDS
        self.scan(initial=True)

    def counters(self):
        busy, steal, total = _cpu_jiffies(self.cpus)
        return {"time": time.time(), "cpus": len(self.cpus), "busy": busy / TICK,
                "steal": steal / TICK, "total": total / TICK,
                "pressure_cpu": pressure_us("cpu"), "pressure_io": pressure_us("io"),
                "schedstat": _schedstat()}

    def note(self, pid, cpu, initial=False):
        with self.lock:
            self.start_cpu.setdefault(pid, cpu if initial else 0.0)
            self.seen[pid] = cpu

    def scan(self, initial=False):
        began = self.scanned = time.time()
        found = _cell_cpu(self.marker, self.cpus) or {}
        self.every = max(self.SCAN_SECONDS, (time.time() - began) / self.SCAN_SHARE)
        for pid, (cpu, folder) in found.items():
            self.note(pid, cpu, initial)
            self.folders[pid] = folder
        for pid in set(self.folders) - set(found):  # exited since: its own last word
            final = _final_cpu(self.folders.pop(pid), pid)
            if final is not None:
                self.note(pid, max(final, self.seen.get(pid, 0.0)))

    def tick(self, subtree=()):
        """subtree: this process's descendants as the sampler found them this sample."""
        if psutil is None:
            return
        if time.time() - self.scanned >= self.every:
            self.scan()
            return
        for proc in [psutil.Process()] + list(subtree):
            try:
                times = proc.cpu_times()
                self.note(proc.pid, times.user + times.system)
            except psutil.Error:
                continue

    def finish(self):
        """The figures from the start to now (shares of 0..1; None where not known); this
        process's CPU time left in FINAL for the trackers of the processes still running."""
        _leave_final_cpu()
        self.scan()
        with self.lock:
            cell = sum(cpu - self.start_cpu[pid] for pid, cpu in self.seen.items()) \
                if psutil is not None else None
        return between(self.first, self.counters(), cell)


def between(first, last, cell_cpu):
    """The figures over the window from counters `first` to `last`, the cell's processes
    having used cell_cpu CPU seconds in it (None: not known)."""
    wall = max(1e-6, last["time"] - first["time"])
    total = max(1e-6, last["total"] - first["total"])
    steal = last["steal"] - first["steal"]
    out = {"seconds": round(wall, 1), "cpus": last["cpus"], "steal": _share(steal, total)}
    out["others_cpu"] = None if cell_cpu is None else _share(
        last["busy"] - first["busy"] - steal - cell_cpu, total)
    for kind in ("cpu", "io"):
        a, b = first["pressure_" + kind], last["pressure_" + kind]
        out["pressure_" + kind] = None if a is None or b is None else _share(
            (b - a) / 1e6, wall)
    ran = last["schedstat"][0] - first["schedstat"][0]
    waited = last["schedstat"][1] - first["schedstat"][1]
    # threads that ended take their counts with them: never below 0
    out["runqueue_wait"] = round(max(0.0, waited / float(ran)), 3) if ran > 0 else None
    return out


def _share(part, whole):
    return round(min(1.0, max(0.0, part / whole)), 4)


def _cpu_jiffies(cpus):
    """(busy, steal, total) jiffies of the CPUs in `cpus`; busy counts steal."""
    busy = steal = total = 0
    with open("/proc/stat") as handle:
        for line in handle:
            fields = line.split()
            if not fields[0].startswith("cpu") or fields[0] == "cpu" or \
                    int(fields[0][3:]) not in cpus:
                continue
            values = [int(v) for v in fields[1:9]]
            total += sum(values)
            busy += sum(values) - values[3] - values[4]  # less idle and iowait
            steal += values[7]
    return busy, steal, total


def _leave_final_cpu():
    times = os.times()
    try:
        with open(FINAL, "w") as handle:
            handle.write("%d %.3f\n" % (os.getpid(), times[0] + times[1]))
    except (IOError, OSError):
        pass  # a read-only folder: the siblings keep the figure of their last scan


def _final_cpu(folder, pid):
    """The CPU seconds process `pid` left in `folder` as it finished, or None."""
    try:
        with open(os.path.join(folder, FINAL)) as handle:
            left, cpu = handle.read().split()
        return float(cpu) if int(left) == pid else None
    except (IOError, OSError, ValueError):
        return None


def _cell_cpu(marker, mine):
    """pid -> (CPU seconds so far, working directory) of every process whose working directory holds marker and
    that may run only on this node's CPUs (nodes pinned to CPUs of one machine each count
    their own processes; unpinned nodes of one machine count all of the cell's)."""
    if psutil is None:
        return None
    found = {}
    for proc in psutil.process_iter():
        try:
            folder = proc.cwd()
            if marker in folder and set(proc.cpu_affinity()) <= mine:
                times = proc.cpu_times()
                found[proc.pid] = (times.user + times.system, folder)
        except (psutil.Error, OSError):
            continue  # another user's, or gone
    return found


def _schedstat():
    """(ns run, ns waited on a run queue) over this process's threads."""
    ran = waited = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/schedstat" % task) as handle:
                fields = handle.read().split()
            ran, waited = ran + int(fields[0]), waited + int(fields[1])
        except (IOError, OSError, IndexError, ValueError):
            continue  # a thread that ended, or a kernel without schedstats
    return ran, waited
