"""Stage: verify each workstation — `pyinfra INVENTORY tasks/verify.py` (also the last stage of deploy.py).

Changes nothing on the hosts but the installed verifier; writes reports/<host>.json and the fleet summary
(reports/summary.md, reports/summary.html) on the controller. Exit code 1 when any host failed a check.
"""

from roles.settings import require_valid_inventory
from roles.verification.deploy import verify

require_valid_inventory()
verify()
