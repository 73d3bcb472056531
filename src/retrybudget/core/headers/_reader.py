"""One response's headers being read: their groups, the notes and conflicts found, a quota."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ._model import Conflict, HeaderNote, Hint
from ._parsers import _T, _parse_delay, _parse_reset, _Parsed


class _Reader:
    """The normalised headers of one response, plus the notes and conflicts found reading them."""

    def __init__(
        self,
        pairs: Iterable[tuple[str, str]],
        now_wall: float,
        resets: Mapping[str, str] | None = None,
    ) -> None:
        self.now_wall = now_wall
        self.resets: Mapping[str, str] = resets or {}
        self.groups: dict[str, list[str]] = {}
        for name, value in pairs:
            self.groups.setdefault(name, []).append(value)
        self.notes: list[HeaderNote] = []
        self.conflicts: list[Conflict] = []

    def has(self, *names: str) -> bool:
        return any(name in self.groups for name in names)

    def values(self, name: str) -> list[str]:
        """The values of ``name``; a comma-joined repeat (``5, 7``) is split back apart.

        Only when every piece is non-empty and has no inner whitespace, so an HTTP-date
        (``Sun, 06 Nov 1994 …``) or a trailing comma stays one (noted) value.
        """
        out: list[str] = []
        for value in self.groups.get(name, ()):
            if "," not in value:
                out.append(value)
                continue
            parts = [part.strip() for part in value.split(",")]
            if len(parts) > 1 and all(part and part.split() == [part] for part in parts):
                out.extend(parts)
            else:
                out.append(value)
        return out

    def joined(self, name: str) -> str | None:
        values = self.groups.get(name)
        return None if values is None else ", ".join(values)

    def pick(self, name: str, parse: Callable[[str, str], _Parsed[_T]]) -> _T | None:
        """The first valid value of ``name``; notes for invalid ones; a Conflict if they differ."""
        if name not in self.groups:
            return None
        values = self.values(name)
        chosen: _T | None = None
        for value in values:
            got, note = parse(value, name)
            if note is not None:
                self.notes.append(note)
            if chosen is None and got is not None:
                chosen = got
        distinct = list(dict.fromkeys(values)) if len(values) > 1 else values
        if len(distinct) > 1:
            shown = ", ".join(repr(v[:40]) for v in distinct[:5])
            self.conflicts.append(
                Conflict(
                    (name,),
                    f"{name} appears {len(values)} times with different values ({shown}); "
                    "the first valid one is used",
                )
            )
        return chosen

    def parse_retry_after(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_delay(value, source, self.now_wall, divisor=1.0, allow_date=True)

    def parse_retry_after_ms(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_delay(value, source, self.now_wall, divisor=1000.0, allow_date=False)

    def parse_reset(self, value: str, source: str) -> _Parsed[Hint]:
        return _parse_reset(value, source, self.now_wall, self.resets.get(source, "auto"))

    def parse_delay(self, unit: str) -> Callable[[str, str], _Parsed[Hint]]:
        """The parser of a delay header in ``unit`` (``seconds`` also takes an HTTP-date)."""
        if unit == "seconds":
            return self.parse_retry_after
        if unit == "ms":
            return self.parse_retry_after_ms
        return lambda value, source: _parse_reset(value, source, self.now_wall, unit)

    def check_limit(self, quota: _Quota) -> None:
        if (
            quota.limit is not None
            and quota.remaining is not None
            and quota.remaining > quota.limit
        ):
            fields = tuple(dict.fromkeys((quota.remaining_src, quota.limit_src)))
            self.conflicts.append(
                Conflict(
                    fields,
                    f"remaining {quota.remaining} ({quota.remaining_src}) is greater than "
                    f"limit {quota.limit} ({quota.limit_src})",
                )
            )


@dataclass
class _Quota:
    """What one header family says about one quota."""

    limit: int | None = None
    remaining: int | None = None
    used: int | None = None
    reset: Hint | None = None
    window: float | None = None
    resource: str | None = None
    limit_src: str = ""
    remaining_src: str = ""

    def has_data(self) -> bool:
        return any(
            v is not None
            for v in (self.limit, self.remaining, self.used, self.reset, self.window, self.resource)
        )


def _latest(hints: Iterable[Hint | None]) -> Hint | None:
    best: Hint | None = None
    for hint in hints:
        if hint is not None and (best is None or hint.delay > best.delay):
            best = hint
    return best
