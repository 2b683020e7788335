"""What of the running system decides whether the GPU still works after the next boot or login: the kernel's amdgpu
driver (`kernel.py`, `modprobe.py`) and the environment a user's Python starts with (`environment.py`). Files are
read as hostile input (`textfiles.py`); nothing is executed."""
