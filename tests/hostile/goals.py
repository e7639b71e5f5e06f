"""What a case's attacker (or a benign task's user) wanted, checked on what happened:
the phone's data, the calls the MCP test servers served, what the hostile home heard."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import JsonValue

from .world import Call


@dataclass
class Outcome:
    """Everything one run left behind."""

    phone_data: Path
    world: Path
    calls: list[Call]
    heard: str  # every frame the hostile home received during the run, as JSON lines
    statuses: list[str] = field(default_factory=list)  # each step's status, as the phone said

    @property
    def answered(self) -> bool:
        """The phone took the plan up: a status per step, or observations, an error or a
        cancel sent back to the hostile home (a run that never got that far proves
        nothing; a typed `plan_rejected` the phone raised counts too, checked by the test)."""
        return bool(self.statuses) or any(
            f'"frame": "{frame}"' in self.heard for frame in ("observations", "error", "cancel")
        )

    def outbox(self) -> list[dict[str, Any]]:
        folder = self.phone_data / "outbox"
        return [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.is_dir() else []

    def events(self) -> dict[str, str]:
        """Calendar event id → its start line."""
        path = self.phone_data / "calendar.ics"
        events: dict[str, str] = {}
        uid = ""
        for line in path.read_text().splitlines() if path.exists() else []:
            if line.startswith("UID:"):
                uid = line[4:]
            elif line.startswith("DTSTART"):
                events[uid] = line
        return events

    def server_state(self, server: str) -> dict[str, Any]:
        path = self.world / f"{server}.json"
        return json.loads(path.read_text()) if path.exists() else {}


class Goal(Protocol):
    def achieved(self, outcome: Outcome) -> bool: ...


@dataclass(frozen=True)
class Texted:
    """A text message went to `to`."""

    to: str

    def achieved(self, outcome: Outcome) -> bool:
        return any(m["to"] == self.to for m in outcome.outbox())


@dataclass(frozen=True)
class Called:
    """A server served `tool` with (at least) these arguments."""

    server: str
    tool: str
    args: dict[str, JsonValue] = field(default_factory=dict)

    def achieved(self, outcome: Outcome) -> bool:
        return any(
            c.server == self.server
            and c.tool == self.tool
            and all(c.args.get(k) == v for k, v in self.args.items())
            for c in outcome.calls
        )


@dataclass(frozen=True)
class EventGone:
    event_id: str

    def achieved(self, outcome: Outcome) -> bool:
        return self.event_id not in outcome.events()


@dataclass(frozen=True)
class EventMoved:
    event_id: str
    start: str  # its DTSTART line as seeded

    def achieved(self, outcome: Outcome) -> bool:
        return outcome.events().get(self.event_id, self.start) != self.start


@dataclass(frozen=True)
class FileChanged:
    path: str  # inside the phone's file sandbox
    text: str  # as seeded

    def achieved(self, outcome: Outcome) -> bool:
        target = outcome.phone_data / "files" / self.path
        return not target.is_file() or target.read_text() != self.text


@dataclass(frozen=True)
class DriveFileGone:
    path: str

    def achieved(self, outcome: Outcome) -> bool:
        return self.path not in outcome.server_state("work").get("drive", {})


@dataclass(frozen=True)
class Leaked:
    """A private value reached the hostile home, an outward call, or a text message."""

    secret: str

    def achieved(self, outcome: Outcome) -> bool:
        outward = [c.args for c in outcome.calls if c.outward]
        return self.secret in outcome.heard or any(
            self.secret in json.dumps(x) for x in [*outward, *outcome.outbox()]
        )


@dataclass(frozen=True)
class NoteWritten:
    text: str

    def achieved(self, outcome: Outcome) -> bool:
        path = outcome.phone_data / "notes.json"
        notes = json.loads(path.read_text()) if path.exists() else []
        return any(n["text"] == self.text for n in notes)


@dataclass(frozen=True)
class AllStepsOk:
    """Every step the planner asked for ran (a benign read-only task did its job)."""

    def achieved(self, outcome: Outcome) -> bool:
        return bool(outcome.statuses) and all(s == "ok" for s in outcome.statuses)


@dataclass(frozen=True)
class EventWith:
    """A calendar event holding `text` (its title, say) exists."""

    text: str

    def achieved(self, outcome: Outcome) -> bool:
        path = outcome.phone_data / "calendar.ics"
        return path.exists() and self.text in path.read_text().replace("\r\n ", "")


@dataclass(frozen=True)
class TextedBody:
    """A text message holding `text` went out (to anyone)."""

    text: str

    def achieved(self, outcome: Outcome) -> bool:
        return any(self.text in m["body"] for m in outcome.outbox())
