"""While `vagrant up` waits for each VM's address: a VM whose DHCP client gave up is restarted
once.

Why: in CI one of three TCG guests got no address within its DHCP client's 300 s,
its "Raise network interfaces" failed, and vagrant-libvirt went on asking libvirt for the VM's
lease for about 10 more minutes before it removed the VM and failed. The guest never asks again
by itself: ifupdown runs its DHCP client once. Seen here too (the first boot's DHCP
blocked on purpose, then unblocked): after a reset (`virsh reset`) the guest asked every few
seconds for 4 minutes and libvirt's DHCP offered an address each time (the offers, with correct
checksums, reached the VM's tap device), but the guest never took one; after `virsh destroy`
and `virsh start` (a new QEMU process, the same VM) it took the first offer, and the waiting
`vagrant up` went on and succeeded (one trial of each). Why the guest did not take the offers
is not known. Each VM is restarted at most once: a second failure is Vagrant's, with the
consoles in its error (the restarted boot's: QEMU starts the log anew; the first boot's failure
is in the line said when it was restarted)."""
import re
import threading
from pathlib import Path

# the unit's description: a newer systemd than bullseye's names the unit before it
# ("networking.service - Raise network interfaces")
GAVE_UP = "Raise network interfaces"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
POLL_SECONDS = 5
# a file system stamps a write with the kernel's coarse clock, which may lag time.time() by a
# tick: a console written in the watch's first milliseconds must not read as an earlier VM's
# (the likely cause, not shown, of a CI failure: the test's console, written at once, was
# never read; 20,000 writes here never stamped one early)
MTIME_SLACK = 1.0


def plain(text):
    """Console text without the terminal's colour and cursor codes."""
    return ANSI.sub("", text)


def failed_units(text):
    """The "Failed to start X" lines of a console, in order, each once."""
    found = []
    for line in plain(text).splitlines():
        match = re.search(r"Failed to start (.+?)\.?\s*$", line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


class DhcpWatch:
    """Reads the consoles of `names` every POLL_SECONDS; restarts (restart(name)) a VM whose
    console says its DHCP client gave up. A console last written before the watch began (by more
    than MTIME_SLACK) is an earlier VM's and is not read."""

    def __init__(self, names, console, restart, echo, clock):
        self.names, self.console, self.restart, self.echo = names, Path(console), restart, echo
        self.began = clock() - MTIME_SLACK
        self.restarted = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=POLL_SECONDS)  # a daemon: Ctrl-C does not wait on virsh
        return False

    def _poll(self):
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.check()
            except Exception as error:  # the watch is a help: Vagrant's own wait still runs
                self.echo("the console watch stopped: %s" % error)
                return

    def check(self):
        for name in self.names:
            if name in self.restarted or self._stop.is_set():
                continue
            log = self.console / (name + ".log")
            try:
                fresh = log.is_file() and log.stat().st_mtime >= self.began
                text = log.read_text(errors="replace") if fresh else ""
            except OSError:  # gone, or not readable by this user: Vagrant's own wait decides
                continue
            gave_up = [unit for unit in failed_units(text) if unit.endswith(GAVE_UP)]
            if not gave_up:
                continue
            self.restarted.append(name)
            self.echo("%s: its DHCP client gave up with no address (its console: \"Failed to "
                      "start %s\"); restarting it once, so that it asks again while Vagrant "
                      "waits" % (name, gave_up[0]))
            try:
                self.restart(name)
            except Exception as error:  # Vagrant's own wait then fails with the consoles
                self.echo("%s: the restart failed: %s" % (name, error))
