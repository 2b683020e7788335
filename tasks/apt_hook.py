"""Stage: the apt hook — `pyinfra INVENTORY tasks/apt_hook.py` (also a stage of deploy.py).

Installs /etc/apt/apt.conf.d/80rocm-fleet-verify on each host: after every dpkg run it re-checks linkage and stray
distro ROCm packages and warns in apt's output when something got worse. `apt_hook: False` removes it.
"""

from roles.apt_hook.deploy import apt_hook
from roles.settings import require_valid_inventory

require_valid_inventory()
apt_hook()
