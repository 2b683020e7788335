"""An example fleet: the AMD GPU workstations of a small machine-learning lab. Data only — copy it for your fleet.

    pyinfra inventory/example.py deploy.py --dry     # what would change, host by host
    pyinfra inventory/example.py deploy.py           # provision

Every key is described in the README's table of inventory variables (defaults in roles/pins.py). Fleet-wide data is
in group_data/all.py (how to log in), the lab's in group_data/ml_lab.py.
"""

# Ubuntu 24.04 workstations, one person each; the third is shared by two people and owns a venv of its own.
ml_lab = [
    ("ws-ml-01.lab.example.org", {"workstation_users": ["maria"]}),
    ("ws-ml-02.lab.example.org", {"workstation_users": ["tom"]}),
    ("ws-ml-03.lab.example.org", {"workstation_users": ["amira", "jonas"], "venv_owner": "amira",
                                  "venv_path": "/home/amira/venvs/rocm-fleet"}),
]

# An Ubuntu 22.04 render box behind a jump port; ROCm 6.4 is still in use there, so 7.2.4 goes beside it.
render_farm = [
    ("rf-07.lab.example.org", {"ssh_port": 2222, "workstation_users": ["render"], "venv_owner": "render",
                               "rocm_other_release": "side-by-side"}),
]
