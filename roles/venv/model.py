"""The venv stage's decisions, pure: is a requirement met by what is installed, does the venv need creating, and for
which platforms does the controller download wheels, what the model check adds to the venv. Whether the venv may live at
its path (who else could change it) is roles/debian/path_access.py, which preflight asks too.

Why not pyinfra's pip operations: its fact drops local version labels (`2.13.0+rocm7.2`), so `torch==2.13.0+rocm7.2`
looks unmet and is reinstalled on every run. Here requirements are compared with packaging's PEP 440 rules against
what `importlib.metadata` reports inside the venv.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from roles import pins

# The oldest glibc each legacy manylinux alias stands for (PEP 600), for x86_64 and i686.
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


@dataclass(frozen=True)
class HostPython:
    """The host's python3: what the venv will run, and so what the wheels must be built for."""

    version: str  # "3.11.2"
    glibc: str  # "2.36"
    machine: str  # "x86_64"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def tag(self) -> str:
        """A name for the wheel set this host needs, e.g. "cp311-manylinux_2_36_x86_64"."""
        return f"cp{self.minor.replace('.', '')}-manylinux_{self.glibc.replace('.', '_')}_{self.machine}"


@dataclass(frozen=True)
class VenvState:
    """What is in an existing venv (read as data by the host's python3: nothing of the venv is run)."""

    python: str  # "3.11.2", from pyvenv.cfg
    owner: str  # of the venv's directory
    packages: Mapping[str, str] = field(default_factory=dict)  # canonical name -> version
    foreign: str | None = None  # the first path in the venv not owned by the venv's owner (e.g. pip ran as root)
    # why it cannot be used as it is (no interpreter, no pyvenv.cfg version …); None: usable
    broken: str | None = None

    @property
    def minor(self) -> str:
        return ".".join(self.python.split(".")[:2])


def wheel_platforms(glibc: str, machine: str) -> tuple[str, ...]:
    """Every manylinux platform tag a host with this glibc accepts, newest first.

    `pip download --platform` takes tags literally (pip 23 expands only the legacy manylinux2014/2010 names), so the
    controller passes them all: manylinux_2_36_x86_64 … manylinux_2_5_x86_64 and the legacy aliases.
    """
    major, minor = (int(part) for part in glibc.split(".")[:2])
    if major != 2:
        raise ValueError(f"glibc {glibc}: only glibc 2.x is known to manylinux")
    tags = []
    for level in range(minor, 4, -1):
        tags.append(f"manylinux_2_{level}_{machine}")
        if machine in ("x86_64", "i686") and level in _LEGACY_MANYLINUX:
            tags.append(f"{_LEGACY_MANYLINUX[level]}_{machine}")
    return tuple(tags)


def model_check_requirements(verify_model: str) -> tuple[str, ...]:
    """What the model check (verify/checks/model.py) needs in the venv beside torch and bitsandbytes: none with
    verify_model off. pip resolves their own dependencies (huggingface-hub, tokenizers, safetensors, …)."""
    if verify_model == "off":
        return ()
    return (f"transformers=={pins.TRANSFORMERS_VERSION}", f"accelerate=={pins.ACCELERATE_VERSION}")


def requirement_met(spec: str, installed: Mapping[str, str]) -> bool:
    """Whether `spec` (e.g. "torch==2.13.0+rocm7.2") is met by the installed versions ({canonical name: version}).

    PEP 440: "==2.13.0" accepts 2.13.0+cpu (a local label is ignored when the specifier has none), "==2.13.0+rocm7.2"
    accepts only that build. A version that does not parse never meets anything.
    """
    requirement = Requirement(spec)
    have = installed.get(canonicalize_name(requirement.name))
    if have is None:
        return False
    try:
        return requirement.specifier.contains(Version(have), prereleases=True)
    except InvalidVersion:
        return False


def unmet(requirements: Sequence[str], installed: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(spec for spec in requirements if not requirement_met(spec, installed))


def describe_installed(requirements: Sequence[str], installed: Mapping[str, str]) -> str:
    """ "torch 2.13.0+cpu (torch==2.13.0), bitsandbytes 0.50.1 (bitsandbytes==0.50.1)" """
    parts = []
    for spec in requirements:
        name = Requirement(spec).name
        parts.append(f"{name} {installed.get(canonicalize_name(name), 'missing')} ({spec})")
    return ", ".join(parts)


@dataclass(frozen=True)
class VenvPlan:
    # "create"; "recreate" (the owner remakes it in place); "replace" (root removes it, then it is created: it is
    # another account's, or holds another account's files, which neither the owner may keep nor root may chown — a
    # recursive chown as root of a tree someone else could change is how files outside it change hands); or None.
    action: str | None
    reason: str


def plan_venv(path: str, state: VenvState | None, host_python: HostPython | None, owner: str) -> VenvPlan:
    """What to do about the venv directory itself (not its packages)."""
    if state is not None and state.owner != owner:
        return VenvPlan("replace", f"the venv at {path} belongs to {state.owner}, not {owner}: replacing it")
    if state is not None and state.foreign:
        return VenvPlan(
            "replace",
            f"{state.foreign} in the venv does not belong to {owner} (an interrupted run as "
            "another account?): replacing the venv",
        )
    if state is not None and state.broken:
        return VenvPlan("recreate", f"the venv at {path} is broken ({state.broken}): recreating it")
    if state is None:
        return VenvPlan("create", f"no venv at {path}")
    if host_python is not None and state.minor != host_python.minor:
        return VenvPlan(
            "recreate",
            f"the venv at {path} runs Python {state.python}, the host's python3 is "
            f"{host_python.version} (wheels are built per Python version): recreating it",
        )
    return VenvPlan(None, f"venv {path} exists (Python {state.python}, owner {owner})")
