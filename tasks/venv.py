"""Stage 4 alone: python3-venv, the venv with torch and bitsandbytes (from the offline wheelhouse when configured).

pyinfra inventory tasks/venv.py
"""

from roles.settings import require_valid_inventory
from roles.venv.deploy import venv

require_valid_inventory()
venv()
