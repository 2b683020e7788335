"""A stand-in pyinfra host for running an operation's body on data (tests/support/operation_cases.py builds on it).

Facts come from a dict (keyed by the fact class's name; a fact asked for with arguments is keyed "Name:arg=value,…"
in sorted order); noop descriptions and logged lines are recorded. Nothing connects anywhere: this proves what an
operation *decides* from given facts. Real runs are tested elsewhere.
"""

from __future__ import annotations

from typing import Any


class _State:
    """Enough of pyinfra's State for operation bodies (weak-referenceable, not executing, no config)."""

    is_executing = False
    print_noop_info = False

    def __init__(self) -> None:
        self.config = type("Config", (), {"DIFF": False})()
        self.cwd = None


class FakeHost:
    def __init__(self, facts: dict[str, Any], data: dict[str, Any] | None = None, name: str = "testhost"):
        self.facts = dict(facts)
        self.data = type("Data", (), {"get": lambda _self, key, default=None: (data or {}).get(key, default)})()
        self.name = name
        self.state = _State()
        self.noops: list[str] = []
        self.logged: list[str] = []
        self.asked: list[str] = []
        self.current_op_global_arguments: dict = {}

    @staticmethod
    def fact_key(fact_cls, kwargs: dict[str, Any]) -> str:
        name = fact_cls.__name__
        if not kwargs:
            return name
        return name + ":" + ",".join(f"{key}={kwargs[key]}" for key in sorted(kwargs))

    def get_fact(self, fact_cls, *args, **kwargs):
        assert not args, "pass fact arguments by keyword"
        key = self.fact_key(fact_cls, {k: v for k, v in kwargs.items() if not k.startswith("_")})
        self.asked.append(key)
        if key not in self.facts:
            raise KeyError(f"the test gives no fact {key!r} (facts given: {sorted(self.facts)})")
        return self.facts[key]

    def noop(self, description: str) -> None:
        self.noops.append(description)

    def log_styled(self, message: str, **_kwargs) -> None:
        self.logged.append(message)

    def log(self, message: str, *_args, **_kwargs) -> None:
        self.logged.append(message)

    def get_temp_filename(self, *parts, **_kwargs) -> str:
        return "/tmp/pyinfra-temp"
