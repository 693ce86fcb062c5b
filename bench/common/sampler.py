"""psutil sampler: memory, CPU and network counters to memory.csv, progress to progress.json.

Runs as a daemon thread in the trainer. Each row is flushed as it is written, so a crash keeps
every sample taken so far. Progress is written by the same thread, so the training loop only
updates a dict (no I/O on the hot path).
"""
import csv
import os
import threading
import time

import psutil

from contract import nodefolder

from .results import write_json

COLUMNS = ["time", "elapsed_s", "rss_mb", "children_rss_mb", "cpu_percent", "threads",
           "node_mem_used_mb", "node_mem_available_mb", "net_bytes_sent", "net_bytes_recv",
           "phase", "step"]
MB = 1024.0 * 1024.0


class Sampler(object):
    def __init__(self, out_dir, interval=1.0, interface=None, total_steps=0):
        self.out_dir = out_dir
        self.interval = interval
        self.interface = interface
        self.state = {"phase": "setup", "step": 0, "total": total_steps, "pid": os.getpid()}
        self.process = psutil.Process()
        self.started = time.time()
        self.peak_rss_mb = 0.0
        self.peak_own_rss_mb = 0.0  # the process alone, its forked loaders left out
        self._stop = threading.Event()
        self.tracker = None  # interference.Tracker (or None), ticked with every sample
        self._thread = threading.Thread(target=self._run, name="sampler")
        self._thread.daemon = True

    def start(self):
        self.process.cpu_percent(None)  # prime: the first call always returns 0.0
        self._thread.start()
        return self

    def progress(self, **fields):
        if fields.get("step") == 1 and "first_step_at" not in self.state:
            self.state["first_step_at"] = time.time()  # launch-to-first-step (fault-bench)
        self.state.update(fields)

    def stop(self, phase="done"):
        self.state["phase"] = phase
        self._stop.set()
        self._thread.join(timeout=5 * self.interval + 1)

    def _run(self):
        path = os.path.join(self.out_dir, nodefolder.MEMORY)
        with open(path, "w") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            while True:
                writer.writerow(self._sample())
                handle.flush()
                self._write_progress()
                if self._stop.wait(self.interval):
                    writer.writerow(self._sample())
                    self._write_progress()
                    return

    def _sample(self):
        # one walk of the process table per sample, shared with the tracker: a second one
        # per tick took most of an emulated CPU (VMs under QEMU's TCG)
        subtree = self.process.children(recursive=True)
        if self.tracker is not None:
            try:
                self.tracker.tick(subtree)
            except Exception:  # noqa: BLE001 (a lost tick costs a figure, not the sample)
                pass
        now = time.time()
        rss = self.process.memory_info().rss / MB
        children = 0.0
        for child in subtree:
            try:
                children += child.memory_info().rss / MB
            except psutil.Error:
                pass  # a loader worker that just exited
        self.peak_rss_mb = max(self.peak_rss_mb, rss + children)
        self.peak_own_rss_mb = max(self.peak_own_rss_mb, rss)
        vm = psutil.virtual_memory()
        sent, recv = self.net_counters()
        return ["%.3f" % now, "%.3f" % (now - self.started), "%.1f" % rss, "%.1f" % children,
                "%.1f" % self.process.cpu_percent(None), self.process.num_threads(),
                "%.1f" % ((vm.total - vm.available) / MB), "%.1f" % (vm.available / MB),
                sent, recv, self.state["phase"], self.state["step"]]

    def net_counters(self):
        """(bytes sent, bytes received) of the cluster interface (all interfaces if unknown)."""
        counters = psutil.net_io_counters(pernic=True)
        nic = counters.get(self.interface) if self.interface else None
        if nic is None:
            nic = psutil.net_io_counters()
        return nic.bytes_sent, nic.bytes_recv

    def _write_progress(self):
        state = dict(self.state, updated=time.time(), peak_rss_mb=round(self.peak_rss_mb, 1))
        write_json(os.path.join(self.out_dir, nodefolder.PROGRESS), state, durable=False)
