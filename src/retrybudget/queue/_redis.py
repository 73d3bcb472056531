"""The Redis queue: one job shared by processes on many machines, on Redis's own primitives.

* a **stream with a consumer group**: an operation that is due is one stream entry; a worker
  takes entries with ``XREADGROUP`` and acknowledges them with ``XACK`` when its outcome is
  stored; an entry left unacknowledged longer than the visibility timeout (its worker died)
  is taken over with ``XAUTOCLAIM`` (Redis measures the idle time, so machines' clocks do
  not matter for leases);
* a **sorted set** of deferred operations scored by the instant they become due, moved into
  the stream once that instant has passed;
* one **hash per operation** (payload, status, counters, the current lease's token, the final
  record) and a list with its history.

Every change of an operation's state is one Lua script, so completing is atomic: it stores
the decision only while the caller's lease token is current, then acknowledges the entry. A
duplicate delivery (an entry for an operation that is already leased under another entry, or
already recorded) is acknowledged and skipped; it never produces a second outcome.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from .._clock import SYSTEM_CLOCK, Clock
from ._base import STATUSES, HeldLease, JobQueue, Lease, Operation, QueueError, check_id, check_payload
from ._decide import Decision, QueueConfig

__all__ = ["RedisQueue"]

GROUP = "workers"
"""The consumer group every worker of a queue reads through."""

_ENQUEUE = """
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[5]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'payload', ARGV[2], 'status', ARGV[5], 'deferrals', 0, 'leases', 0,
           'enqueued_at', ARGV[3], 'not_before', ARGV[4])
redis.call('RPUSH', KEYS[5], ARGV[1])
if ARGV[5] == 'pending' then
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[1])
else
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
end
return 1
"""

_PROMOTE = """
-- deferred operations due by ARGV[1] into the stream (in due order), then this worker's next
-- new entry: one round trip
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  if redis.call('HGET', KEYS[2], id) == 'deferred' then
    redis.call('HSET', KEYS[2], id, 'pending')
    redis.call('HSET', ARGV[2] .. id, 'status', 'pending')
    redis.call('XADD', KEYS[3], '*', 'id', id)
  end
end
return redis.call('XREADGROUP', 'GROUP', ARGV[4], ARGV[5], 'COUNT', 1, 'STREAMS', KEYS[3], '>')
"""

_BEGIN = """
local st = redis.call('HGET', KEYS[2], ARGV[1])
local held = redis.call('HGET', KEYS[1], 'entry')
if st ~= 'pending' and not (st == 'leased' and held == ARGV[2]) then
  redis.call('XACK', KEYS[3], ARGV[7], ARGV[2])
  redis.call('XDEL', KEYS[3], ARGV[2])
  return false
end
redis.call('HSET', KEYS[2], ARGV[1], 'leased')
redis.call('HSET', KEYS[1], 'status', 'leased', 'token', ARGV[3], 'worker', ARGV[4],
           'expires_at', ARGV[6], 'entry', ARGV[2])
local leases = redis.call('HINCRBY', KEYS[1], 'leases', 1)
local f = redis.call('HMGET', KEYS[1], 'payload', 'deferrals', 'enqueued_at', 'not_before')
return {leases, f[1], f[2], f[3], f[4]}
"""

_COMPLETE = """
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] or redis.call('HGET', KEYS[2], ARGV[1]) ~= 'leased' then
  return 0
end
local entry = redis.call('HGET', KEYS[1], 'entry')
redis.call('RPUSH', KEYS[6], ARGV[5])
redis.call('HDEL', KEYS[1], 'token', 'worker', 'expires_at', 'entry')
if ARGV[3] == 'defer' then
  redis.call('HSET', KEYS[2], ARGV[1], 'deferred')
  redis.call('HSET', KEYS[1], 'status', 'deferred', 'not_before', ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'deferrals', 1)
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
else
  local st = 'done'
  if ARGV[3] == 'dead_letter' then st = 'dead' end
  redis.call('HSET', KEYS[2], ARGV[1], st)
  redis.call('HSET', KEYS[1], 'status', st, 'result', ARGV[6])
  redis.call('RPUSH', KEYS[5], ARGV[1])
end
if entry then
  redis.call('XACK', KEYS[3], ARGV[7], entry)
  redis.call('XDEL', KEYS[3], entry)
end
return 1
"""

_REQUEUE = """
local st = redis.call('HGET', KEYS[2], ARGV[1])
if st == 'done' and ARGV[3] == '1' then
  local record = redis.call('HGET', KEYS[1], 'result')
  if not record or cjson.decode(record)['ok'] ~= false then return 0 end
elseif st ~= 'dead' then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], 'pending')
redis.call('HSET', KEYS[1], 'status', 'pending', 'deferrals', 0, 'enqueued_at', ARGV[2],
           'not_before', ARGV[2])
redis.call('HDEL', KEYS[1], 'result')
redis.call('LREM', KEYS[4], 0, ARGV[1])
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1])
return 1
"""

_RENEW = """
-- the holder's lease is still current: its stream entry's idle time starts again (XCLAIM by
-- the same consumer, JUSTID: the delivery count stays) and its expiry moves
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] or redis.call('HGET', KEYS[2], ARGV[2]) ~= 'leased' then
  return 0
end
local entry = redis.call('HGET', KEYS[1], 'entry')
if entry then
  redis.call('XCLAIM', KEYS[3], ARGV[4], ARGV[5], 0, entry, 'JUSTID')
end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[3])
return 1
"""

_RELEASE = """
-- an operation a dead worker holds back to pending: its entry acknowledged away, a new one added
if redis.call('HGET', KEYS[2], ARGV[1]) ~= 'leased' or redis.call('HGET', KEYS[1], 'worker') ~= ARGV[2] then
  return 0
end
local entry = redis.call('HGET', KEYS[1], 'entry')
redis.call('HDEL', KEYS[1], 'token', 'worker', 'expires_at', 'entry')
redis.call('HSET', KEYS[2], ARGV[1], 'pending')
redis.call('HSET', KEYS[1], 'status', 'pending')
if entry then
  redis.call('XACK', KEYS[3], ARGV[3], entry)
  redis.call('XDEL', KEYS[3], entry)
end
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1])
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisQueue(JobQueue):
    """A :class:`JobQueue` in Redis (needs the ``redis`` extra); every worker of a job shares it.

    Args:
        url: the Redis URL (``redis://host:port/db``, ``unix:///path``).
        name: the job's name: queues with the same URL and name are one queue.
        config: leases, deferrals, deadline and jitter.
        clock: where time comes from (for deferrals; leases use Redis's idle time).
        random: draws the jitter of deferrals.
        client: a client to use instead of connecting to ``url`` (its owner closes it).
        prefix: the key prefix.

    Raises:
        QueueError: the URL is invalid.
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", name: str = "default",
                 config: QueueConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 random: random.Random | None = None, client: redis.Redis | None = None,
                 prefix: str = "retrybudget:queue:") -> None:
        super().__init__(config, clock=clock, random=random)
        check_id(name)
        self.name = name
        self._own = client is None
        if client is None:
            try:
                client = redis.Redis.from_url(
                    url, socket_timeout=10.0, socket_connect_timeout=2.0,
                    retry=Retry(ExponentialBackoff(cap=0.5, base=0.02), 40),
                    retry_on_error=[redis.ConnectionError, redis.TimeoutError])
            except ValueError as exc:
                raise QueueError(f"invalid Redis URL ({exc})") from None
        self._r = client
        base = f"{prefix}{{{name}}}:"
        self._op = base + "op:"
        self._hist = base + "hist:"
        self._status = base + "status"
        self._stream = base + "stream"
        self._deferred = base + "deferred"
        self._order = base + "order"
        self._done = base + "done"
        self._runs = base + "runs"
        self._enqueue = self._r.register_script(_ENQUEUE)
        self._promote = self._r.register_script(_PROMOTE)
        self._begin = self._r.register_script(_BEGIN)
        self._complete = self._r.register_script(_COMPLETE)
        self._requeue = self._r.register_script(_REQUEUE)
        self._renew = self._r.register_script(_RENEW)
        self._release = self._r.register_script(_RELEASE)
        self._grouped = False

    def _group(self) -> None:
        if self._grouped:
            return
        try:
            self._r.xgroup_create(self._stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._grouped = True

    def enqueue(self, op_id: str, payload: Mapping[str, Any] | None = None, *,
                at: float | None = None) -> bool:
        """Add an operation (due at ``at``, default now); False if the id is already queued."""
        check_id(op_id)
        data = check_payload(payload)
        self._group()
        now = self.clock.wall()
        due = now if at is None else float(at)
        state = "pending" if due <= now else "deferred"
        keys = [self._op + op_id, self._status, self._stream, self._deferred, self._order]
        return bool(self._enqueue(keys=keys, args=[op_id, data, repr(now), repr(due), state]))

    def _take(self, worker: str, entry: str, op_id: str) -> Lease | None:
        now = self.clock.wall()  # after the read: another process may have promoted the entry
        token = uuid.uuid4().hex
        expires = now + self.config.visibility_timeout
        got = self._begin(keys=[self._op + op_id, self._status, self._stream],
                          args=[op_id, entry, token, worker, repr(now), repr(expires), GROUP])
        if not got:
            return None
        leases, payload, deferrals, enqueued_at, not_before = got
        return Lease(op_id, token, json.loads(_text(payload)), int(deferrals), int(leases),
                     float(enqueued_at), float(not_before), now, expires, worker, entry)

    def _next_entry(self, worker: str, now: float, idle: int) -> Any:
        """The next stream entry for ``worker``: a new one (deferred operations due by ``now``
        promoted first, in the same round trip), else one whose lease lapsed; [] if none."""
        read: Any = self._promote(keys=[self._deferred, self._status, self._stream],
                                  args=[repr(now), self._op, 100, GROUP, worker])
        if read:  # [[stream, [[entry, [field, value, ...]]]]], unparsed from a script
            return [(entry, dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {})
                    for entry, flat in read[0][1]]
        claimed: Any = self._r.xautoclaim(self._stream, GROUP, worker, idle, "0-0", count=1)
        return claimed[1] if len(claimed) > 1 else []

    def lease(self, worker: str) -> Lease | None:
        """Lease the next due operation, else a lapsed lease's; None when none is due."""
        self._group()
        idle = max(1, int(self.config.visibility_timeout * 1000))
        for _ in range(100):  # skipped duplicates: bounded
            entries = self._next_entry(worker, self.clock.wall(), idle)
            if not entries:
                return None
            entry, fields = entries[0][0], entries[0][1]
            if not fields:  # an entry deleted while pending: acknowledge it away
                self._r.xack(self._stream, GROUP, entry)
                continue
            op_id = _text(fields.get(b"id", fields.get("id", b"")))
            lease = self._take(worker, _text(entry), op_id)
            if lease is not None:
                return lease
        return None

    def _store(self, lease: Lease, decision: Decision, entry: dict[str, Any],
               record: dict[str, Any] | None) -> bool:
        op_id = lease.op_id
        keys = [self._op + op_id, self._status, self._stream, self._deferred, self._done,
                self._hist + op_id]
        args = [op_id, lease.token, decision.action.value,
                repr(decision.at if decision.at is not None else 0.0),
                json.dumps(entry, separators=(",", ":")),
                "" if record is None else json.dumps(record, separators=(",", ":")), GROUP]
        return bool(self._complete(keys=keys, args=args))

    def requeue(self, op_id: str | None = None, *, failed: bool = False) -> int:
        """Return dead-lettered (with ``failed``, also failed) operations to pending."""
        self._group()
        wanted = {"dead", "done"} if failed else {"dead"}
        if op_id is None:
            ids = [_text(k) for k, v in self._r.hgetall(self._status).items()
                   if _text(v) in wanted]
        else:
            ids = [check_id(op_id)]
        now = repr(self.clock.wall())
        return sum(int(self._requeue(keys=[self._op + i, self._status, self._stream, self._done],
                                     args=[i, now, "1" if failed else "0"])) for i in ids)

    def release_leases(self) -> int:
        """Release only the leases of this host's workers whose process is gone (workers on
        other machines may hold live leases: theirs end by completion, or lapse within the
        visibility timeout once their worker stops renewing them); how many."""
        return self.release(self.dead_holders())

    def begin_run(self) -> int:
        """Number a run of the job (a process starting on it): 1, 2, … across every process,
        so each process tells what it recorded in this run from what earlier runs did."""
        return int(self._r.incr(self._runs))

    def renew(self, lease: Lease) -> bool:
        """Extend ``lease``: its entry's idle time starts again, its expiry moves."""
        expires = self.clock.wall() + self.config.visibility_timeout
        try:
            return bool(self._renew(keys=[self._op + lease.op_id, self._status, self._stream],
                                    args=[lease.token, lease.op_id, repr(expires), GROUP,
                                          lease.worker]))
        except redis.RedisError as exc:
            raise QueueError(f"cannot renew a lease ({type(exc).__name__})") from None

    def held(self) -> list[HeldLease]:
        """Every current lease, ordered by expiry."""
        ids = sorted(_text(k) for k, v in self._r.hgetall(self._status).items()
                     if _text(v) == "leased")
        pipe = self._r.pipeline(transaction=False)
        for op_id in ids:
            pipe.hmget(self._op + op_id, "worker", "expires_at")
        out = [HeldLease(op_id, _text(worker or b""), float(_text(expires or b"0")))
               for op_id, (worker, expires) in zip(ids, pipe.execute(), strict=True)]
        return sorted(out, key=lambda h: (h.expires_at, h.op_id))

    def release(self, workers: Collection[str]) -> int:
        """Return the operations ``workers`` hold to pending; how many."""
        names = set(workers)
        if not names:
            return 0
        self._group()
        return sum(int(self._release(keys=[self._op + h.op_id, self._status, self._stream],
                                     args=[h.op_id, h.worker, GROUP]))
                   for h in self.held() if h.worker in names)

    def counts(self) -> dict[str, int]:
        """Operations by status (zeros included)."""
        seen = Counter(_text(v) for v in self._r.hvals(self._status))
        out = dict.fromkeys(STATUSES, 0)
        out.update(seen)
        return out

    def _operations(self, ids: list[str]) -> list[Operation]:
        pipe = self._r.pipeline(transaction=False)
        for op_id in ids:
            pipe.hgetall(self._op + op_id)
            pipe.lrange(self._hist + op_id, 0, -1)
        replies = pipe.execute()
        out = []
        for op_id, raw, history in zip(ids, replies[::2], replies[1::2], strict=True):
            if not raw:
                continue
            f = {_text(k): _text(v) for k, v in raw.items()}
            result = f.get("result")
            out.append(Operation(op_id, f["status"], json.loads(f["payload"]), int(f["deferrals"]),
                                 int(f["leases"]), float(f["enqueued_at"]), float(f["not_before"]),
                                 tuple(json.loads(_text(h)) for h in history),
                                 json.loads(result) if result else None))
        return out

    def get(self, op_id: str) -> Operation | None:
        """One operation, or None."""
        found = self._operations([op_id])
        return found[0] if found else None

    def export(self) -> Iterator[Operation]:
        """Every recorded operation (done or dead), in recording order."""
        ids = [_text(i) for i in self._r.lrange(self._done, 0, -1)]
        return iter(self._operations(ids))

    def operations(self) -> list[Operation]:
        """Every operation, in enqueue order."""
        return self._operations([_text(i) for i in self._r.lrange(self._order, 0, -1)])

    def next_due(self) -> float | None:
        """The earliest instant a deferred operation becomes due, or None."""
        first = self._r.zrange(self._deferred, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def close(self) -> None:
        """Close the connection pool, if this queue opened it."""
        if self._own:
            self._r.close()

    @property
    def client(self) -> redis.Redis:
        """The Redis client (for inspection)."""
        return self._r


def check_reachable(url: str) -> None:
    """Raise :class:`QueueError` unless a Redis server at ``url`` answers a PING within a second."""
    shown = url.rsplit("@", 1)[-1]  # never show a password from the URL
    try:
        probe = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)
        try:
            probe.ping()
        finally:
            probe.close()
    except ValueError as exc:
        raise QueueError(f"{shown}: invalid Redis URL ({exc})") from None
    except (redis.RedisError, OSError) as exc:
        raise QueueError(f"{shown}: Redis is unreachable ({type(exc).__name__})") from None
