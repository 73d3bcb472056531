"""The Redis coordinator's calls: the keys of a provider key (its hash tag ``{K}`` and the
six keys under it) and each script's arguments packed from the coordinator's config, what
it knows of the key and the operation's token cost; how each reply is read, and each call's
answer without Redis."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from .._clock import Clock
from ..core.actions import Admission, Admit, Learn, Permit
from ..core.outcome import Outcome, WaitReason
from ..core.throttle import NO_THROTTLE, Throttle
from ..observe import BREAKER_STATES, notify
from ._config import CoordinationConfig
from ._logic import EPSILON, FLIGHT_TTL, Health, Verdict, admission_of, health, permit_of
from ._memory import MemoryCoordinator
from ._redis_outage import window_end
from ._redis_pipeline import Call
from ._redis_scripts import WORKER_TTL, Arg, reply_items, reply_number, reply_optional, reply_text
from ._settle import aged
from ._stats import Tally
from ._tokens_redis import Corrections, Windows, learned_args, learned_late, requests_throttle, token_args

__all__ = ["UNAVAILABLE", "RedisCalls"]

T = TypeVar("T")

UNAVAILABLE = "coordinator unavailable"
"""The detail of an admission refused because Redis is unavailable (``on_failure="fail"``)."""


class RedisCalls:
    """The calls a :class:`~retrybudget.coordination.RedisCoordinator` sends (a part of the
    coordinator: the state it reads is the coordinator's)."""

    config: CoordinationConfig
    clock: Clock
    prefix: str
    local: MemoryCoordinator
    events: tuple[object, ...]
    _id: str
    _lock: threading.Lock
    _tally: Tally
    _live: dict[str, int]
    _counted: dict[str, float]
    _reseed: set[str]
    _settling: dict[str, tuple[Learn, Outcome[Any], float]]
    _corrections: Corrections

    def _keys(self, key: str) -> list[str]:
        base = f"{self.prefix}{{{key}}}:"
        return [base + "state", base + "slots", base + "leases", base + "budget", base + "workers",
                base + "tokens"]

    def _call(self, script: str | None, key: str, args: Sequence[Arg],
              parse: Callable[[object], T], local: Callable[[], T],
              refusal: T | None = None) -> Call[T]:
        return Call(key, script, self._keys(key), (self.config.idle_ttl, *args), parse, local,
                     refusal)

    def _moved(self, key: str, state: object) -> None:
        """Report the breaker state a script says it entered ('' when it stayed put)."""
        entered = reply_text(state)
        if entered in BREAKER_STATES and self.events:
            notify(self.events, "breaker_transition", key, entered)

    def _admit(self, key: str) -> Call[Admission]:
        cfg = self.config.breaker

        def parse(raw: object) -> Admission:
            allowed, probe, retry_in, entered = reply_items(raw, 4)
            verdict = Verdict(reply_text(allowed) == "1", reply_text(probe) == "1",
                              reply_optional(retry_in))
            self._moved(key, entered)
            return admission_of(verdict, self.clock.wall())

        return self._call(
            None if cfg is None else "admit", key, () if cfg is None else (cfg.probe_ttl,),
            parse, lambda: self.local.admit(key),
            Admission(False, retry_at=None, detail=UNAVAILABLE),
        )

    def _acquire(self, key: str, attempt: int, max_wait: float | None = None,
                 fail_fast: bool = False) -> Call[Permit]:
        cfg = self.config
        gate, pacing, cap = cfg.gate, cfg.pacing, cfg.concurrency
        args = (
            attempt, gate.spread, gate.claim_grace,
            0 if pacing is None else 1,
            0 if pacing is None else pacing.threshold,
            0 if pacing is None else pacing.min_remaining,
            0 if cap is None else cap.limit,
            FLIGHT_TTL if cap is None else cap.lease_ttl,
            0 if cap is None else cap.poll,
            0 if pacing is None else pacing.probes,
            self._me(key), gate.herd_window, "" if max_wait is None else max_wait,
            1 if fail_fast else 0, 1 if pacing is not None and pacing.probe_unknown_limit else 0,
            *token_args(self._seed(key), self._corrections.take(key)),
        )

        def parse(raw: object) -> Permit:
            code, wait, gate_in, lease, reset_in, live = reply_items(raw, 6)
            workers = int(reply_number(live, 1.0))
            if workers >= 1:  # 0: not counted by this call
                self._live[key] = workers
                self._counted[key] = self.clock.monotonic()
            self._reseed.discard(key)  # Redis answered: it holds (or now has) the quota
            permit = permit_of(reply_text(code), reply_number(wait), reply_number(gate_in), reply_text(lease),
                               self.clock.wall(), reply_optional(reset_in))
            if permit.reason is WaitReason.GATE and permit.wait > 0:
                self.local.hold(key, reply_number(gate_in))  # still holds if Redis goes away
            return permit

        return self._call("acquire", key, args, parse, lambda: self.local.acquire(
            key, attempt, max_wait=max_wait, fail_fast=fail_fast))

    def _me(self, key: str) -> str:
        """This coordinator's id for an acquire to count among ``key``'s live workers, or ''
        when Redis counted it less than a quarter of :data:`WORKER_TTL` ago (it still counts
        it: the acquire skips the workers set)."""
        at = self._counted.get(key)
        if at is None or key in self._reseed or self.clock.monotonic() - at >= WORKER_TTL / 4:
            return self._id
        return ""

    def _write(self, key: str, gap: float) -> Call[float]:
        """The write spacing (``write.lua``): seconds this write waits, 0 when it goes."""
        keys = [f"{self.prefix}{{{key}}}:write"]
        return Call(key, "write", keys, (self.config.idle_ttl, gap), reply_number,
                     lambda: self.local.pace_write(key, gap))


    def _learn(self, key: str, throttle: Throttle | None, lease: str | None) -> Call[None]:
        if lease is not None and lease.startswith("m:"):  # taken locally while Redis was away
            self.local.learn(key, None, lease)
            lease = None
        facts = NO_THROTTLE if throttle is None else throttle
        needed = lease is not None or facts.informative or (
            throttle is not None and self.config.pacing is not None)  # an answer: see learn.lua
        answer = learned_args(lease, self.clock.wall())
        if answer and throttle is not None:
            facts = requests_throttle(throttle)
        args = (
            lease or "", 1 if facts.throttled else 0,
            -1 if facts.hint is None else facts.hint,
            -1 if facts.remaining is None else facts.remaining,
            -1 if facts.limit is None else facts.limit,
            -1 if facts.reset is None else facts.reset,
            facts.floor, facts.multiplier, self.config.gate.max_gate,
            0 if throttle is None else 1, *answer,
        )
        return self._call("learn" if needed else None, key, args,
                          learned_late(lease, lambda raw: self.local.learn(
                              key, self._share(key, facts), None), partial(self._late, key)),
                          lambda: self.local.learn(key, self._share(key, facts), lease))

    def _late(self, key: str, windows: Windows, amounts: tuple[int, int, int]) -> None:
        """A late correction of a charge under ``key``: held for the key's next acquire to
        carry, or sent on its own :data:`SETTLE_IDLE` seconds on (:meth:`_corrected`)."""
        self._corrections.add(key, windows, amounts)
        self._arm()

    def _arm(self) -> None:
        """Send what is held back soon (the coordinator's timer)."""
        raise NotImplementedError

    def _corrected(self, key: str) -> Call[bool] | None:
        """The late corrections held for ``key`` sent on their own (``correct.lua``), or None:
        none held. Redis unavailable: they are dropped (the headers' reconciliation stands)."""
        args = self._corrections.take(key)
        if not args:
            return None
        return self._call("correct", key, args, lambda raw: False, lambda: False)

    def _share(self, key: str, facts: Throttle) -> Throttle:
        """What this coordinator may count on of a quota observation while alone: its share,
        ``1 / live workers`` (as last seen in Redis), of the limit and of what is left."""
        workers = self._live.get(key, 1)
        if workers <= 1 or facts.remaining is None:
            return facts
        limit = None if facts.limit is None else max(facts.limit // workers, 1)
        return dataclasses.replace(facts, remaining=facts.remaining // workers, limit=limit)

    def _seed(self, key: str) -> tuple[Arg, ...]:
        """The local quota observation, scaled back to every worker's, for the first acquire
        after Redis came back (adopted only when Redis holds none: it restarted empty)."""
        if key not in self._reseed:
            return ()
        now = self.clock.monotonic()
        s, end = self.local.schedule(key), window_end(self.local, key, now + EPSILON)
        if s is None or s.limit is None or s.quota is None or end is None or end <= now:
            return ()
        workers = self._live.get(key, 1)
        return (s.limit * workers, min(s.quota * workers, s.limit * workers), end - now)

    def _spend(self, key: str) -> Call[bool]:
        cfg = self.config.retry_budget
        args = () if cfg is None else (cfg.ratio, cfg.min_retries_per_sec, cfg.ttl)
        return self._call(None if cfg is None else "spend", key, args,
                          lambda raw: reply_text(raw) == "1", lambda: self.local.spend_retry(key))

    def _finish(self, key: str, outcome: Outcome[Any], probe: bool) -> Call[bool]:
        cfg, budget = self.config.breaker, self.config.retry_budget
        verdict = health(outcome)
        earns = budget is not None and verdict is Health.SUCCESS
        args: tuple[Arg, ...] = (
            verdict.value, 1 if probe else 0,
            0 if cfg is None else cfg.consecutive_failures,
            -1 if cfg is None or cfg.failure_ratio is None else cfg.failure_ratio,
            0 if cfg is None else cfg.window, 0 if cfg is None else cfg.min_operations,
            0 if cfg is None else cfg.cool_down, 0 if budget is None else budget.ttl,
        )

        def parse(raw: object) -> bool:
            opened, entered = reply_items(raw, 2)
            self._moved(key, entered)
            return reply_text(opened) == "1"

        def local() -> bool:
            self.local.finish(key, outcome, probe)
            return False

        return self._call("finish" if cfg is not None or earns else None, key, args, parse, local)

    def _opened(self, opened: bool) -> None:
        if opened:
            self._tally.add("breaker_opened")

    def _begin(self, action: Admit) -> Call[tuple[Admission, Permit | None]]:
        """An admission and, when admitted, the first attempt's acquire: one script."""
        key = action.key
        admit = self._admit(key)
        acquire = self._acquire(key, 1, action.max_wait, action.fail_fast)
        own = admit.args[1:]

        def parse(raw: object) -> tuple[Admission, Permit | None]:
            first, second = reply_items(raw, 2)
            admission = admit.parse(first)
            return admission, acquire.parse(second) if admission.allowed else None

        def local() -> tuple[Admission, Permit | None]:
            admission = admit.local()
            return admission, acquire.local() if admission.allowed else None

        refusal = None if admit.refusal is None else (admit.refusal, None)
        return self._after_held(self._call("begin", key, (len(own), *own, *acquire.args[1:]),
                                           parse, local, refusal), "cycle", 1)

    def _after_held(self, call: Call[T], script: str, counts: int) -> Call[T]:
        """``call``, after the settlement held back under its key if there is one: then one
        script (``script``: the learn, the finish, then ``call``'s own parts, whose argument
        counts are the first ``counts`` of its arguments)."""
        with self._lock:
            held = self._settling.pop(call.key, None)
        if held is None:
            return call
        learn, outcome, at = held
        assert learn.throttle is not None  # noqa: S101 - deferrable() holds back none other
        first = self._learn(learn.key, aged(learn.throttle, self.clock.monotonic() - at),
                            learn.lease)
        second = self._finish(learn.key, outcome, False)
        parts = 2 + counts + 1  # the replies: learn, finish, then call's own

        def parse(raw: object) -> T:
            replies = reply_items(raw, parts)
            first.parse(replies[0])
            self._opened(second.parse(replies[1]))
            return call.parse(replies[2:] if parts > 3 else replies[2])

        def local() -> T:
            first.local()
            self._opened(second.local())
            return call.local()

        own = call.args[1:]
        return Call(call.key, script, call.keys,
                     (call.args[0], len(first.args) - 1, len(second.args) - 1, *own[:counts],
                      *first.args[1:], *second.args[1:], *own[counts:]), parse, local,
                     call.refusal)

    def _end(self, learn: Learn, outcome: Outcome[Any], probe: bool) -> Call[bool]:
        """A final attempt's learn and the operation's finish: one script when both are due."""
        first, second = self._learn(learn.key, learn.throttle, learn.lease), self._finish(
            learn.key, outcome, probe)
        if first.script is None:
            return second
        if second.script is None:
            return Call(first.key, first.script, first.keys, first.args,
                         lambda raw: bool(first.parse(raw)), lambda: bool(first.local()))
        own = first.args[1:]

        def parse(raw: object) -> bool:
            one, two = reply_items(raw, 2)
            first.parse(one)
            return second.parse(two)

        def local() -> bool:
            first.local()
            return second.local()

        return self._call("end", learn.key, (len(own), *own, *second.args[1:]), parse, local)
