"""An example fleet: the AMD GPU workstations of a small machine-learning lab. Data only — copy it for your fleet.

The top-level `inventory` points at this file, so in a fresh checkout these two are the same fleet:

    pyinfra inventory deploy.py --dry                 # what would change, host by host
    pyinfra inventories/example.py deploy.py --dry

Every key is described in the README's table of inventory variables (defaults in roles/pins.py). Group data is in the
top-level group_data/, where pyinfra looks for it (the directory pyinfra runs in): the whole lab's in
group_data/lab_fleet.py (how to log in), the ML workstations' in group_data/ml_lab.py. pyinfra loads group_data/ for
every inventory run from the checkout — the local test fleets' too — so it holds no all.py: data reaches a host only
through a group this fleet defines.
"""

# Every host of the lab: what they share (how to log in, how long to wait for apt) is group_data/lab_fleet.py.
lab_fleet = [
    "ws-ml-01.lab.example.org",
    "ws-ml-02.lab.example.org",
    "ws-ml-03.lab.example.org",
    "rf-07.lab.example.org",
]

# Ubuntu 24.04 workstations, one person each; the third is shared by two people and owns a venv of its own.
ml_lab = [
    ("ws-ml-01.lab.example.org", {"workstation_users": ["maria"]}),
    ("ws-ml-02.lab.example.org", {"workstation_users": ["tom"]}),
    (
        "ws-ml-03.lab.example.org",
        {"workstation_users": ["amira", "jonas"], "venv_owner": "amira", "venv_path": "/home/amira/venvs/rocm-fleet"},
    ),
]

# An Ubuntu 22.04 render box behind a jump port; ROCm 6.4 is still in use there, so 7.2.4 goes beside it.
render_farm = [
    (
        "rf-07.lab.example.org",
        {
            "ssh_port": 2222,
            "workstation_users": ["render"],
            "venv_owner": "render",
            "rocm_other_release": "side-by-side",
        },
    ),
]
