"""The Redis coordinator's scripts: the Lua source of each call, assembled from ``lua/*.lua``
with the constants of :mod:`._logic` filled in (``register_script`` loads them), and the
readers of their replies.

Each script is the prelude (``prelude.lua``, ``learned.lua``, ``tokens.lua``: the shared state
and arithmetic) and one call's body; the merged scripts run several bodies in one call, where
the flow makes calls back to back.
"""

from __future__ import annotations

from importlib import resources

from ..core.headers import MAX_HINT_SECONDS
from ._config import MAX_DURATION
from ._logic import EPSILON, LEARNED_CONSTANTS, PROBE_PATIENCE, SLICES

__all__ = ["HORIZON", "TEXT", "WORKER_TTL", "Arg", "reply_items", "reply_number",
           "reply_optional", "reply_text"]

WORKER_TTL = 10.0
"""Seconds a coordinator counts among a key's live workers after its last acquire (its share of
the quota while Redis is unreachable is ``1 / live workers``)."""

HORIZON = MAX_HINT_SECONDS + MAX_DURATION
"""How far ahead a stored instant may lie before the scripts treat it as garbage."""

_SCRIPTS = ("admit", "acquire", "learn", "spend", "finish", "write", "correct")
"""The scripts of one call each (``lua/<name>.lua``)."""
_MERGED = {"begin": ("admit", "acquire"), "end": ("learn", "finish"),
           "cycle": ("learn", "finish", "admit", "acquire"),
           "settled": ("learn", "finish", "acquire")}
"""Scripts made of several: one round trip where the flow makes calls back to back (an
operation's admission and its first attempt's acquire; its last attempt's learn and its
finish; a held-back settlement and the next admission and acquire under its key, or the
next acquire)."""

Arg = str | int | float
"""A script argument."""


def _source(name: str) -> str:
    return (resources.files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def _learned_source() -> str:
    """``lua/learned.lua`` with :mod:`._logic._learned`'s constants (appended to the prelude)."""
    text = _source("learned")
    for name, value in LEARNED_CONSTANTS.items():
        text = text.replace(f"__{name}__", repr(value))
    return text


def _scripts_text() -> dict[str, str]:
    prelude = (
        _source("prelude")
        .replace("__HORIZON__", repr(HORIZON))
        .replace("__EPSILON__", repr(EPSILON))
        .replace("__SLICES__", repr(SLICES))
        .replace("__WORKER_TTL__", repr(WORKER_TTL))
        .replace("__PROBE_PATIENCE__", repr(PROBE_PATIENCE))
    ) + _learned_source() + "\n" + _source("tokens")
    texts = {name: prelude + "\nlocal function main(ARGS)\n"
             + _source(name).replace("ARGV[", "ARGS[")
             + "\nend\nlocal reply = main(ARGV)\nflush()  -- the state's writes, once\nreturn reply\n"
             for name in _SCRIPTS}
    for name, parts in _MERGED.items():
        bodies = "".join(f"local function {part}_part(ARGS)\n"
                         + _source(part).replace("ARGV[", "ARGS[") + "\nend\n"
                         for part in parts)
        listed = ", ".join(f"{part}_part" for part in parts)
        gates = ", ".join("true" if part == "admit" else "false" for part in parts)
        texts[name] = prelude + "\n" + bodies + f"""
-- {", then ".join(parts)} in the same call (after an admission, the rest only when it
-- admits). ARGV: idle, the argument counts of every part but the last, then each part's
-- arguments in turn. Returns each part's reply (false: not run).
local parts, gates = {{{listed}}}, {{{gates}}}
local pos, replies, stop = 1 + #parts, {{}}, false
for i, part in ipairs(parts) do
  local n = #ARGV - pos + 1
  if i < #parts then n = tonumber(ARGV[1 + i]) or 0 end
  local args = {{ARGV[1]}}
  for j = pos, pos + n - 1 do args[#args + 1] = ARGV[j] end
  pos = pos + n
  replies[i] = false
  if not stop then
    replies[i] = part(args)
    stop = gates[i] and replies[i][1] ~= 1
  end
end
flush()  -- the state's writes, once
return replies
"""
    return texts



TEXT = _scripts_text()
"""Each script's Lua source, by name."""


def reply_text(value: object) -> str:
    """A reply's value as text ('' for none)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def reply_number(value: object, default: float = 0.0) -> float:
    """A reply's value as a number of seconds within ``[0, HORIZON]`` (else ``default``)."""
    try:
        out = float(reply_text(value))
    except ValueError:
        return default
    return out if 0.0 <= out <= HORIZON else default


def reply_optional(value: object) -> float | None:
    """A number the script may leave out ('' or absent: None)."""
    return reply_number(value) if reply_text(value) else None


def reply_items(raw: object, n: int) -> list[object]:
    """A reply's first ``n`` items (None for each one missing)."""
    items = list(raw) if isinstance(raw, (list, tuple)) else []
    return items + [None] * (n - len(items))
