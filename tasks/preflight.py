"""Stage 1, preflight: supported OS, an AMD GPU (unless gpu_required: False), free disk, the accounts the deploy
uses. Changes nothing; an unfit host stops with one line. Alone: pyinfra INVENTORY tasks/preflight.py"""

from roles.preflight.deploy import preflight
from roles.settings import require_valid_inventory

require_valid_inventory()
preflight()
