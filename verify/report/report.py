"""The verification report: one JSON document per host, versioned and checked against `report_schema.json`, and the
one type that both writes it (on the host) and reads it back (on the controller, in the apt hook).

Each check is a `CheckResult` with a status, a one-line reason a person can act on, and the evidence it rests on.
The report's verdict is the worst status; its reason is the reason of the first failing check in `PRIORITY` order
(the linkage trap first, because that is what the rest usually follows from). `Report.to_json()` is the document;
`Report.from_json(document)` is what every reader uses: it refuses, with one line (ReportError), whatever is not a
report of a schema version this checkout reads, and gives typed access to the parts readers look at — the facts the
fleet summary shows, each check, and the evidence of the linkage and strays checks (`linkage()`, `strays()`).

`judge_report` is the one rule for *whether a report proves a host passed*, used wherever that is decided — the
controller (roles/verification), its report history, the fleet summary, the demo's verdict, the apt hook's state, and
`verify check`'s own exit status (`exit_status_of`); `Report.judge()` and `Report.passed` apply it to a Report. A
report proves a pass only when it matches report_schema.json (verify/report/schema_check.py), its verdict is pass or
warn, no check failed, the verdict is the one its checks give, every check the verifier always runs is there, and —
where the caller knows them — it answers the question asked of this host (request, host name) and the verifier's exit
status is the one its verdict documents (0 for pass and warn, 1 for fail). Anything else is either an honest fail (a
trustworthy report whose verdict is fail) or proves nothing, with one line saying what was wrong and what to do.

This module only shapes and judges data; it runs nothing and reads no files (except the schema, on request).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify.question import REQUEST_FIELDS, Question, QuestionError, request_differences
from verify.report.host_input import inert_document

if TYPE_CHECKING:  # imported where it is used: reading or judging a report needs neither dpkg's nor the ELF reader
    from verify.debian.strays import StraysReport

SCHEMA_VERSION = 3
# What from_json reads. 2 added facts.kernel, facts.apt_pin, facts.environment, facts.boot_check and the GPUs'
# `integrated`/`work` (the checks kernel.*, apt.*, environment.*), and facts.probe_account (which account ran the
# venv's code); a version-1 report reads with those None.
# 3 added request.model and facts.model (the check model.*); older reports read with model "off" and no runs.
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
KIND = "rocm-fleet.verify-report"
SCHEMA_RESOURCE = "report_schema.json"
TOOL_NAME = "rocm-fleet verify"

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
STATUSES = (PASS, WARN, FAIL, SKIP)
SEVERITY = {SKIP: 0, PASS: 0, WARN: 1, FAIL: 2}
# Where a ROCm library of the process model comes from when it is neither torch/lib nor /opt/rocm-X.Y.Z.
ELSEWHERE = "elsewhere"

# Which failure explains a host best, when several fail: the loader trap, then what was installed, then runtime.
PRIORITY = (
    "linkage.static",
    "versions.rocm",
    "versions.torch",
    "versions.bitsandbytes",
    "environment",  # the login's environment breaks what the clean model passed
    "apt",
    "strays",
    "kernel.driver",  # no amdgpu: every runtime check below fails for this reason
    "runtime.torch",
    "runtime.bnb_library",
    "runtime.devices",
    "runtime.maps",
    "nf4",
    "model",  # the workload on top of NF4: it runs only where NF4 passed
    "kernel",
)


class ReportError(ValueError):
    """A document that is not a report this checkout reads; the message is one line saying why."""


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. `reason` is one line; `evidence` is JSON-able data that supports it."""

    id: str
    title: str
    status: str
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        if "\n" in self.reason:
            # A reason is what the summary and pyinfra print on one line.
            object.__setattr__(self, "reason", " ".join(self.reason.split()))

    @property
    def line(self) -> str:
        """ "FAIL linkage.static: …" — how the summary and the demo name a check that did not pass."""
        return f"{self.status.upper()} {self.id}: {self.reason}"


# --- what the fleet summary shows (the report's "facts") -------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str | None
    arch: str | None
    supported: bool
    integrated: bool | None = None  # an APU's GPU (schema 2; None: not known)
    work: bool = True  # NF4 runs on it: not an integrated GPU beside a discrete one (schema 2)


@dataclass(frozen=True)
class Nf4Run:
    device: str
    status: str
    roundtrip_mean_abs_error: float | None
    gpu_pass: bool = False
    # The 4-bit matmul paths (None in a report written before they were measured):
    fused_rows: str | None = None  # the M values bitsandbytes' fused kernel ran at, "1–8"; "": none (a CPU)
    kernel_error_of_bound: float | None = None  # the worst kernel error as a share of its bound (< 1 passes)


@dataclass(frozen=True)
class ModelRun:
    """One device's 4-bit causal LM (check model.<device>): what the fleet summary shows."""

    device: str
    status: str
    footprint_ratio: float | None  # 4-bit footprint / 16-bit footprint
    logits_cosine: float | None  # None: the 16-bit reference was not compared (it does not fit the GPU)
    tokens_per_s: float | None
    gpu_pass: bool = False
    fits_4bit: bool | None = None  # a checkpoint (PATH) on a GPU: does it fit this GPU's memory; None: not asked
    fits_16bit: bool | None = None


@dataclass(frozen=True)
class StatusLine:
    status: str
    reason: str
    short: str | None = None  # the same in a few words, for the summary


@dataclass(frozen=True)
class StraysFacts:
    count: int
    packages: tuple[str, ...]
    binding_risk: tuple[str, ...]


@dataclass(frozen=True)
class KernelFacts:
    """The kernel side of the GPU (check kernel.*): what the summary and drift show."""

    running: str | None
    next_boot: str | None
    reboot_pending: bool
    amdgpu_loaded: bool | None
    running_has_amdgpu: bool | None
    next_boot_has_amdgpu: bool | None
    installed: tuple[str, ...] = ()
    without_amdgpu: tuple[str, ...] = ()


@dataclass(frozen=True)
class BootCheckFacts:
    """The boot-time check's last result on the host (verify/report/boot_state.py), as the report carries it."""

    boot_id: str
    kernel: str
    checked_at: str
    verdict: str
    reason: str
    previous_kernel: str | None = None


@dataclass(frozen=True)
class ProbeAccountFacts:
    """The account that ran the runtime probe — the venv's code (verify/checks/runtime.py `ProbeAccount`)."""

    user: str
    uid: int
    groups: tuple[str, ...]  # every group it ran with (render and video reach the GPU), by name


@dataclass(frozen=True)
class Facts:
    rocm: str | None
    torch: str | None
    torch_hip: str | None
    bitsandbytes: str | None
    bnb_library: str | None
    gpus: tuple[Gpu, ...] | None  # None: not probed
    device_mode: str  # "gpu" | "cpu" | "none"
    linkage: StatusLine | None
    strays: StraysFacts | None  # None: not checked
    nf4: tuple[Nf4Run, ...]
    # Schema 2 (None in a version-1 report, or when the check did not run):
    kernel: KernelFacts | None = None
    apt_pin: StatusLine | None = None
    environment: StatusLine | None = None
    boot_check: BootCheckFacts | None = None
    probe_account: ProbeAccountFacts | None = None  # None: nothing of the venv ran (static only, or not started)
    # Schema 3 (empty in older reports, and when the model check did not run):
    model: tuple[ModelRun, ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> Facts:
        facts = _record(cls, data, "facts")
        gpus = facts.gpus
        kernel = facts.kernel
        if kernel is not None:
            kernel = _record(KernelFacts, kernel, "facts.kernel")
            kernel = replace(
                kernel,
                installed=_strings(kernel.installed, "facts.kernel.installed"),
                without_amdgpu=_strings(kernel.without_amdgpu, "facts.kernel.without_amdgpu"),
            )
        return replace(
            facts,
            gpus=None if gpus is None else tuple(_record(Gpu, g, "facts.gpus[]") for g in _list(gpus, "facts.gpus")),
            linkage=None if facts.linkage is None else _record(StatusLine, facts.linkage, "facts.linkage"),
            strays=None if facts.strays is None else _strays_facts(facts.strays),
            nf4=tuple(_record(Nf4Run, run, "facts.nf4[]") for run in _list(facts.nf4, "facts.nf4")),
            kernel=kernel,
            apt_pin=None if facts.apt_pin is None else _record(StatusLine, facts.apt_pin, "facts.apt_pin"),
            environment=(
                None if facts.environment is None else _record(StatusLine, facts.environment, "facts.environment")
            ),
            boot_check=(
                None if facts.boot_check is None else _record(BootCheckFacts, facts.boot_check, "facts.boot_check")
            ),
            probe_account=None if facts.probe_account is None else _probe_account(facts.probe_account),
            model=tuple(_record(ModelRun, run, "facts.model[]") for run in _list(facts.model, "facts.model")),
        )


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return value if isinstance(value, tuple) else tuple(str(item) for item in _list(value, where))


def _probe_account(data: Any) -> ProbeAccountFacts:
    found = _record(ProbeAccountFacts, data, "facts.probe_account")
    return replace(found, groups=_strings(found.groups, "facts.probe_account.groups"))


def _strays_facts(data: Any) -> StraysFacts:
    found = _record(StraysFacts, data, "facts.strays")
    return replace(
        found,
        packages=tuple(_list(found.packages, "facts.strays.packages")),
        binding_risk=tuple(_list(found.binding_risk, "facts.strays.binding_risk")),
    )


# --- the typed view of the linkage check's evidence ------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedObject:
    """A ROCm library in the predicted process: where it was found and what it is."""

    path: str
    requested_as: str
    real_path: str | None = None
    via: str | None = None
    origin: str | None = None  # "torch/lib" | "ROCm X.Y.Z" | ELSEWHERE
    package: str | None = None  # "librocm-smi64-1 6.1.2-1 (distro)"


@dataclass(frozen=True)
class NeededLibrary:
    """One NEEDED entry of bitsandbytes' library and what the loader did with it."""

    name: str
    outcome: str  # verify.ld.image's outcomes: "loaded", "already loaded", "not found", …
    path: str | None = None
    how: str | None = None
    origin: str | None = None


@dataclass(frozen=True)
class LinkageEvidence:
    rocm_objects: tuple[ResolvedObject, ...]
    bnb_needed: tuple[NeededLibrary, ...]
    missing: tuple[str, ...]  # one line each, the library's name first
    findings: tuple[str, ...]


# --- the report ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostInfo:
    hostname: str
    os: str | None
    kernel: str
    machine: str
    python: str
    boot_id: str | None = None  # the boot it ran in (verify/system/boot_id.py); None in older reports


@dataclass(frozen=True)
class Report:
    generated_at: str
    tool_version: str
    host: HostInfo
    request: Question  # written as its to_request(); expect_amd_repo since schema 2, model since 3
    facts: Facts
    verdict: str
    reason: str
    checks: tuple[CheckResult, ...]
    # The document a report was read from: written back as it was read (a newer verifier's extra fields included).
    document: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def judge(self, **known: Any) -> Judgement:
        """`judge_report` of this report's document (`known`: the exit status, host name and request, when known)."""
        return judge_report(self.to_json(), **known)

    @cached_property
    def passed(self) -> bool:
        """It proves a pass by the one rule, as far as the report alone can tell (judge() with what else is known):
        what the controller and the apt hook keep as a host's last passing report, the baseline of its drift."""
        return self.judge().passed

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    @property
    def exit_status(self) -> int:
        """What `verify check` exits with for this report (EXIT_STATUS: 0 pass and warn, 1 fail)."""
        return EXIT_STATUS.get(self.verdict, 1)

    def check(self, check_id: str) -> CheckResult | None:
        return next((c for c in self.checks if c.id == check_id), None)

    @property
    def problems(self) -> tuple[CheckResult, ...]:
        """The failing and warning checks, in report order."""
        return tuple(c for c in self.checks if c.status in (FAIL, WARN))

    def linkage(self) -> LinkageEvidence | None:
        """The linkage check's process model; None when the report has none (the check stopped before it, e.g.
        bitsandbytes not installed). Raises ReportError when the evidence is not shaped like this verifier's."""
        check = self.check("linkage.static")
        evidence = check.evidence if check else {}
        if "rocm_objects" not in evidence:
            return None
        where = "linkage.static's evidence"
        return LinkageEvidence(
            rocm_objects=tuple(_record(ResolvedObject, o, where) for o in _list(evidence["rocm_objects"], where)),
            bnb_needed=tuple(_record(NeededLibrary, n, where) for n in _list(evidence.get("bnb_needed") or [], where)),
            missing=tuple(str(line) for line in _list(evidence.get("missing") or [], where)),
            findings=tuple(str(line) for line in _list(evidence.get("findings") or [], where)),
        )

    def strays(self) -> StraysReport | None:
        """The strays check's report; None when the check could not read dpkg's database. Raises ReportError when
        the evidence is not shaped like this verifier's."""
        from verify.debian.strays import SCHEMA as STRAYS_SCHEMA
        from verify.debian.strays import StraysReport

        check = self.check("strays")
        evidence = check.evidence if check else {}
        if evidence.get("schema") != STRAYS_SCHEMA:
            return None
        try:
            return StraysReport.from_json(dict(evidence))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ReportError(f"the strays check's evidence is not a strays report ({error!r})") from None

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-able dict (the shape `report_schema.json` describes)."""
        if self.document is not None:
            return dict(self.document)
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "generated_at": self.generated_at,
            "tool": {"name": TOOL_NAME, "version": self.tool_version},
            "host": _to_json(self.host),
            "request": self.request.to_request(),
            "facts": _to_json(self.facts),
            "verdict": self.verdict,
            "reason": self.reason,
            "checks": [_to_json(c) for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Any) -> Report:
        """The report in `data` (a parsed JSON document); ReportError with one line when it is not one. Its text is made
        inert first (verify/report/host_input.py): whatever reads a report from here on prints no control sequence."""
        if not isinstance(data, Mapping) or data.get("kind") != KIND:
            raise ReportError("not a rocm-fleet report")
        if data.get("schema_version") not in SUPPORTED_SCHEMA_VERSIONS:
            raise ReportError(
                f"report schema_version {data.get('schema_version')!r} is not one this checkout reads "
                f"({', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}) — update the checkout"
            )
        data = inert_document(dict(data))
        _require(data, ("generated_at", "tool", "host", "request", "facts", "verdict", "reason", "checks"), "report")
        checks = tuple(_check(c) for c in _list(data["checks"], "checks"))
        if not checks:
            raise ReportError("the report has no checks")
        if data["verdict"] not in STATUSES:
            raise ReportError(f"verdict {data['verdict']!r} is not one of {', '.join(STATUSES)}")
        tool = data["tool"] if isinstance(data["tool"], Mapping) else {}
        return cls(
            generated_at=str(data["generated_at"]),
            tool_version=str(tool.get("version")),
            host=_record(HostInfo, data["host"], "host"),
            request=_request(data["request"]),
            facts=Facts.from_json(data["facts"]),
            verdict=data["verdict"],
            reason=str(data["reason"]),
            checks=checks,
            document=data,
        )


def _request(data: Any) -> Question:
    """The question a report's `request` states, its fields of the JSON types the question's fields take."""
    if not isinstance(data, Mapping):
        raise ReportError("request is not an object")
    for name, allowed in _request_types().items():
        if name in data and not _holds(data[name], allowed):
            expected = " or ".join(dict.fromkeys(map(_json_name, allowed)))
            raise ReportError(f"request.{name} is {_json_name(data[name])}, not {expected}")
    try:
        return Question.from_request(data)
    except QuestionError as error:
        raise ReportError(str(error)) from None


@cache
def _request_types() -> dict[str, tuple[type, ...]]:
    hints = typing.get_type_hints(Question)
    return {name: _plain_types(str if hints[name] is Path else hints[name]) for name in REQUEST_FIELDS}


def _check(data: Any) -> CheckResult:
    found = _record(CheckResult, data, "checks[]")
    if not isinstance(data.get("evidence"), Mapping):
        raise ReportError(f"check {found.id}: evidence is not an object")
    return found


def verdict_of(checks: Iterable[CheckResult]) -> str:
    return _worst(check.status for check in checks)


# The checks every report has (verify/commands/check.py always runs them): without them a report proves nothing.
STATIC_CHECK_IDS = ("linkage.static", "versions.rocm", "versions.torch", "versions.bitsandbytes", "strays")
# … and a report that is not static-only and passes has the runtime ones too (a failing one may stop at
# runtime.torch: the probe did not run or import torch failed), and at least one NF4 run ("nf4" or "nf4.<device>");
# when the model check was asked for (request.model), at least one of it ("model" or "model.<device>") as well.
RUNTIME_CHECK_IDS = ("runtime.torch", "runtime.devices", "runtime.bnb_library", "runtime.maps")
EXIT_STATUS = {PASS: 0, WARN: 0, FAIL: 1}  # what `verify check` exits with for each verdict (README, check.py)
IN_PROCESS = "in-process"  # judge_report(exit_status=IN_PROCESS): the report was not read from a verifier process
RERUN_FIX = (
    "run tasks/verify.py again from this checkout (it uploads this checkout's verifier); if it happens again, "
    "the verifier on the host is damaged or not this checkout's"
)


@dataclass(frozen=True)
class Judgement:
    """Whether a report proves the host passed. `problem` (one line, with `fix`) when the report proves nothing."""

    passed: bool
    problem: str | None = None
    fix: str | None = None

    @property
    def trustworthy(self) -> bool:
        """The report is a real answer of this verifier to the question asked (pass or fail)."""
        return self.problem is None

    def line(self) -> str:
        return f"{self.problem} — {self.fix}" if self.problem else ""


def exit_status_of(report: Mapping[str, Any]) -> int:
    """The exit status `verify check` documents for the report's verdict."""
    return EXIT_STATUS.get(report.get("verdict"), 1)


def judge_report(
    report: Any,
    *,
    exit_status: int | str | None = IN_PROCESS,
    hostname: str | None = None,
    request: Mapping[str, Any] | None = None,
) -> Judgement:
    """The one rule (see the module docstring). `exit_status`: the verifier's, None when it never came, IN_PROCESS
    when there was no verifier process (the apt hook's own report, a report kept on disk). `hostname`, `request`: what
    the host says its name is and what was asked of it, when the caller knows."""
    error = _schema_validator().first_error(report)
    if error is not None:
        return Judgement(False, f"the report does not match verify/report/report_schema.json ({error})", RERUN_FIX)
    statuses = [check["status"] for check in report["checks"]]
    verdict, worst = report["verdict"], _worst(statuses)
    if verdict != worst:
        odd = next((c for c in report["checks"] if c["status"] == worst), None)
        because = f"check {odd['id']} is {worst}" if odd else "no check has that status"
        return Judgement(
            False, f"the report's verdict {verdict!r} is not what its checks give ({worst!r}: {because})", RERUN_FIX
        )
    ids = [check["id"] for check in report["checks"]]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        return Judgement(False, f"the report lists check(s) {', '.join(twice)} more than once", RERUN_FIX)
    required = _required_checks(report)
    missing = [i for i in required if i not in ids]
    if missing:
        return Judgement(
            False, f"the report lacks check(s) {', '.join(missing)} that the verifier always runs", RERUN_FIX
        )
    # Only the maps comparison may be skipped (nothing to compare); a pass resting on a skipped check is no pass.
    skipped = [
        c["id"] for c in report["checks"] if c["status"] == SKIP and c["id"] in required and c["id"] != "runtime.maps"
    ]
    if skipped and verdict != FAIL:
        return Judgement(False, f"the report passes with check(s) {', '.join(skipped)} skipped", RERUN_FIX)
    if request is not None:
        wrong = request_differences(report["request"], request)
        if wrong:
            return Judgement(False, f"the report answers another question: {', '.join(wrong)}", RERUN_FIX)
    if hostname is not None and report["host"]["hostname"] != hostname:
        return Judgement(
            False,
            f"the report is from host {report['host']['hostname']!r}, this host says it is {hostname!r}",
            "check this host's address in the inventory, then " + RERUN_FIX,
        )
    if exit_status != IN_PROCESS:
        documented = EXIT_STATUS[verdict]
        if exit_status is None:
            return Judgement(
                False,
                "the verifier's exit status never came back (it or the connection died before the end)",
                RERUN_FIX,
            )
        if exit_status != documented:
            return Judgement(
                False, f"the verifier exited {exit_status}, but a {verdict!r} report means exit {documented}", RERUN_FIX
            )
    return Judgement(verdict in (PASS, WARN))


def report_passed(report: Any, **known: Any) -> bool:
    """`judge_report(report, **known).passed`: what the controller and the apt hook keep as a host's last passing
    report, the baseline its drift is stated from."""
    return judge_report(report, **known).passed


def _worst(statuses: Iterable[str]) -> str:
    worst = PASS
    for status in statuses:
        if SEVERITY[status] > SEVERITY[worst]:
            worst = status
    return worst


def _required_checks(report: Mapping[str, Any]) -> list[str]:
    required = list(STATIC_CHECK_IDS)
    if not report["request"].get("static_only"):
        required.append(RUNTIME_CHECK_IDS[0])
        if report["verdict"] != FAIL:
            required += RUNTIME_CHECK_IDS[1:]
            for check_id in ("nf4", "model"):
                if check_id == "model" and report["request"].get("model", "off") == "off":
                    continue
                if not any(c["id"] == check_id or c["id"].startswith(check_id + ".") for c in report["checks"]):
                    required.append(check_id)
    return required


@lru_cache(maxsize=1)
def _schema_validator():
    from verify.report.schema_check import Validator

    return Validator(load_schema())


def check_priority(check_id: str) -> int:
    """How telling a failure of this check is (lower: more; the headline's order, PRIORITY)."""
    for index, prefix in enumerate(PRIORITY):
        if check_id == prefix or check_id.startswith(prefix + "."):
            return index
    return len(PRIORITY)


def _priority(check: CheckResult) -> int:
    return check_priority(check.id)


def headline(checks: Iterable[CheckResult]) -> str:
    """The one line that explains the verdict: the most telling failure (and how many more), else a pass line."""
    checks = list(checks)
    failed = sorted((c for c in checks if c.status == FAIL), key=_priority)
    if failed:
        more = f"; {len(failed) - 1} more check(s) failed" if len(failed) > 1 else ""
        return f"{failed[0].id}: {failed[0].reason}{more}"
    warned = sorted((c for c in checks if c.status == WARN), key=_priority)
    if warned:
        more = f"; {len(warned) - 1} more warning(s)" if len(warned) > 1 else ""
        return f"passed with warnings — {warned[0].id}: {warned[0].reason}{more}"
    return f"all {sum(1 for c in checks if c.status == PASS)} checks passed"


def build_report(
    *,
    host: HostInfo,
    request: Question,
    facts: Facts,
    checks: list[CheckResult],
    generated_at: str,
    tool_version: str,
) -> Report:
    """The report of `checks`, with its verdict and one-line reason."""
    return Report(generated_at, tool_version, host, request, facts, verdict_of(checks), headline(checks), tuple(checks))


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the report, read from the package (a checkout's, or the installed verifier's)."""
    from importlib import resources

    return json.loads(resources.files(__package__).joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8"))


# --- records from and to JSON ----------------------------------------------------------------------------------------


def _require(data: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    missing = [key for key in keys if key not in data]
    if missing:
        raise ReportError(f"{where} has no {', '.join(repr(key) for key in missing)}")


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise ReportError(f"{where} is not a list")
    return value


def _record(cls, data: Any, where: str):
    """A dataclass record from a JSON object: every field without a default must be there; others may be missing.
    Keys it does not know are left out (they stay in Report.document)."""
    if not isinstance(data, Mapping):
        raise ReportError(f"{where} is not an object")
    known = fields(cls)
    _require(data, (f.name for f in known if f.default is MISSING and f.default_factory is MISSING), where)
    for name, allowed in _json_types(cls).items():
        if name in data and not _holds(data[name], allowed):
            expected = " or ".join(dict.fromkeys(map(_json_name, allowed)))
            raise ReportError(f"{where}.{name} is {_json_name(data[name])}, not {expected}")
    try:
        return cls(**{f.name: data[f.name] for f in known if f.name in data})
    except ValueError as error:  # CheckResult's own check of its status
        raise ReportError(f"{where}: {error}") from None


_JSON_NAMES = {str: "a string", bool: "true or false", int: "a number", float: "a number", type(None): "null"}


def _holds(value: Any, allowed: tuple[type, ...]) -> bool:
    """Whether a JSON value is of one of the `allowed` types (true and false are not numbers here)."""
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed)


def _json_name(value: Any) -> str:
    """How a JSON value (or a type of one) is named in a line: "a string", "a number", "a list" …"""
    kind = value if isinstance(value, type) else type(value)
    return _JSON_NAMES.get(kind) or {dict: "an object", list: "a list"}.get(kind, kind.__name__)


@cache
def _json_types(cls) -> dict[str, tuple[type, ...]]:
    """The JSON types each plain field of a record may hold (str, numbers, bools, None); fields holding records,
    lists or objects are left to their own readers."""
    hints = typing.get_type_hints(cls)
    return {f.name: allowed for f in fields(cls) if (allowed := _plain_types(hints[f.name]))}


def _plain_types(hint: Any) -> tuple[type, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        parts = [_plain_types(arg) for arg in typing.get_args(hint)]
        return () if not all(parts) else tuple(kind for part in parts for kind in part)
    if hint is float:
        return (int, float)
    return (hint,) if hint in (str, bool, int, type(None)) else ()


def _to_json(value: Any) -> Any:
    """Plain JSON types only: records become objects (their fields in order), tuples lists, mappings dicts, other
    objects their str()."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_to_json(v) for v in items]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
