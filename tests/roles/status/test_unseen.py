"""roles/status/model.py: what the results a status row shows cannot see (issue 26) — packages changed since, a result
of an earlier boot, a stale result — and a kept boot-check result held to the inventory's question.

The kept results are real files read as the status fact reads them (test_model.keep); what the host says beside them
(its boot id, dpkg's changes) is the `verify kept` answer's, as verify/debian/dpkg_log.py reads a real log (its own
tests); the host's clock is NOW_S."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roles.status.model import outcome_of
from roles.verification.host_row import NOT_VERIFIED, row_for
from tests.roles.status.test_model import keep
from tests.support.fleet_reports import report_of
from verify.report.kept import parse_time

VERIFIED_AT = "2026-12-01T17:00:00Z"
RUNNING_BOOT = "2f0c6b8e-6a57-4d2b-9a51-0c1d2e3f4a5b"
EARLIER_BOOT = "b"  # test_model.keep's boot-check result's boot id
WEEK = 7 * 24 * 3600


def verified(at: str = VERIFIED_AT, boot: str | None = RUNNING_BOOT, kind: str = "pass"):
    report = report_of("ws1", kind, at=at)
    return replace(report, host=replace(report.host, boot_id=boot), document=None)


def change(at: str, action: str, package: str, old: str | None, new: str | None) -> list:
    return [parse_time(at), action, package, old, new]


def answer_of(tmp_path, dpkg: dict | None = None, boot_id: str = RUNNING_BOOT, **kept) -> dict:
    kept.setdefault("verification", verified())
    return dict(keep(tmp_path, **kept), boot_id=boot_id, dpkg=dpkg if dpkg is not None else {"changes": []})


def test_nothing_unseen_is_a_plain_pass(tmp_path):
    dpkg = {"status_mtime": parse_time("2026-12-01T16:59:00Z") + 0.7, "changes": [], "complete": True}
    outcome = outcome_of("ws1", answer_of(tmp_path, dpkg), max_result_age=WEEK)
    row = row_for(outcome)
    assert outcome.unseen == () and row.verdict == "PASS" and "⚠" not in row.as_of


def test_packages_dpkg_logged_after_the_newest_result_make_a_pass_a_warn_naming_them(tmp_path):
    """dpkg -i past every hook (DPKG_FRONTEND_LOCKED set, the hooks removed): its log names the package."""
    dpkg = {
        "status_mtime": parse_time("2026-12-01T18:00:05Z"),
        "complete": True,
        "changes": [
            change("2026-12-01T16:00:00Z", "install", "libold:amd64", None, "1.0"),  # before: covered
            change("2026-12-01T18:00:00Z", "install", "librocm-smi64-1:amd64", None, "5.2.3-2"),
            change("2026-12-01T18:00:04Z", "upgrade", "libfoo:amd64", "1.0", "2.0"),
        ],
    }
    row = row_for(outcome_of("ws1", answer_of(tmp_path, dpkg)))
    assert row.verdict == "WARN" and row.as_of == "2026-12-01 17:00Z (3 h ago) ⚠ packages changed"
    assert row.reason == (
        "WARN packages changed since 2026-12-01 17:00Z: librocm-smi64-1 5.2.3-2 installed, libfoo 1.0 → 2.0 — no "
        "result shown covers them; re-verify: pyinfra INVENTORY tasks/verify.py"
    )


def test_a_later_apt_hook_result_covers_the_changes_before_it_and_a_fail_stays_a_fail(tmp_path):
    dpkg = {"changes": [change("2026-12-01T18:00:00Z", "install", "librocm-smi64-1:amd64", None, "5.2.3-2")]}
    hooked = outcome_of("ws1", answer_of(tmp_path / "a", dpkg, hook=("2026-12-01T18:00:01Z", verified())))
    assert hooked.unseen == () and row_for(hooked).verdict == "PASS"
    failing = row_for(outcome_of("ws1", answer_of(tmp_path / "b", dpkg, verification=verified(kind="strays"))))
    assert failing.verdict == "FAIL" and failing.as_of.endswith("⚠ packages changed")
    assert any(f.status == "WARN" and f.text.startswith("packages changed since") for f in failing.findings)


def test_one_mention_per_package_and_the_rest_counted(tmp_path):
    changes = [change("2026-12-01T18:00:00Z", "install", f"lib{n}:amd64", None, "1.0") for n in range(8)]
    changes += [
        change("2026-12-01T18:00:01Z", "remove", "lib0:amd64", "1.0", None),
        change("2026-12-01T18:00:01Z", "purge", "lib0:amd64", "1.0", None),
    ]
    row = row_for(outcome_of("ws1", answer_of(tmp_path, {"changes": changes, "complete": False})))
    assert (
        "since 2026-12-01 17:00Z: lib1 1.0 installed, lib2 1.0 installed, lib3 1.0 installed, lib4 1.0 installed, "
        in (row.reason)
    )
    assert "(+3 more); the log's tail only: maybe more — " in row.reason  # lib6, lib7, and lib0 purged


@pytest.mark.parametrize(
    ("dpkg", "why"),
    [
        ({"error": "/var/log/dpkg.log: No such file or directory"}, "its log cannot say what: /var/log/dpkg.log: No"),
        ({"changes": [], "complete": True}, "its log names no package since"),
    ],
    ids=["log rotated away", "status file edited past dpkg"],
)
def test_a_status_file_changed_after_the_result_says_when_when_the_log_cannot_say_what(tmp_path, dpkg, why):
    dpkg = dict(dpkg, status_mtime=parse_time("2026-12-01T18:30:00Z") + 0.25)
    row = row_for(outcome_of("ws1", answer_of(tmp_path, dpkg)))
    assert row.verdict == "WARN" and row.reason.startswith(
        "WARN packages changed since 2026-12-01 17:00Z: the dpkg database (/var/lib/dpkg/status) was changed at "
        f"2026-12-01 18:30Z ({why}"
    ), row.reason


def test_a_status_file_written_in_the_second_the_result_was_made_is_not_a_change_after_it(tmp_path):
    """A result's time is whole seconds; the apt hook runs within the second of the dpkg run it follows."""
    dpkg = {"changes": [], "status_mtime": parse_time(VERIFIED_AT) + 0.9}
    assert outcome_of("ws1", answer_of(tmp_path, dpkg)).unseen == ()


def test_a_result_of_an_earlier_boot_is_marked_so(tmp_path):
    row = row_for(outcome_of("ws1", answer_of(tmp_path / "a", boot_id="another-boot")))
    assert row.verdict == "WARN" and row.as_of.endswith("⚠ earlier boot")
    assert row.reason == (
        "WARN the verification's result (2026-12-01 17:00Z (3 h ago)) is from an earlier boot than the running one: "
        "the boot check never ran in this boot, was killed, or failed before writing — re-verify: pyinfra INVENTORY "
        "tasks/verify.py"
    )
    no_unit = row_for(outcome_of("ws1", answer_of(tmp_path / "b", boot_id="another-boot"), boot_check=False))
    assert "earlier boot than the running one: nothing checks after a boot (boot_check: False)" in no_unit.reason
    # The boot check's own result, of the boot before: the same.
    boot = ("2026-12-01T18:00:00Z", verified(at="2026-12-01T18:00:00Z"))
    rebooted = row_for(outcome_of("ws1", answer_of(tmp_path / "c", boot=boot, boot_id="another-boot")))
    assert rebooted.reason.startswith("WARN the boot check's result (2026-12-01 18:00Z (2 h ago)) is from an earlier")
    this_boot = outcome_of("ws1", answer_of(tmp_path / "d", boot=boot, boot_id=EARLIER_BOOT))
    assert this_boot.unseen == ()
    # A report made before reports had a boot id, or a host that cannot say its own: nothing to tell by.
    older = outcome_of("ws1", answer_of(tmp_path / "e", verification=verified(boot=None), boot_id="another-boot"))
    assert older.unseen == ()


def test_a_result_older_than_max_result_age_is_stale(tmp_path):
    at = "2026-11-23T20:00:00Z"  # 8 days before NOW_S
    stale = row_for(outcome_of("ws1", answer_of(tmp_path / "a", verification=verified(at=at)), max_result_age=WEEK))
    assert stale.verdict == "WARN" and stale.as_of == "2026-11-23 20:00Z (8 d ago) ⚠ stale"
    assert stale.reason == (
        "WARN stale: the newest full result (verification, 2026-11-23 20:00Z (8 d ago)) is older than max_result_age "
        "(7 d) — re-verify: pyinfra INVENTORY tasks/verify.py"
    )
    never = outcome_of("ws1", answer_of(tmp_path / "b", verification=verified(at=at)), max_result_age=0)
    assert never.unseen == ()
    fresh = outcome_of("ws1", answer_of(tmp_path / "c"), max_result_age=WEEK)
    assert fresh.unseen == ()


def test_a_kept_boot_check_result_is_held_to_the_inventorys_question(tmp_path):
    """Issue 26: after the inventory asks for another release, a host that keeps only a boot-check result showed
    PASS. Now it is NOT VERIFIED, as one keeping only the verification's report is; beside a report that answers,
    it counts for nothing and the row says why."""
    boot_report = verified(at="2026-12-01T18:00:00Z")
    asked = dict(boot_report.to_json()["request"], expect_rocm="7.2.5")
    only_boot = keep(tmp_path / "a", boot=("2026-12-01T18:00:00Z", boot_report))
    row = row_for(outcome_of("ws1", dict(only_boot, boot_id=EARLIER_BOOT), request=asked))
    assert row.verdict == "NOT VERIFIED" and "the report answers another question: expect_rocm" in row.reason, row
    same = asked | {"expect_rocm": "7.2.4"}
    assert row_for(outcome_of("ws1", dict(only_boot, boot_id=EARLIER_BOOT), request=same)).verdict == "PASS"
    answered = replace(verified(), request=replace(verified().request, expect_rocm="7.2.5"), document=None)
    both = keep(tmp_path / "b", verification=answered, boot=("2026-12-01T18:00:00Z", boot_report))
    outcome = outcome_of("ws1", dict(both, boot_id=RUNNING_BOOT), request=asked)
    assert outcome.state != NOT_VERIFIED and outcome.report.request.expect_rocm == "7.2.5"
    assert outcome.sources[2].endswith("— answers another question (expect_rocm '7.2.4' (asked '7.2.5')): not counted")
    assert row_for(outcome).verdict == "PASS"
