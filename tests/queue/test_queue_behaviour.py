"""The job queue's behaviour, once per backend (SQLite and a real redis-server)."""

from __future__ import annotations

import pytest

from retrybudget.core.outcome import Reason
from retrybudget.queue import Action, QueueConfig, QueueError
from tests.support.queue import QueueBackend, outcome

pytest_plugins = ("tests.support.queue",)


def test_enqueue_is_idempotent_on_the_operation_id(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    assert q.enqueue("a", {"url": "u"}) is True
    assert q.enqueue("a", {"url": "other"}) is False
    assert q.counts()["pending"] == 1
    op = q.get("a")
    assert op is not None
    assert op.payload == {"url": "u"}


def test_a_lease_hides_the_operation_until_it_lapses(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    q.enqueue("a")
    first = q.lease("w1")
    assert first is not None
    assert first.op_id == "a"
    assert first.leases == 1
    assert q.lease("w2") is None
    qbackend.lapse()
    second = q.lease("w2")
    assert second is not None
    assert second.op_id == "a"
    assert second.leases == 2
    assert q.complete(first, outcome(Reason.OK)) is None  # stale: nothing recorded
    decision = q.complete(second, outcome(Reason.OK), {"v": 1})
    assert decision is not None
    assert decision.ok
    assert q.counts()["done"] == 1
    [done] = list(q.export())
    assert done.result is not None
    assert done.result["result"] == {"v": 1}
    assert [h["worker"] for h in done.history] == ["w2"]


def test_success_completes_once(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    q.enqueue("a")
    lease = q.lease("w")
    assert lease is not None
    assert q.complete(lease, outcome(Reason.OK)) is not None
    assert q.complete(lease, outcome(Reason.OK)) is None
    assert q.lease("w") is None
    assert q.pending() == 0
    assert len(list(q.export())) == 1


@pytest.mark.parametrize("reason", ["rejected", "not_found", "invalid_payload", "unexpected",
                                    "not_retried"])
def test_a_non_retryable_outcome_fails_and_is_never_requeued(qbackend: QueueBackend,
                                                              reason: str) -> None:
    q = qbackend.make()
    q.enqueue("a")
    lease = q.lease("w")
    assert lease is not None
    decision = q.complete(lease, outcome(reason, retry_at=qbackend.clock.wall() + 5))
    assert decision is not None
    assert decision.action is Action.COMPLETE
    assert not decision.ok
    qbackend.lapse()
    assert q.lease("w") is None
    op = q.get("a")
    assert op is not None
    assert op.status == "done"
    assert op.result is not None
    assert op.result["ok"] is False
    assert op.result["outcome"] == reason


def test_rate_limited_waits_for_retry_at_and_keeps_its_history(qbackend: QueueBackend) -> None:
    q = qbackend.make(QueueConfig(visibility_timeout=qbackend.visibility, jitter=0.0))
    clock = qbackend.clock
    q.enqueue("a")
    lease = q.lease("w")
    assert lease is not None
    retry_at = clock.wall() + 120
    decision = q.complete(lease, outcome(Reason.RATE_LIMITED, retry_at))
    assert decision is not None
    assert decision.action is Action.DEFER
    assert decision.at == retry_at
    assert q.next_due() == retry_at
    assert q.counts()["deferred"] == 1
    assert q.lease("w") is None
    qbackend.clock.advance(119.9)  # type: ignore[attr-defined]
    assert q.lease("w") is None  # not one moment early
    qbackend.clock.advance(0.2)  # type: ignore[attr-defined]
    again = q.lease("w")
    assert again is not None
    assert again.deferrals == 1
    assert again.not_before == retry_at
    assert q.complete(again, outcome(Reason.OK)) is not None
    op = q.get("a")
    assert op is not None
    assert [h["outcome"] for h in op.history] == ["rate_limited", "ok"]
    assert [h["action"] for h in op.history] == ["defer", "complete"]


def test_deferrals_run_out_into_the_dead_letters_and_requeue_brings_them_back(
        qbackend: QueueBackend) -> None:
    q = qbackend.make(QueueConfig(visibility_timeout=qbackend.visibility, max_deferrals=2,
                                  jitter=0.0, backoff=1.0))
    q.enqueue("a")
    actions = []
    for _ in range(3):
        lease = q.lease("w")
        assert lease is not None
        decision = q.complete(lease, outcome(Reason.EXHAUSTED))
        assert decision is not None
        actions.append(decision.action)
        qbackend.clock.advance(10)  # type: ignore[attr-defined]
    assert actions == [Action.DEFER, Action.DEFER, Action.DEAD_LETTER]
    assert q.counts()["dead"] == 1
    assert q.lease("w") is None
    [dead] = list(q.export())
    assert dead.status == "dead"
    assert q.requeue() == 1
    assert q.requeue("a") == 0
    lease = q.lease("w")
    assert lease is not None
    assert lease.deferrals == 0
    assert q.complete(lease, outcome(Reason.OK)) is not None
    assert [op.status for op in q.export()] == ["done"]


def test_the_job_deadline_dead_letters_a_deferral_that_would_pass_it(qbackend: QueueBackend) -> None:
    q = qbackend.make(QueueConfig(visibility_timeout=qbackend.visibility, deadline=60.0, jitter=0.0))
    q.enqueue("a")
    lease = q.lease("w")
    assert lease is not None
    decision = q.complete(lease, outcome(Reason.RATE_LIMITED, qbackend.clock.wall() + 61))
    assert decision is not None
    assert decision.action is Action.DEAD_LETTER


def test_an_operation_enqueued_for_later_is_not_due_before(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    at = qbackend.clock.wall() + 30
    assert q.enqueue("later", at=at)
    q.enqueue("now")
    lease = q.lease("w")
    assert lease is not None
    assert lease.op_id == "now"
    assert q.lease("w") is None
    assert q.complete(lease, outcome(Reason.OK)) is not None
    qbackend.clock.advance(30)  # type: ignore[attr-defined]
    lease = q.lease("w")
    assert lease is not None
    assert lease.op_id == "later"


def test_two_handles_share_one_queue_and_each_op_goes_to_one(qbackend: QueueBackend) -> None:
    a, b = qbackend.make(), qbackend.make()
    for n in range(10):
        a.enqueue(f"op{n}")
    got = []
    for q in (a, b) * 5:
        lease = q.lease("w")
        assert lease is not None
        got.append(lease.op_id)
        q.complete(lease, outcome(Reason.OK))
    assert sorted(got) == sorted(f"op{n}" for n in range(10))
    assert a.lease("w") is None
    assert b.pending() == 0


def test_bad_ids_and_payloads_are_typed_errors(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    for bad in ("", "x" * 201, "a\nb", 7):
        with pytest.raises(QueueError):
            q.enqueue(bad)  # type: ignore[arg-type]
    with pytest.raises(QueueError):
        q.enqueue("a", {"x": object()})
    with pytest.raises(QueueError):
        q.enqueue("a", [1])  # type: ignore[arg-type]


def test_a_queue_success_needs_a_provider_success(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    for n, reason in enumerate(Reason):
        q.enqueue(f"op{n}")
        lease = q.lease("w")
        assert lease is not None
        decision = q.complete(lease, outcome(reason))
        assert decision is not None
        assert decision.ok is (reason is Reason.OK)
    for op in q.export():
        assert op.result is not None
        assert op.result["ok"] is (op.result["outcome"] == "ok")


def test_requeue_failed_brings_back_failures_but_never_a_success(qbackend: QueueBackend) -> None:
    q = qbackend.make()
    for op, reason in (("good", Reason.OK), ("bad", Reason.REJECTED)):
        q.enqueue(op)
        lease = q.lease("w")
        assert lease is not None
        q.complete(lease, outcome(reason))
    assert q.requeue() == 0
    assert q.requeue("good", failed=True) == 0
    assert q.requeue(failed=True) == 1
    lease = q.lease("w")
    assert lease is not None
    assert lease.op_id == "bad"
    assert [op.op_id for op in q.export()] == ["good"]
