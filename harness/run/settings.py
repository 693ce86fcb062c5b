"""Bounds of the watch that the environment may shorten or stretch, read when a cell is
prepared, not at import: the tests of stalls and of a dead controller shorten them
(DLBENCH_FROZEN_SECONDS, DLBENCH_LEASE_SECONDS) rather than wait out the defaults, which
are sized for a busy machine. Each has a floor below which the watch would mistake an
ordinary pause for a fault."""
import os

from contract.errors import UserError


def seconds(variable, default, floor):
    """The variable's value in seconds, or `default` where it is unset."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or value < floor:
        raise UserError("%s=%s is not a number of seconds of at least %g" % (variable, text, floor),
                        "set it to %g or more, or unset it for the default %g" % (floor, default))
    return value
