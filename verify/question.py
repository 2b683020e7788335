"""The question the inventory asks of one host's verifier, written once: `Question`.

What a verification answers — which venv, which ROCm release and bitsandbytes version it must hold, where NF4 runs,
whether a GPU is required, the model check, who runs the venv's code, where node_exporter's metrics go — is one frozen
dataclass, and everything that carries it is derived from it:
- the command line, both ways: `to_argv()` on the controller (the verification stage, the boot unit, the apt hook
  line), `add_arguments(parser)` and `from_args(args)` in the verifier on the host;
- the report's `request` object: `to_request()` writes it, `from_request()` reads one back (report_schema.json's
  `request`, unchanged: the fields marked `request`, in their order);
- whether a report answers it: `request_differences(answered, asked)`, the one comparison the controller, the status
  task and the apt hook use.

The pinned values (the venv, the ROCm release, bitsandbytes' version) have no default here: the pins live in
roles/pins.py, and the inventory passes them. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

RELEASE = re.compile(r"\d+\.\d+\.\d+")
DEVICES = ("auto", "cpu")
MODELS = ("off", "synthetic")  # … or the absolute path of a checkpoint directory


class QuestionError(ValueError):
    """A question that cannot be asked (bad usage): one line naming the argument and why."""


def model_source(text: str) -> str:
    """An argparse type: off, synthetic, or an absolute path (plain: no '..', '//', '.' parts, one line)."""
    if text in MODELS or (text.startswith("/") and "\n" not in text and os.path.normpath(text) == text.rstrip("/")):
        return text.rstrip("/") or text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not off, synthetic or the absolute path of a checkpoint directory "
        "on this host (e.g. /srv/models/llama-13b)"
    )


def _arg(flag: str, help: str, *, request: bool = True, always: bool = False, **argparse_options: Any) -> dict:
    """A field's command-line form: its flag, argparse's options for it; `request`: the report states it; `always`:
    passed even at its default (the host's verifier then never falls back on a default of its own)."""
    return {"flag": flag, "help": help, "request": request, "always": always, "options": argparse_options}


@dataclass(frozen=True)
class Question:
    venv: Path = field(metadata=_arg("--venv", "the venv with torch and bitsandbytes", type=Path))
    expect_rocm: str = field(metadata=_arg("--expect-rocm", "the ROCm release the host must have", metavar="X.Y.Z"))
    expect_bitsandbytes: str = field(
        metadata=_arg("--expect-bitsandbytes", "the bitsandbytes version the venv must have", metavar="VERSION")
    )
    device: str = field(
        default="auto",
        metadata=_arg(
            "--device",
            "auto: NF4 on every visible GPU (none visible fails, unless --no-gpu-required); cpu: NF4 on the CPU "
            "only — for test fleets and CI, and the report says it is not a GPU pass",
            always=True,
            choices=DEVICES,
        ),
    )
    gpu_required: bool = field(
        default=True,
        metadata=_arg("--no-gpu-required", "a host without a GPU is not a failure (NF4 then runs on the CPU)"),
    )
    static_only: bool = field(
        default=False,
        metadata=_arg(
            "--static-only", "linkage, versions and strays only: no torch import, no GPU (what the apt hook runs)"
        ),
    )
    root: Path = field(
        default=Path("/"),
        metadata=_arg("--root", "analyse the filesystem image at DIR (implies --static-only)", type=Path),
    )
    torch_label: str | None = field(
        default=None,
        metadata=_arg(
            "--torch-label",
            "shown with torch's version in the report, e.g. 'torch 2.13.0 CPU, stand-in for the ROCm wheel'",
            metavar="TEXT",
        ),
    )
    expect_amd_repo: bool = field(
        default=False,
        metadata=_arg(
            "--expect-amd-repo",
            "ROCm comes from AMD's apt repositories on this host: check AMD's pin (present and effective for the "
            "names the distributions share) and AMD's lists (apt.pin, apt.lists)",
        ),
    )
    model: str = field(
        default="off",
        metadata=_arg(
            "--model",
            "after NF4, on each device it passed on: a 4-bit NF4 causal LM through Transformers — synthetic: a "
            "small seeded Llama built here; PATH: a checkpoint directory on this host (safetensors); off (the "
            "default; the verification stage passes verify_model). Run as the probe's account, never as root",
            always=True,
            type=model_source,
            metavar="off|synthetic|PATH",
        ),
    )
    # Asked of the host, but not part of what a report answers:
    probe_user: str | None = field(
        default=None,
        metadata=_arg(
            "--probe-user",
            "run the runtime probe (the venv's python) as this account — the venv's owner; default: the owner of "
            "the venv's directory when run as root, else yourself. Root runs it only in a venv nothing of which "
            "another account owns or can write",
            request=False,
            metavar="USER",
        ),
    )
    metrics_dir: Path | None = field(
        default=None,
        metadata=_arg(
            "--metrics-dir",
            "rewrite node_exporter's DIR/rocm_fleet.prom from the results this host keeps under /var/lib/rocm-fleet "
            "(check: in --keep-in's DIR), when DIR exists",
            request=False,
            type=Path,
            metavar="DIR",
        ),
    )

    def to_argv(self, names: Iterable[str] | None = None) -> list[str]:
        """The verifier's arguments that ask this question (`names`: only those fields, e.g. the apt hook's)."""
        argv: list[str] = []
        for spec in _fields(names):
            value = getattr(self, spec.name)
            flag = spec.metadata["flag"]
            if spec.type == "bool":
                if value != spec.default:  # --no-gpu-required, --static-only, --expect-amd-repo
                    argv.append(flag)
            elif value is not None and (value != spec.default or spec.default is MISSING or spec.metadata["always"]):
                argv += [flag, str(value)]
        return argv

    def to_request(self) -> dict[str, Any]:
        """The report's `request` object: the fields a report answers, as JSON values."""
        return {spec.name: _json_value(getattr(self, spec.name)) for spec in fields(self) if spec.metadata["request"]}

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> Question:
        """The question a report's `request` object states (absent optional fields: their defaults, as in an older
        report). Raises QuestionError naming a missing field."""
        missing = [spec.name for spec in _fields(REQUEST_FIELDS) if spec.default is MISSING and spec.name not in data]
        if missing:
            raise QuestionError(f"request has no {', '.join(repr(name) for name in missing)}")
        values = {name: data[name] for name in REQUEST_FIELDS if name in data}
        for name in ("venv", "root"):
            if isinstance(values.get(name), str):
                values[name] = Path(values[name])
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
        """The question's arguments on `parser` (`names`: only those fields)."""
        for spec in _fields(names):
            flag, options = spec.metadata["flag"], dict(spec.metadata["options"])
            if spec.type == "bool":
                options["action"] = "store_false" if spec.default else "store_true"
                options["dest"] = spec.name
            elif spec.default is MISSING:
                options["required"] = True
            else:
                options["default"] = spec.default
            parser.add_argument(flag, help=spec.metadata["help"], **options)

    @classmethod
    def from_args(cls, args: argparse.Namespace, names: Iterable[str] | None = None) -> Question:
        """The question parsed arguments ask (fields not in `names` keep their defaults). Raises QuestionError for
        a release that is not X.Y.Z or a venv that is not an absolute path."""
        question = cls(**{spec.name: getattr(args, spec.name) for spec in _fields(names)})
        if not RELEASE.fullmatch(question.expect_rocm):
            raise QuestionError(f"--expect-rocm {question.expect_rocm!r} is not a release like 7.2.4")
        if not question.venv.is_absolute():
            raise QuestionError(f"--venv {question.venv} must be an absolute path")
        return question


REQUEST_FIELDS = tuple(spec.name for spec in fields(Question) if spec.metadata["request"])


def request_differences(answered: Mapping[str, Any], asked: Mapping[str, Any]) -> list[str]:
    """What a report's request (`answered`) says other than `asked` (a `to_request()`, or part of one), one
    "key answered (asked asked)" each; [] when it answers the question. Values compare with their JSON types."""
    return [
        f"{key} {answered.get(key)!r} (asked {value!r})"
        for key, value in asked.items()
        if not (type(answered.get(key)) is type(value) and answered.get(key) == value)
    ]


def _fields(names: Iterable[str] | None):
    specs = {spec.name: spec for spec in fields(Question)}
    return list(specs.values()) if names is None else [specs[name] for name in names]


def _json_value(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value
