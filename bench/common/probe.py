"""The contention probe: a fixed CPU kernel run by `threads` processes for `seconds`, printed
as one JSON line. The controller (harness/run/contention.py) runs it on each node alone, then on
every node at once, and reads from the ratio whether the nodes share physical cores.

Processes, not threads: pure Python work, so that the GIL does not serialise it, and no BLAS,
so that no library's own thread pool changes the budget. Standard library only, Python 3.6:
the controller pipes this file into whichever Python the node has.

    python - THREADS SECONDS < probe.py
"""
import json
import multiprocessing
import sys
import time

CHUNK = 20000  # iterations of the kernel per timed chunk (a few ms on a 2020s core)
SKIP_SECONDS = 0.25  # the first chunks are left out: the nodes do not start at the same instant


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


def main(argv):
    threads, seconds = int(argv[1]), float(argv[2])
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
    print(json.dumps({"threads": threads, "seconds": seconds, "chunks_per_s": rate,
                      "steal": steal}))


if __name__ == "__main__":
    main(sys.argv)
