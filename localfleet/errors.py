"""The one exception type localfleet raises for conditions a user can act on (its message is one line)."""


class FleetError(RuntimeError):
    """Something about the local fleet is wrong; the message names the host/file, what was tried, and the fix."""
