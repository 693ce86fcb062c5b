"""The mesh check, the last step of pre-flight: every node listens on its cluster address on
each fixed port the run's roles will listen on there, and every other node connects to each.
A wrong `address` or `cluster_interface`, or a port a firewall blocks between two nodes, then
fails in seconds, named by pair and port, before any cell, where it used to show as a cell
stalled for 90 s or more, once per cell. The ephemeral ports Gloo and ps-lite also use cannot
be tried this way (docs/reproducing.md, Firewall: allow all TCP between the nodes).

Nodes that share one address (the local cluster: every node on 127.0.0.1) have no network
between them to check. Each node runs the check with its own `python3`, no framework."""
import json
import shlex
import threading

PATIENCE = 6.0  # s a node keeps trying a peer's port: the nodes' checks start at once, not
# at the same instant (a Slurm job step, an SSH session), so a refusal is retried until then
CONNECT = 2.0  # s one attempt may take before it counts as unanswered
# On the node: check the interface holds the address (`ip -o addr`); listen on its ports;
# connect to every peer's ports, all at once, each retried until PATIENCE; keep accepting until
# every peer has connected to every port here (or PATIENCE + CONNECT + 1 s); print JSON.
SCRIPT = r"""
import json, select, socket, subprocess, sys, threading, time
me, iface, ports, peers, expected, patience, timeout = json.loads(sys.argv[1])
out = {"iface": None, "bind": [], "connect": []}
began = time.time()
names = [name for _, name in socket.if_nameindex()]
if iface not in names:
    out["iface"] = "%s is not an interface here (there are %s)" % (iface, ", ".join(names))
else:
    try:
        held = subprocess.run(["ip", "-o", "addr", "show", "dev", iface],
                              stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
        held = [w.split("/")[0] for a, w in zip(held, held[1:]) if a in ("inet", "inet6")]
        if me not in held:
            out["iface"] = "%s holds %s, not %s" % (iface, ", ".join(held) or "no address", me)
    except OSError:  # no `ip`: the interface exists, which is what can be told
        pass
listening = {}
for port in ports:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((me, port))
        sock.listen(64)
        listening[sock] = port
    except OSError as error:
        out["bind"].append([port, error.strerror])
def attempt(name, address, port):
    while True:
        try:
            socket.create_connection((address, port), timeout).close()
            return
        except socket.timeout:
            why = "no answer in %g s" % timeout
        except OSError as error:
            why = error.strerror
        if time.time() - began > patience:
            out["connect"].append([name, address, port, why])
            return
        time.sleep(0.2)
threads = [threading.Thread(target=attempt, args=peer) for peer in peers]
for thread in threads:
    thread.start()
accepted = dict.fromkeys(listening.values(), 0)
while time.time() < began + patience + timeout + 1 and (
        any(t.is_alive() for t in threads) or min(list(accepted.values()) + [expected]) < expected):
    for sock in select.select(list(listening), [], [], 0.2)[0]:
        sock.accept()[0].close()
        accepted[listening[sock]] += 1
for thread in threads:
    thread.join()
print(json.dumps(out))
"""
FIREWALL_FIX = ("allow TCP between the nodes' cluster addresses (docs/reproducing.md, "
                "Firewall), or check that `address` is on the network the other nodes reach")


def needed(nodes):
    """Whether the nodes have a network between them to check (more than one address)."""
    return len({node.host.address for node in nodes}) > 1


def check(ports):
    """ports: {node: set of ports it will listen on}. Problems, each naming the node pair, the
    port and the likely fix; [] when every node reached every port of every other."""
    nodes = list(ports)
    found, threads = {}, []
    for node in nodes:
        peers = [(other.name, other.host.address, port) for other in nodes if other is not node
                 for port in sorted(ports[other])]
        args = [node.host.address, node.host.cluster_interface, sorted(ports[node]), peers,
                len(nodes) - 1, PATIENCE, CONNECT]
        thread = threading.Thread(target=_run, args=(node, args, found))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    problems = []
    for node in nodes:
        problems += _problems(node, found.get(node.name))
    return problems


def _run(node, args, found):
    command = "python3 -c %s %s" % (shlex.quote(SCRIPT), shlex.quote(json.dumps(args)))
    result = node.run(command, check=False)
    try:
        found[node.name] = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        found[node.name] = {"error": (result.stderr or result.stdout).strip()[-300:]}


def _problems(node, out):
    if out is None or out.get("error") is not None:
        return ["%s: the mesh check did not run there (%s): it needs `python3` on the node"
                % (node.name, (out or {}).get("error") or "no output")]
    problems = []
    if out["iface"]:
        problems.append("%s: cluster_interface %s: the frameworks bind their traffic to it, "
                        "and it does not hold the node's address %s: set `cluster_interface` "
                        "to the interface holding it (`ip -br addr` on %s)" % (
                            node.name, out["iface"], node.host.address, node.name))
    for port, why in out["bind"]:
        problems.append("%s: cannot listen on %s:%d (%s): `address` must be one of the node's "
                        "own, and the port free" % (node.name, node.host.address, port, why))
    for name, address, port, why in out["connect"]:
        problems.append("%s -> %s: %s:%d: %s: %s" % (node.name, name, address, port, why,
                                                    FIREWALL_FIX))
    return problems
