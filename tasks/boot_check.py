"""Stage: the boot-time re-verification — `pyinfra INVENTORY tasks/boot_check.py` (also a stage of deploy.py).

Installs rocm-fleet-boot-check.service on each host: once per boot whose boot id or kernel changed it runs the full
check (the kernel's amdgpu, linkage, runtime and NF4) and keeps the result for tasks/verify.py. `boot_check: False`
removes it.
"""

from roles.boot_check.deploy import boot_check
from roles.settings import require_valid_inventory

require_valid_inventory()
boot_check()
