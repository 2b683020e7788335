"""Task: the fleet's status without re-running anything — `pyinfra INVENTORY tasks/status.py`.

Reads what each host already keeps (the last verification report, the apt hook's and the boot check's last results)
in one SSH round trip per host, changes nothing anywhere, and writes reports/status.md and reports/status.html: the
same summary as a verification run, each host "as of" its results. Unreachable hosts are a row.
"""

from roles.settings import require_valid_inventory
from roles.status.deploy import status

require_valid_inventory()
status()
