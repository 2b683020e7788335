"""What every stage may ask of a Debian or Ubuntu host, in one place: which OS it is and what AMD's packages it takes
(os_support.py), which ROCm it has (installed_rocm.py), what dpkg has installed and what apt would remove
(packages.py), who can write the directories above the venv (path_access.py), those facts as pyinfra reads them
(facts.py), and apt commands that wait for the dpkg lock (apt_commands.py)."""
