"""`invoke bench --network 50mbit,1gbit`: cells run at each link setting of the emulated
cluster, the links reshaped between settings; every record says its setting."""
from . import emulated as cluster
from contract.errors import UserError

_current = {"mbit": None}


def check(inv, network):
    """The list of settings asked for ([] for none); only on the emulated cluster, as root."""
    if not network:
        return []
    settings = [s.strip() for s in str(network).split(",") if s.strip()]
    for setting in settings:
        mbit(setting)  # a bad setting fails before anything runs
    if inv.path.resolve() != cluster.INVENTORY.resolve():
        raise UserError("--network reshapes the emulated cluster's links; inventory %r is not "
                        "it" % inv.name, "run `sudo -E invoke cluster.up`, then bench with "
                        "--inventory netns")
    cluster.require_root()
    cluster.read_state()
    return settings


def mbit(setting):
    return cluster.PRESETS.get(setting) or cluster.parse_rate(setting)


def link_mbits(inv, cells):
    """cell id -> the link rate it runs at: its setting, else the inventory's `link_mbit`."""
    default = inv.hosts[0].vars.get("link_mbit") if inv.hosts else None
    return {c.id: mbit(c.link) if c.link else default for c in cells}


def apply(cell):
    """Reshape before a cell whose setting differs from the links' current one."""
    if not cell.link:
        return
    rate = mbit(cell.link)
    if _current["mbit"] != rate:
        print("links -> %s (%g Mbit/s)" % (cell.link, rate), flush=True)
        cluster.reshape(rate)
        _current["mbit"] = rate
