"""Stage 5 alone: report (or, with `stray_policy: remove`, purge) stray distro ROCm packages.

pyinfra inventory tasks/strays.py
"""

from roles.settings import require_valid_inventory
from roles.strays.deploy import strays

require_valid_inventory()
strays()
