"""The contention probe: a fixed CPU kernel run by `threads` processes for `seconds`, printed
as one JSON line. The controller (harness/run/contention.py) runs it on each node alone, then on
every node at once, and reads from the ratio whether the nodes share physical cores.

Processes, not threads: pure Python work, so that the GIL does not serialise it, and no BLAS,
so that no library's own thread pool changes the budget. Standard library only, Python 3.6:
the controller pipes this file into whichever Python the node has.

    python - THREADS SECONDS < probe.py     the kernel
    python - settle MAX_SECONDS < probe.py  wait, bounded, until the node is quiet

`settle` runs before the kernel: it writes out dirty pages (`sync`), then waits until, over
one-second windows, the node's CPUs are busy less than QUIET_BUSY of their time and tasks
stall on I/O less than QUIET_IO of it (the kernel's pressure figures, /proc/pressure/io),
twice in a row, or MAX_SECONDS have passed. It prints what it found and how long it waited.
"""
import json
import multiprocessing
import os
import sys
import time

CHUNK = 20000  # iterations of the kernel per timed chunk (a few ms on a 2020s core)
SKIP_SECONDS = 0.25  # the first chunks are left out: the nodes do not start at the same instant
QUIET_BUSY = 0.10  # share of the node's CPU time other programs may take on a quiet node
QUIET_IO = 0.05    # share of time some task may stall on I/O on a quiet node
QUIET_WINDOWS = 2  # quiet one-second windows in a row


def kernel(iterations):
    """Integer arithmetic in a loop: no memory traffic to speak of, the same work every call."""
    x = 1
    for i in range(iterations):
        x = (x * 1103515245 + i) & 0x7FFFFFFF
    return x


def worker(seconds, queue):
    began = time.time()
    ends = []
    while time.time() - began < seconds:
        kernel(CHUNK)
        ends.append(time.time() - began)
    queue.put(ends)


def steal_ticks():
    """(steal, total) jiffies of the whole machine from /proc/stat; None where not reported."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()[1:]
    except (IOError, OSError):
        return None
    values = [int(v) for v in fields]
    if len(values) < 8:
        return None
    return values[7], sum(values[:8])


def cpu_ticks(cpus):
    """(busy, total) jiffies of the CPUs in `cpus` (this process's affinity) from /proc/stat;
    busy counts steal too: time the node's CPUs were not there for it."""
    busy = total = 0
    with open("/proc/stat") as handle:
        for line in handle:
            fields = line.split()
            if not fields[0].startswith("cpu") or fields[0] == "cpu":
                continue
            if int(fields[0][3:]) not in cpus:
                continue
            values = [int(v) for v in fields[1:9]]
            total += sum(values)
            busy += sum(values) - values[3] - values[4]  # less idle and iowait
    return busy, total


def pressure_us(kind):
    """Microseconds some task stalled on `kind` (cpu, io) since boot; None without PSI."""
    try:
        with open("/proc/pressure/%s" % kind) as handle:
            for line in handle:
                if line.startswith("some"):
                    return int(line.split("total=")[1])
    except (IOError, OSError, IndexError, ValueError):
        return None
    return None


def dirty_mb():
    """Dirty and writeback pages waiting to be written, in MB."""
    found = 0
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith(("Dirty:", "Writeback:")):
                found += int(line.split()[1])
    return found / 1024.0


def window(cpus, seconds=1.0):
    """(busy share of the node's CPUs, share of time some task stalled on I/O) over one
    window; the I/O share is None without PSI."""
    busy0, total0 = cpu_ticks(cpus)
    io0, began = pressure_us("io"), time.time()
    time.sleep(seconds)
    busy1, total1 = cpu_ticks(cpus)
    io1, took = pressure_us("io"), time.time() - began
    busy = float(busy1 - busy0) / max(1, total1 - total0)
    io = None if io0 is None or io1 is None else (io1 - io0) / 1e6 / took
    return busy, io


def settle(max_seconds):
    """Write out dirty pages, then wait until the node is quiet (or max_seconds)."""
    began = time.time()
    cpus = os.sched_getaffinity(0)
    dirty = dirty_mb()
    os.sync()
    synced = time.time() - began
    quiet, busiest, worst_io = 0, 0.0, 0.0
    busy, io = None, None
    while quiet < QUIET_WINDOWS and (busy is None or time.time() - began < max_seconds):
        busy, io = window(cpus)
        busiest, worst_io = max(busiest, busy), max(worst_io, io or 0.0)
        calm = busy < QUIET_BUSY and (io is None or io < QUIET_IO)
        quiet = quiet + 1 if calm else 0
    return {"waited": round(time.time() - began, 1), "quiet": quiet >= QUIET_WINDOWS,
            "synced_seconds": round(synced, 1), "dirty_mb": round(dirty, 1),
            "busy": round(busy, 3), "io_stall": None if io is None else round(io, 3),
            "busiest": round(busiest, 3), "worst_io_stall": round(worst_io, 3),
            "cpus": len(cpus), "quiet_busy": QUIET_BUSY, "quiet_io": QUIET_IO}


def run_kernel(threads, seconds):
    fork = multiprocessing.get_context("fork")  # the script comes on stdin: nothing to import
    queue = fork.Queue()
    before = steal_ticks()
    procs = [fork.Process(target=worker, args=(seconds, queue))
             for _ in range(threads)]
    for proc in procs:
        proc.start()
    chunks = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    after = steal_ticks()
    rate = sum(len([t for t in ends if t > SKIP_SECONDS]) for ends in chunks) \
        / max(1e-9, seconds - SKIP_SECONDS)
    steal = None
    if before and after and after[1] > before[1]:
        steal = float(after[0] - before[0]) / (after[1] - before[1])
    return {"threads": threads, "seconds": seconds, "chunks_per_s": rate, "steal": steal}


def main(argv):
    if argv[1] == "settle":
        found = settle(float(argv[2]))
    else:
        found = run_kernel(int(argv[1]), float(argv[2]))
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv)
