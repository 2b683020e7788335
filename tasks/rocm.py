"""Stage 3, ROCm: amdgpu-install's deb and apt lists, `amdgpu-install -y --usecase=rocm --no-dkms`, /opt/rocm, then
the workstation users and the venv's owner into render and video. Alone: pyinfra INVENTORY tasks/rocm.py"""

from roles.rocm.deploy import rocm_stage
from roles.settings import require_valid_inventory

require_valid_inventory()
rocm_stage()
