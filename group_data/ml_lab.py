"""Data for the ml_lab group of inventories/example.py (the top-level `inventory`)."""

# The lab keeps its venvs off the root filesystem's default place, on the larger /opt volume.
venv_path = "/opt/ml-lab/venv"
venv_owner = "mllab"

# Report distro ROCm packages, but remove the ones that would block amdgpu-install (the default, said out loud).
stray_policy = "report"
colliding_packages = "remove"

# The workstations have 2 TB disks: ask for room for two ROCm releases' worth of headroom.
min_free_disk_gb = 80
