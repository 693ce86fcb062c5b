"""One decision for every worker of a synchronous system-mode: whether to stop timing.

In the verdict size each worker judges from its own steps whether the mean step is known
well enough (bench/common/loop.py), but the workers of a synchronous mode must stop at the same
step, or the others wait in a collective forever. At each check every worker sends its vote to
worker 0, which answers all: stop only when every worker voted to stop. A plain TCP exchange of
one byte each way per check, beside the framework's own traffic and the same for every
framework (their collective APIs differ between the paper's versions and today's).

The same channel is tensorflow-sync's barrier in every profile (barrier()): around the
calibration (in turn or at once), the profiled steps, and before the workers leave. A
TensorFlow all-reduce as the last barrier let a worker leave while its peer still pulled the
last buffer from it ("Collective ops is aborted by: Socket closed"); a TCP exchange is
complete on both sides when either returns from it.
"""
import socket
import time

_CHANNELS = {}


def channel(config):
    """This process's one Agreement for config's agree_address (None where it has none): the
    stop rule and the barriers share it, since worker 0 can listen on the port only once."""
    address = config.get("agree_address")
    if not address:
        return None
    if address not in _CHANNELS:
        _CHANNELS[address] = Agreement(address, config["rank"], config["world_size"],
                                       config["collective_timeout"])
    return _CHANNELS[address]


class Agreement(object):
    """Worker 0 listens on `address` (host:port, its own cluster address); the others
    connect to it at the first vote. `timeout`: seconds to wait for a peer."""

    def __init__(self, address, rank, world_size, timeout):
        host, port = address.rsplit(":", 1)
        self.address = (host, int(port))
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self.peers = None
        self.server = None
        if rank == 0 and world_size > 1:
            self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.server.bind(self.address)
            self.server.listen(world_size)
            self.server.settimeout(timeout)

    def vote(self, done):
        """True when every worker's `done` is true; the same answer on every worker."""
        if self.world_size < 2:
            return bool(done)
        if self.peers is None:
            self.peers = self._connect()
        if self.rank == 0:
            votes = [bool(done)] + [_receive(p) for p in self.peers]
            answer = all(votes)
            for peer in self.peers:
                peer.sendall(b"1" if answer else b"0")
            return answer
        (leader,) = self.peers
        leader.sendall(b"1" if done else b"0")
        return _receive(leader)

    def barrier(self):
        """Returns once every worker has called it: a vote that nobody loses."""
        self.vote(True)

    def _connect(self):
        if self.rank == 0:
            peers = [self.server.accept()[0] for _ in range(self.world_size - 1)]
        else:
            peers = [_dial(self.address, self.timeout)]
        for peer in peers:
            peer.settimeout(self.timeout)
            peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return peers

    def close(self):
        for sock in (self.peers or []) + ([self.server] if self.server else []):
            sock.close()


def _dial(address, timeout):
    """Worker 0 may not listen yet: retry until `timeout`."""
    deadline = time.time() + timeout
    while True:
        try:
            return socket.create_connection(address, timeout=timeout)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def _receive(sock):
    byte = sock.recv(1)
    if not byte:
        raise ConnectionError("a worker left before the stop decision")
    return byte == b"1"
