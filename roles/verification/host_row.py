"""One host's row of the fleet summary (pure): from its outcome — its report, the later results the status task read,
or why there is none — to the verdict, the finding it rests on, every other finding once, and the short cells.

One rule: a host passes only on a report that proves it (verify/report/report.py `judge_report`, the rule the
verification stage applies): a report that proves nothing leaves its host NOT VERIFIED, saying why. Results newer than
the report that ran the static checks only (the apt hook's, read by the status task: `later`) can make the verdict
worse, never better; kept files that could not be used (`unusable`) leave the host NOT VERIFIED; what those results
cannot see (`unseen`: packages changed since, an earlier boot, a stale result) makes a pass a WARN. summary.py groups
the rows of a fleet and writes the Markdown and the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from verify.report.report import FAIL, PASS, WARN, Report, check_priority

VERIFIED, UNREACHABLE, NOT_VERIFIED = "verified", "unreachable", "not verified"
COLUMNS = (
    "Host",
    "Verdict",
    "Check",
    "OS",
    "ROCm",
    "torch",
    "bitsandbytes",
    "GPUs (arch)",
    "Kernel",
    "Linkage",
    "Strays",
    "NF4 error",
    "4-bit model",
    "As of",
)
NONE = "—"
LABEL_MARK = "†"


@dataclass(frozen=True)
class Finding:
    """One thing a host's results say is wrong: a failing or warning check, a drift line, an unusable kept file."""

    status: str  # "FAIL" | "WARN" | "DRIFT" | "NOT VERIFIED"
    text: str
    check: str | None = None
    sources: tuple[str, ...] = ()  # where it was seen, when more than one run is read (the status task)

    @property
    def key(self) -> tuple[str, str | None, str]:
        return self.status, self.check, self.text

    @property
    def line(self) -> str:
        """ "FAIL linkage.static: …", "DRIFT worse since …", as the verifier and the run's output say them."""
        return f"{self.status} {self.check}: {self.text}" if self.check else f"{self.status} {self.text}"

    @property
    def rank(self) -> tuple[int, int]:
        order = {"FAIL": 0, "NOT VERIFIED": 1, "WARN": 2}.get(self.status, 3)
        return order, check_priority(self.check) if self.check else 99


@dataclass(frozen=True)
class Later:
    """A result newer than the host's report that ran the static checks only (the apt hook's, read by the status
    task): it can make the verdict worse, never better."""

    label: str  # "apt hook (2026-12-01T19:00:00Z, 1 h ago)"
    report: Report


@dataclass(frozen=True)
class Unseen:
    """What the results a row rests on cannot see (the status task: packages changed since, an earlier boot, a stale
    result): a pass is then not proven for the host as it is now, so it shows as WARN; a worse verdict stays."""

    short: str  # a few words for the As-of cell: "packages changed"
    line: str  # the finding: what, since when, and what to run


@dataclass(frozen=True)
class HostOutcome:
    host: str
    state: str  # VERIFIED | UNREACHABLE | NOT_VERIFIED
    report: Report | None = None
    detail: str | None = None  # one line: why there is no report
    torch_label: str | None = None
    drift: tuple[str, ...] = ()  # what changed since the host's last passing report (reports.py)
    as_of: str | None = None  # when the row was true, as shown; None: the report's own time
    later: tuple[Later, ...] = ()
    unusable: tuple[str, ...] = ()  # kept files that could not be used, one line each
    sources: tuple[str, ...] = ()  # what was read on the host and how old it is, one line each (the status task)
    history: tuple[tuple[str, str], ...] = ()  # (verdict, when) of the host's last runs, oldest first
    unseen: tuple[Unseen, ...] = ()  # what the results shown cannot see (the status task)


@dataclass(frozen=True)
class Row:
    host: str
    verdict: str  # PASS | WARN | FAIL | UNREACHABLE | NOT VERIFIED
    reason: str  # the one line that explains the verdict
    lead: Finding | None = None  # the finding the verdict rests on (what the host's group is)
    findings: tuple[Finding, ...] = ()
    torch: str = NONE
    torch_label: str | None = None
    os: str = NONE
    rocm: str = NONE
    bitsandbytes: str = NONE
    gpus: str = NONE
    archs: tuple[str, ...] = ()
    kernel: str = NONE
    boot: str | None = None  # the boot-time check's last result, as the report carries it (facts.boot_check)
    linkage: str = NONE
    strays: str = NONE
    nf4: str = NONE
    model: str = NONE
    as_of: str = NONE
    checks: tuple[tuple[str, str], ...] = ()  # (check id, status), in the report's order
    sources: tuple[str, ...] = ()
    history: tuple[tuple[str, str], ...] = ()

    @property
    def check(self) -> str:
        """The check the verdict rests on, and how many other findings the host has: "linkage.static +3"."""
        if self.lead is None or not self.lead.check:
            return NONE
        others = len(self.findings) - 1
        return f"{self.lead.check} +{others}" if others else self.lead.check

    @property
    def group_key(self) -> tuple[str, str | None, str]:
        return self.lead.key if self.lead is not None else (self.verdict, None, self.reason)

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(finding.line for finding in self.findings)

    @property
    def cells(self) -> tuple[str, ...]:
        """One per COLUMNS entry after "Host"."""
        torch = f"{self.torch} {LABEL_MARK}" if self.torch_label else self.torch
        return (
            self.verdict,
            self.check,
            self.os,
            self.rocm,
            torch,
            self.bitsandbytes,
            self.gpus,
            self.kernel,
            self.linkage,
            self.strays,
            self.nf4,
            self.model,
            self.as_of,
        )


def _gpus(report: Report) -> str:
    gpus, mode = report.facts.gpus, report.facts.device_mode
    if gpus is None:
        return "not probed"
    if not gpus:
        return "none (CPU run)" if mode == "cpu" else "none"
    archs = ", ".join(f"{g.arch or '?'}{'' if g.supported else ' ⚠'}" for g in gpus)
    note = " — CPU run" if mode == "cpu" else ""
    return f"{len(gpus)} ({archs}){note}"


def _per_device(runs, cell, separator: str) -> str:
    """One `cell(run)` per device, and a plain note when none of them ran on a GPU."""
    text = separator.join(cell(run) for run in runs)
    return text if any(run.gpu_pass for run in runs) else f"{text} (CPU, not a GPU pass)"


def _number(value, digits: int) -> str | None:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else None


def _fused(run) -> str:
    """ ", fused M 1–8": the rows bitsandbytes' fused kernel ran at on a GPU (the path of one-token decoding)."""
    return f", fused M {run.fused_rows}" if run.fused_rows else ""


def _nf4(report: Report) -> str:
    """ "cuda:0 0.0727, fused M 1–8" per device: the round trip's error, and where the fused kernel was exercised."""
    runs = report.facts.nf4
    if not runs:
        return "not run"
    return _per_device(
        runs,
        lambda run: (
            f"{run.device or '?'} {_number(run.roundtrip_mean_abs_error, 4) or '—'}{_fused(run)}"
            f"{'' if run.status == PASS else ' ✗'}"
        ),
        "; " if any(run.fused_rows for run in runs) else ", ",
    )


def _fit(run) -> str:
    if run.fits_4bit is None:
        return ""
    if not run.fits_4bit:
        return ", fits neither"
    return ", fits 4-bit and fp16" if run.fits_16bit else ", fits 4-bit, not fp16"


def _cosine(run) -> str:
    cosine = _number(run.logits_cosine, 3)
    return f"cos {cosine}" if cosine else "not compared"


def _model(report: Report) -> str:
    """ "cuda:0 0.304, cos 0.975" per device; for a checkpoint whether it fits the GPU ("fits 4-bit, not fp16")."""
    if report.request.model == "off":
        return "off"
    runs = report.facts.model
    if not runs:
        check = report.check("model")
        return f"{check.status.upper()}: not run" if check else "not run"
    flags = {PASS: "", FAIL: " ✗"}
    return _per_device(
        runs,
        lambda run: (
            f"{run.device or '?'} {_number(run.footprint_ratio, 3) or '—'}, "
            f"{_cosine(run)}{_fit(run)}{flags.get(run.status, ' ⚠')}"
        ),
        "; ",
    )


def _strays(report: Report) -> str:
    strays = report.facts.strays
    if strays is None:
        return "not checked"
    if not strays.count:
        return "none"
    risky = set(strays.binding_risk)
    # The packages that ship a SONAME a ROCm 7.2 consumer could bind to matter most: list them first, so the cut
    # to four names never hides one behind "+N".
    names = sorted(strays.packages, key=lambda name: name not in risky)
    shown = ", ".join(f"{n}{' ⚠' if n in risky else ''}" for n in names[:4])
    more = f" +{len(names) - 4}" if len(names) > 4 else ""
    return f"{strays.count}: {shown}{more}"


def _kernel(report: Report) -> str:
    """The running kernel and its amdgpu, the kernel that boots next when a reboot is pending, and a failed boot-time
    check: "6.8.0-49-generic → 6.8.0-51-generic (reboot pending, no amdgpu.ko ⚠)"."""
    kernel, boot = report.facts.kernel, report.facts.boot_check
    if kernel is None or kernel.running is None:
        text = "not checked"  # a version-1 report, or a filesystem image
    else:
        text = kernel.running + (" (no amdgpu.ko ⚠)" if kernel.running_has_amdgpu is False else "")
        if kernel.reboot_pending and kernel.next_boot and kernel.next_boot != kernel.running:
            lost = ", no amdgpu.ko ⚠" if kernel.next_boot_has_amdgpu is False else ""
            text += f" → {kernel.next_boot} (reboot pending{lost})"
        elif kernel.reboot_pending:
            text += " (reboot pending)"
    if boot is not None and boot.verdict == FAIL:
        text += f"; boot check FAIL in {boot.kernel}"
    return text


def _boot(report: Report) -> str | None:
    boot = report.facts.boot_check
    if boot is None:
        return None
    after = f" (after {boot.previous_kernel})" if boot.previous_kernel and boot.previous_kernel != boot.kernel else ""
    return (
        f"boot-time check: {boot.verdict.upper()} in {boot.kernel}{after}, {short_time(boot.checked_at)} — "
        f"{boot.reason}"
    )


def _linkage(report: Report) -> str:
    linkage = report.facts.linkage
    if not linkage:
        return "not checked"
    detail = linkage.short or linkage.reason
    return f"{linkage.status.upper()}: {detail}" if detail else linkage.status.upper()


def short_time(stamp: str) -> str:
    """ "2026-12-01T17:00:00Z" → "2026-12-01 17:00Z" (the table's width); anything else as it is."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d):\d\dZ", stamp)
    return f"{match.group(1)} {match.group(2)}Z" if match else stamp


def _findings(outcome: HostOutcome) -> tuple[Finding, ...]:
    """The host's findings, each once: the report's failing and warning checks, the later results' (with where they
    were seen), the kept files that could not be used, the drift."""
    found: dict[tuple, Finding] = {}

    def add(finding: Finding) -> None:
        seen = found.get(finding.key)
        sources = (seen.sources if seen else ()) + tuple(
            s for s in finding.sources if not seen or s not in seen.sources
        )
        found[finding.key] = Finding(finding.status, finding.text, finding.check, sources)

    reports = ([(None, outcome.report)] if outcome.report is not None else []) + [
        (later.label, later.report) for later in outcome.later
    ]
    for label, report in reports:
        for check in report.problems:
            add(Finding(check.status.upper(), check.reason, check.id, (label,) if label else ()))
    for line in outcome.unusable:
        add(Finding("NOT VERIFIED", line))
    for item in outcome.unseen:
        add(Finding("WARN", item.line))
    for line in outcome.drift:
        status, _, text = line.partition(" ")
        add(Finding(status, text))
    return tuple(sorted(found.values(), key=lambda f: f.rank))


def _verdict(outcome: HostOutcome, findings: Sequence[Finding]) -> str:
    """One rule: a host passes only on a passing report, with nothing newer failing and every kept file usable."""
    failing = any(f.status == "FAIL" for f in findings)
    if outcome.report is None:
        if failing:  # a newer static result failed: that is proof enough of a failure
            return "FAIL"
        return "UNREACHABLE" if outcome.state == UNREACHABLE else "NOT VERIFIED"
    verdicts = [outcome.report.verdict] + [later.report.verdict for later in outcome.later]
    if failing or FAIL in verdicts:
        return "FAIL"
    if outcome.unusable or not all(v in (PASS, WARN) for v in verdicts):
        return "NOT VERIFIED"
    return "WARN" if WARN in verdicts or outcome.unseen else "PASS"


def _checks(outcome: HostOutcome) -> tuple[tuple[str, str], ...]:
    """(check id, status) over the report and the later results: a later result's status counts when it is worse."""
    severity = {"skip": -1, "pass": 0, "warn": 1, "fail": 2}
    statuses: dict[str, str] = {}
    reports = ([outcome.report] if outcome.report is not None else []) + [later.report for later in outcome.later]
    for report in reports:
        for check in report.checks:
            now = statuses.get(check.id)
            if now is None or severity.get(check.status, 2) > severity.get(now, 2):
                statuses[check.id] = check.status
    return tuple(statuses.items())


def row_for(outcome: HostOutcome) -> Row:
    judged = outcome.report.judge() if outcome.report is not None else None
    if judged is not None and not judged.trustworthy:
        outcome = replace(outcome, state=NOT_VERIFIED, report=None, detail=f"not proven — {judged.line()}")
    findings = _findings(outcome)
    verdict = _verdict(outcome, findings)
    wanted = {"FAIL": "FAIL", "NOT VERIFIED": "NOT VERIFIED", "WARN": "WARN"}.get(verdict)
    lead = next((f for f in findings if f.status == wanted), None)
    shown = outcome.report or (outcome.later[-1].report if outcome.later else None)
    if outcome.report is not None and not (outcome.later or outcome.unusable or outcome.unseen):
        reason = outcome.report.reason  # the verifier's own line
    elif lead is not None:
        reason = lead.line
    else:
        reason = outcome.detail or (
            shown.reason if shown else "could not connect" if outcome.state == UNREACHABLE else "no report"
        )
    common = dict(
        lead=lead, findings=findings, sources=outcome.sources, history=outcome.history, checks=_checks(outcome)
    )
    if shown is None:
        return Row(outcome.host, verdict, reason, **common)
    return Row(
        outcome.host,
        verdict,
        reason,
        **common,
        torch=shown.facts.torch or "not installed",
        torch_label=shown.request.torch_label or outcome.torch_label,
        os=shown.host.os or "?",
        rocm=shown.facts.rocm or "none",
        bitsandbytes=shown.facts.bitsandbytes or "not installed",
        gpus=_gpus(shown),
        archs=tuple(sorted({g.arch for g in shown.facts.gpus or () if g.arch})),
        kernel=_kernel(shown),
        boot=_boot(shown),
        linkage=_linkage(shown),
        strays=_strays(shown),
        nf4=_nf4(shown),
        model=_model(shown),
        as_of=(outcome.as_of or short_time(shown.generated_at))
        + (f" ⚠ {', '.join(item.short for item in outcome.unseen)}" if outcome.unseen else ""),
    )
