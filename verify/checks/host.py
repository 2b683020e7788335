"""The host as one run of the checks sees it: what was asked, one view of its files, its venv, and what several
checks need, computed once.

Every path of the host goes through `view` (one `FileSystemView` of `/`, or of the image under `--root`, for the
whole run: the linkage analysis, the strays' libraries, the versions and the venv share its caches), and every file
is opened through verify/safe_read.py. `shared(compute)` runs `compute(host)` the first time a check asks and keeps
the answer for the others: dpkg's packages (strays and versions), the strays report (its check, and the linkage
check's package names), the linkage's inputs (the linkage and maps checks, the report's facts), the runtime probe
(runtime, maps and NF4), NF4's results (NF4, and the model check, which runs only where NF4 passed).
`probe_account` is who runs the venv's code (checks/probe_account.py), chosen before any check runs.
`static_stopped` says why the static part did not finish (its time limit): what it did not compute is then not
computed afterwards, outside the limit; `runtime_blocked` says why the probe must not start.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from verify.checks.probe_account import ProbeAccount, probe_account
from verify.debian.dpkg import DpkgDatabaseError, DpkgPackage, read_status
from verify.ld.fsview import FileSystemView
from verify.question import Question
from verify.report.report import CheckResult, HostInfo
from verify.safe_read import read_text
from verify.stack.rocm_release import rocm_release
from verify.stack.venv_layout import find_venv
from verify.system.boot_id import boot_id

T = TypeVar("T")
STATIC_TIME_LIMIT = 30.0  # seconds; the static part takes well under one on a workstation (docs/performance.md)


@dataclass(frozen=True)
class CheckOptions(Question):
    """The question (verify/question.py), and how the run may answer it: time limits, the environment modelled."""

    timeout: float = 900.0  # seconds the runtime probe may take
    static_time_limit: float | None = STATIC_TIME_LIMIT  # None: no limit
    model_timeout: float = 600.0  # seconds the model probe may take
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def question(self) -> Question:
        return Question(**{spec.name: getattr(self, spec.name) for spec in fields(Question)})


class Host:
    def __init__(self, options: CheckOptions):
        """Raises venv_layout.VenvError for a --venv that is not a venv, rocm_release.UnknownRelease for an
        --expect-rocm this checkout has no release file for, probe_account.ProbeAccountError for a probe account that
        cannot be used (all before anything is checked)."""
        self.options = options
        self.release = rocm_release(options.expect_rocm)  # what the expected release is (releases/X.Y.Z.json)
        self.view = FileSystemView(str(options.root))
        self.venv = find_venv(options.venv, self.view)
        # Who runs the venv's code; None: nothing of it runs (--static-only).
        self.probe_account: ProbeAccount | None = (
            None if options.static_only else probe_account(options.probe_user, self.venv.root)
        )
        self._shared: dict[Callable[[Host], Any], Any] = {}
        self.static_stopped: str | None = None  # why the static part stopped before its end (its time limit)
        self.runtime_blocked: str | None = None  # why the runtime probe must not start (set by a static check)

    def shared(self, compute: Callable[[Host], T]) -> T:
        if compute not in self._shared:
            self._shared[compute] = compute(self)
        return self._shared[compute]

    def info(self) -> HostInfo:
        """What the report says about the machine (its OS from the analysed system's /etc/os-release)."""
        pretty = None
        try:
            text = read_text(self.view.local("/etc/os-release"), 64 << 10, errors="replace", follow=self.view.is_host)
            for line in text.splitlines():
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
        except OSError:
            pass
        return HostInfo(
            socket.gethostname(), pretty, platform.release(), platform.machine(), platform.python_version(), boot_id()
        )

    def request(self) -> Question:
        """What was asked, as the report states it."""
        return self.options.question

    @property
    def packages(self) -> tuple[DpkgPackage, ...] | None:
        """dpkg's installed packages, parsed once (the apt hook runs after every dpkg run, and the status file is a
        few MB on a desktop); None when there is no usable database — each check then says why it cannot tell."""
        return self.shared(_dpkg_packages)


def result(results: list[CheckResult], check_id: str) -> CheckResult | None:
    """The result of check `check_id` among `results` (for a check's facts)."""
    return next((r for r in results if r.id == check_id), None)


def _dpkg_packages(host: Host) -> tuple[DpkgPackage, ...] | None:
    try:
        return read_status(host.options.root)
    except DpkgDatabaseError:
        return None
