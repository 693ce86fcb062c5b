"""While `vagrant up` waits for each VM's address: a VM whose DHCP client gave up is reset once.

Why: in CI (2026-11-27) one of three TCG guests got no offer from libvirt's DHCP within its
dhclient's 300 s, its "Raise network interfaces" failed, and vagrant-libvirt went on asking
libvirt for the VM's lease for about 10 more minutes before it removed the VM and failed
(why no offer came, the guest, dnsmasq or the bridge, is not known). The guest never asks
again by itself: ifupdown runs its DHCP client once. A reset boots it again and its DHCP client
asks anew while vagrant-libvirt is still waiting, so `vagrant up` goes on. Each VM is reset
at most once: a second failure is Vagrant's, with the consoles in its error."""
import re
import threading
from pathlib import Path

GAVE_UP = "Failed to start Raise network interfaces"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
POLL_SECONDS = 5


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
    """Reads the consoles of `names` every POLL_SECONDS; resets (reset(name)) a VM whose
    console says its DHCP client gave up. A console last written before the watch began is an
    earlier VM's and is not read."""

    def __init__(self, names, console, reset, echo, clock):
        self.names, self.console, self.reset_vm, self.echo = names, Path(console), reset, echo
        self.began = clock()
        self.reset = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False

    def _poll(self):
        while not self._stop.wait(POLL_SECONDS):
            self.check()

    def check(self):
        for name in self.names:
            log = self.console / (name + ".log")
            if name in self.reset or not log.is_file() or log.stat().st_mtime < self.began:
                continue
            if GAVE_UP in plain(log.read_text(errors="replace")):
                self.reset.append(name)
                self.echo("%s: its DHCP client gave up with no address (its console: \"%s\"); "
                          "resetting it once, so that it asks again while Vagrant waits"
                          % (name, GAVE_UP))
                try:
                    self.reset_vm(name)
                except Exception as error:  # Vagrant's own wait then fails with the consoles
                    self.echo("%s: the reset failed: %s" % (name, error))
