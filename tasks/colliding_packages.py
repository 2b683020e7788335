"""Stage 2, colliding packages: remove (or, with colliding_packages: stop, refuse) distro packages whose versions sort
above AMD's and would block amdgpu-install. Alone: pyinfra INVENTORY tasks/colliding_packages.py"""

from roles.colliding_packages.deploy import colliding_packages
from roles.settings import require_valid_inventory

require_valid_inventory()
colliding_packages()
