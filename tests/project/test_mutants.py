"""The contract-critical mutants: each plausible one-line bug must fail its named tests.

Each mutant is a text replacement in one source file. The test copies the package into a
temporary directory, applies the replacement there, and runs the named tests against the copy
(first on the import path) in a subprocess: they must fail. The working tree is never changed.
If a replacement no longer matches the source (the code was rewritten), the test fails and
says so: the mutant must be updated to the new code, not dropped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import retrybudget

PACKAGE = Path(retrybudget.__file__).parent
ROOT = PACKAGE.parent.parent
EXACT = "tests/core/test_rules_exact.py::"
FLOW = "tests/core/test_flow_exact.py::"
POLICY = "tests/core/test_policy_exact.py::"
PROVIDERS = "tests/core/test_providers.py::"
TOKENS = "tests/coordination/test_coordination_tokens.py::"


@dataclass(frozen=True)
class Mutant:
    """A one-line bug: replace ``old`` with ``new`` in ``path`` (relative to the package)."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    # a settlement held back that tightens the shared state: a throttle, a low quota
    Mutant(
        "throttle-held-back", "coordination/_settle.py",
        "if throttle is None or throttle.throttled:", "if throttle is None:",
        # a throttled answer is also low or a failure in every real flow: the property sees it
        ("tests/coordination/test_coordination_redis_work.py::"
         "test_only_a_healthy_success_far_from_the_quota_is_held_back",),
    ),
    Mutant(
        "low-quota-held-back", "coordination/_settle.py",
        "return pacing_interval(window, 0.0, config.pacing) <= 0", "return True",
        ("tests/coordination/test_coordination_redis_work.py::test_a_low_quota_is_shared_at_once",),
    ),
    Mutant(
        "no-reset-slack", "core/decide.py",
        "hint.delay + (profile.reset_slack if hint.delay > 0 else 0.0)", "hint.delay + 0.0",
        (EXACT + "test_github_reset_wait_is_exactly_the_reset_plus_one_second",
         "tests/core/test_rules.py::test_github_primary_limit_waits_for_the_reset_plus_a_second",
         "tests/acceptance/test_acceptance_offline.py::test_case_passes[A08]"),
    ),
    Mutant(
        "no-max-server-wait-for-a-503", "core/decide.py",
        "if cap is not None and hint.delay > cap:",
        "if False:",
        (EXACT + "test_a_503_retry_after_over_max_server_wait_stops_now_with_retry_at",),
    ),
    Mutant(
        "concurrency-wait-ends-rate-limited", "core/decide.py",
        "ends = Reason.DEADLINE if reason is WaitReason.CONCURRENCY else Reason.RATE_LIMITED",
        "ends = Reason.RATE_LIMITED",
        (EXACT + "test_a_concurrency_wait_past_the_deadline_ends_with_deadline",),
    ),
    Mutant(
        "doubling-restarts-after-the-gate-opened", "coordination/_logic/_gate.py",
        "if since_gate > throttle.floor:", "if since_gate > 0:",
        (EXACT + "test_a_429_within_one_floor_after_the_gate_opened_doubles_the_gate",
         EXACT + "test_the_gate_keeps_doubling_while_429s_keep_coming_after_each_opening"),
    ),
    Mutant(
        "2xx-conflicts-dropped", "core/classify.py",
        "and not observation.payload_error and not rate.conflicts",
        "and not observation.payload_error",
        (EXACT + "test_conflicting_headers_on_a_2xx_are_flagged_in_the_outcome",),
    ),
    Mutant(
        "one-attempt-too-many", "core/decide.py",
        "attempts_left = state.attempts + 1 < policy.max_attempts",
        "attempts_left = state.attempts + 1 <= policy.max_attempts",
        (EXACT + "test_a_transient_failure_takes_exactly_max_attempts_and_no_wait_after_the_last",
         EXACT + "test_a_rate_limit_on_the_last_attempt_stops_rate_limited_without_waiting"),
    ),
    # a stop before the attempt (no time left after a coordinator wait) keeps its lease: the
    # concurrency slot would stay taken until it expired
    Mutant(
        "lease-kept-on-a-stop-before-the-attempt", "core/flow.py",
        "yield actions.Learn(bucket, None, permit.lease, report)",
        "yield actions.Learn(bucket, None, None, report)",
        (FLOW + "test_a_coordinator_wait_that_eats_the_attempt_time_stops_with_deadline_and_"
                "gives_the_lease_back",),
    ),
    # a half-open probe stopped at the coordinator is reported as an ordinary operation: the
    # breaker would wait for a probe that never reports
    Mutant(
        "probe-forgotten-on-a-coordinator-stop", "core/flow.py",
        "return (yield from finish(step, probe))",
        "return (yield from finish(step, False))",
        (FLOW + "test_every_stop_after_admission_reports_whether_it_was_a_probe",),
    ),
    # a rate limit that names now (Retry-After: 0, a reset already gone) retried at once with
    # no backoff: a burst against a throttling provider (rule 5)
    Mutant(
        "a-429-naming-now-retried-at-once", "core/decide.py",
        "if delay <= 0:  # the provider named now or a past time: no burst, back off",
        "if delay < 0:  # the provider named now or a past time: no burst, back off",
        (EXACT + "test_a_retry_after_of_zero_on_a_429_takes_the_policys_backoff",
         EXACT + "test_a_reset_that_is_now_adds_no_slack_and_backs_off"),
    ),
    # every Discord 429 without a scope header read as the global limit: one route's limit
    # would hold every route of the key (rule 4)
    Mutant(
        "every-discord-429-global", "core/classify.py",
        'if value == "true":', 'if value != "true":',
        (PROVIDERS + "test_discord_names_the_global_limit_by_its_global_header_alone",),
    ),
    # the backoff's cap dropped: waits between failures grow without bound (rule 2)
    Mutant(
        "backoff-uncapped", "core/policy.py",
        "raw = min(self.cap, self.base * self.multiplier**exponent)",
        "raw = self.base * self.multiplier**exponent",
        (POLICY + "test_backoff_without_jitter_is_base_times_multiplier_to_the_retry_capped",
         POLICY + "test_full_jitter_is_the_sample_share_of_the_capped_delay"),
    ),
    # before any roll, the held beyond the first release all asked again one spread later:
    # a job queue deferred them to one instant and leased them late (the release by quota)
    Mutant(
        "first-window-bound-ignored", "coordination/_logic/_slots.py",
        "step = max(at - s.first, spread)  # a lower bound of the window's length",
        "step = None  # a lower bound of the window's length",
        ("tests/coordination/test_coordination_exact.py::"
         "test_before_any_roll_the_first_request_to_the_reset_bounds_the_window_from_below",),
    ),
    # a healthy key's one-step plan taken while a herd is being released: a request goes at
    # once where plan_slot would have queued it a spread behind the held workers
    Mutant(
        "went-now-ignores-the-herd", "coordination/_logic/_slots.py",
        "now < s.gate or s.herd > now",
        "now < s.gate",
        ("tests/coordination/test_coordination_logic.py::"
         "test_a_request_that_goes_at_once_is_planned_and_sent_in_one_step",),
    ),
    # a healthy key's merged admit and acquire blind to a herd being released: a newcomer
    # goes at once where acquire spaces it a spread behind the herd's last slot
    Mutant(
        "healthy-key-ignores-the-herd", "coordination/_memory.py",
        "or k.slots or now < s.gate or s.herd > now",
        "or k.slots or now < s.gate",
        ("tests/coordination/test_coordination_memory.py::"
         "test_a_healthy_key_releasing_its_herd_is_answered_as_acquire_answers_it",),
    ),
    # a healthy key's few steps blind to the opt-in probing of an unknown limit: a waiting
    # caller goes at once while the probe is out, where acquire holds it
    Mutant(
        "healthy-key-ignores-the-probing", "coordination/_memory.py",
        "or (pacing.probe_unknown_limit and still_probing(s, now))):",
        "or False):",
        ("tests/coordination/test_coordination_memory.py::"
         "test_a_key_probed_for_its_unknown_limit_is_answered_as_acquire_answers_it",),
    ),
    # the reservations from the release on counted as one line: asks again crowding the
    # release's window push every later booking out, and a window is left with none
    Mutant(
        "release-books-one-line", "coordination/_logic/_slots.py",
        "    windows = 0\n",
        "    return at + (booked // quota) * step, booked + 1\n    windows = 0\n",
        ("tests/coordination/test_coordination_exact.py::"
         "test_the_first_window_short_of_its_quota_is_filled_before_a_later_one",),
    ),
    # arq's early start not caught: a job another worker just deferred runs before retry_at
    Mutant(
        "arq-early-start-runs", "queue/arq.py",
        "if isinstance(due, int) and due / 1000 > clock.wall():",
        "if False:",
        ("tests/queue/test_queue_engines.py::"
         "test_arq_on_time_defers_an_early_start_to_its_score_and_gives_the_try_back",),
    ),
    # a running operation's lease not renewed: a slow operation is taken by another worker
    Mutant(
        "lease-not-renewed", "queue/_base.py",
        "with queue.keep(lease):",
        "with contextlib.nullcontext():",
        ("tests/queue/test_queue_leases.py::"
         "test_drain_keeps_the_lease_of_an_operation_slower_than_the_timeout",),
    ),
    # a caller that will not wait for its slot books it anyway: every refusal at a gate
    # pushes the herd's tail a spread further, and a short 429 becomes an outage
    Mutant(
        "a-refusal-reserves-its-slot", "coordination/_memory.py",
        "return permit  # it stops: nothing reserved",
        "pass  # it stops: nothing reserved",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_a_caller_that_would_not_wait_reserves_no_slot[memory]",
         "tests/coordination/test_coordination_waits.py::"
         "test_no_wait_exceeds_the_hint_plus_one_window_and_a_refusal_reserves_nothing"),
    ),
    # a fail_fast caller's slot not bounded by the herd window: its wait grows with the
    # number of workers ahead of it, far past what the provider asked
    Mutant(
        "herd-window-ignored", "coordination/_logic/_slots.py",
        "if bounded and slot > opens + gate.herd_window:",
        "if False:",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_a_fail_fast_caller_is_placed_within_one_herd_window[memory]",
         "tests/coordination/test_coordination_behaviour.py::"
         "test_fail_fast_slots_paced_past_the_reset_lie_within_one_herd_window_of_it[memory]"),
        # (the wait property catches it too, but only when its search reaches a fail_fast
        # caller past a long herd: at the README's example count, not every run)
    ),
    # a first window that waits for its probe's answer without end: a probe whose holder was
    # SIGKILLed never answers, and every other worker sharing the key stalls until its lease
    # lapses
    Mutant(
        "probe-waited-for-without-end", "coordination/_logic/_slots.py",
        "and (now - s.first < PROBE_PATIENCE if not s.answered",
        "and (True if not s.answered",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_a_first_window_probe_whose_holder_died_holds_the_others_only_for_the_patience[memory]",
         "tests/coordination/test_coordination_logic.py::"
         "test_a_first_window_whose_probes_never_answer_lets_one_more_probe_go_per_patience"),
    ),
    # a key whose answers name no quota probed one request at a time without end: a provider
    # that never throttles is held to one request in flight for good, not for one span
    Mutant(
        "probing-without-end", "coordination/_logic/_slots.py",
        "return s.answered and s.gate == NEVER and 0.0 <= now - s.answered_at < SPAN",
        "return s.answered and s.gate == NEVER and 0.0 <= now - s.answered_at",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_a_key_whose_answers_name_no_quota_is_probed_one_request_at_a_time_for_a_span[memory]",
         "tests/coordination/test_coordination_logic.py::"
         "test_a_key_naming_no_quota_is_probed_for_a_span_after_its_first_answer_when_opted_in"),
    ),
    # the probing holds fail-fast callers too: an interactive lookup is refused or delayed by
    # a guess, not by anything the provider said
    Mutant(
        "probing-holds-fail-fast", "coordination/_logic/_slots.py",
        "return not fail_fast and (max_wait is None or max_wait >= spread)",
        "return max_wait is None or max_wait >= spread",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_with_probe_unknown_limit_an_answer_without_quota_headers_starts_a_span_of_probing"
         "[memory]",
         "tests/coordination/test_coordination_logic.py::"
         "test_a_key_naming_no_quota_is_probed_for_a_span_after_its_first_answer_when_opted_in"),
    ),
    # the probing is on whatever the configuration says: every provider that publishes no
    # quota and never throttles is slowed to one request at a time for a second per key
    Mutant(
        "probing-by-default", "coordination/_logic/_slots.py",
        "else waits and pacing.probe_unknown_limit and still_probing(s, now)",
        "else waits and still_probing(s, now)",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_waiting_callers_of_a_key_whose_answer_named_no_quota_go_at_once_unless_opted_in"
         "[memory-default]",
         "tests/coordination/test_coordination_logic.py::"
         "test_a_key_naming_no_quota_is_probed_for_a_span_after_its_first_answer_when_opted_in"),
    ),
    # the Redis script probes whatever the configuration says (the option never reaches it)
    Mutant(
        "probing-by-default-on-redis", "coordination/lua/acquire.lua",
        "local probe_unknown = ARGV[16] == '1'",
        "local probe_unknown = true",
        ("tests/coordination/test_coordination_behaviour.py::"
         "test_waiting_callers_of_a_key_whose_answer_named_no_quota_go_at_once_unless_opted_in"
         "[redis-default]",),
    ),
    # a throttle that names no quota leaves the fleet at the rate it was refused at: the
    # learned rate starts at the peak instead of BETA below it, and the next window is over
    Mutant(
        "learned-rate-not-cut", "coordination/_logic/_learned.py",
        "    if since < k:\n",
        "    if False:\n",
        ("tests/coordination/test_coordination_learned.py::"
         "test_a_throttle_naming_no_quota_cuts_to_beta_of_the_rate_the_provider_admitted",
         "tests/coordination/test_coordination_learned.py::"
         "test_the_learned_rate_stays_bounded_cuts_by_beta_and_spaces_every_slot",
         "tests/coordination/test_coordination_learned.py::"
         "test_the_memory_backend_plans_the_learned_gaps_exactly"),
    ),
    # a token charge that goes while its window is not yet full, whether or not all of it
    # fits what is left: every window ends over its limit by up to one request's cost
    Mutant(
        "token-charge-not-counted", "coordination/_logic/_tokens.py",
        "ledger.used + charge <= ledger.limit", "ledger.used < ledger.limit",
        (TOKENS + "test_a_charge_goes_only_when_all_of_it_fits_what_the_window_has_left[memory]",
         TOKENS + "test_a_window_never_admits_more_tokens_than_its_limit"),
    ),
    Mutant(
        "token-charge-not-counted-on-redis", "coordination/lua/tokens.lua",
        "d.used + charge <= d.limit", "d.used < d.limit",
        (TOKENS + "test_a_charge_goes_only_when_all_of_it_fits_what_the_window_has_left[redis]",
         TOKENS + "test_on_redis_a_window_never_admits_more_tokens_than_its_limit"),
    ),
    # a 429 that refused tokens only read as a requests' limit: it closes the requests' gate,
    # and requests that cost no tokens wait with the rest
    Mutant(
        "a-tokens-429-closes-the-requests-gate", "coordination/_tokens.py",
        'throttled = throttle.throttled and (not refused or "requests" in refused)',
        "throttled = throttle.throttled",
        (TOKENS + "test_a_tokens_429_gates_the_token_dimension_only[memory]",
         TOKENS + "test_a_tokens_429_gates_the_token_dimension_only[redis]"),
    ),
    # the provider's count not adopted from an answer within the window: estimates that ran
    # high stay counted, and the window is left part empty
    Mutant(
        "token-count-not-reconciled", "coordination/_logic/_tokens.py",
        "else max(low, min(ledger.used, low + in_flight))", "else max(low, ledger.used)",
        (TOKENS + "test_an_answer_lowers_the_count_to_the_providers[memory]",),
    ),
    Mutant(
        "token-count-not-reconciled-on-redis", "coordination/lua/tokens.lua",
        "d.used = math.max(low, math.min(d.used, low + in_flight))",
        "d.used = math.max(low, d.used)",
        (TOKENS + "test_an_answer_lowers_the_count_to_the_providers[redis]",),
    ),
    # a usage read late corrects a window other than the one its charge was counted in: the
    # count of the window after it loses what it never held, and the window is overfilled
    Mutant(
        "late-correction-in-a-window-gone", "coordination/_logic/_tokens.py",
        "if amount == 0 or window != ledger.window or ledger.remaining is not None:",
        "if amount == 0 or ledger.remaining is not None:",
        (TOKENS + "test_a_usage_read_late_for_a_window_gone_corrects_nothing_in_the_next[memory]",),
    ),
    Mutant(
        "late-correction-in-a-window-gone-on-redis", "coordination/lua/tokens.lua",
        "if amount == 0 or window ~= d.window or d.remaining ~= nil then return end",
        "if amount == 0 or d.remaining ~= nil then return end",
        (TOKENS + "test_a_usage_read_late_for_a_window_gone_corrects_nothing_in_the_next[redis]",),
    ),
    # a usage read late lowers a count an answer named (the provider's, which already holds
    # the request as the provider counted it): the window is counted short
    Mutant(
        "late-correction-below-the-providers-count", "coordination/_logic/_tokens.py",
        "if amount == 0 or window != ledger.window or ledger.remaining is not None:",
        "if amount == 0 or window != ledger.window:",
        (TOKENS + "test_a_usage_read_late_leaves_a_count_an_answer_named[memory]",),
    ),
    # an answer handed over unwatched: a body the caller reads later (a stream, a completion
    # the SDK parses) never corrects the estimate, which drifts by every answer's difference
    Mutant(
        "usage-body-not-watched", "integrations/_tokens.py",
        "self.watch(response, late)", "late = None",
        ("tests/integrations/test_sdk_token_usage.py::"
         "test_the_count_is_the_providers_once_the_body_is_read[memory-openai-sync-stream]",
         "tests/integrations/test_sdk_token_usage.py::"
         "test_the_count_is_the_providers_once_the_body_is_read[redis-anthropic-async-whole]"),
    ),
    Mutant(
        "requests-stream-not-watched", "integrations/_requests_usage.py",
        "response.raw = _WatchedRaw(response.raw, response.headers, late)", "pass",
        ("tests/integrations/test_requests_token_usage.py::"
         "test_the_count_is_the_providers_once_the_body_is_read[memory-openai-stream]",),
    ),
    Mutant(
        "aiohttp-content-not-watched", "integrations/_aiohttp_usage.py",
        "if isinstance(content, StreamReader):", "if False:",
        ("tests/integrations/test_aiohttp_token_usage.py::"
         "test_the_count_is_the_providers_once_the_body_is_read[memory-openai-stream]",),
    ),
    # an attempt nothing can cut started with less time left than the longest one took: a
    # provider that hangs keeps a decorated sync function past its deadline (rule 13)
    Mutant(
        "uncut-attempt-started-short", "core/decide.py",
        "return max(policy.min_attempt_time, state.longest_unbounded, took)",
        "return policy.min_attempt_time",
        ("tests/core/test_rules.py::"
         "test_a_plain_call_starts_no_attempt_as_long_as_its_last_past_the_deadline",),
    ),
    # the requests watchdog shuts the connection's current socket, which http.client drops
    # once a head says the body ends with the close: such a body trickles on (rule 13)
    Mutant(
        "requests-close-delimited-body-uncut", "integrations/requests.py",
        "sock = connection._held", "sock = connection.sock",
        ("tests/integrations/test_deadline_exchange.py::"
         "test_requests_cuts_a_short_trickled_final_body_at_the_deadline",),
    ),
]


def run_tests(package_parent: Path | None, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Run ``tests`` in a subprocess, importing ``retrybudget`` from ``package_parent``."""
    env = dict(os.environ)
    if package_parent is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(package_parent), env.get("PYTHONPATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )


def mutated_copy(mutant: Mutant, into: Path) -> Path:
    """A copy of the package with ``mutant`` applied; returns the directory to import from."""
    copy = into / "retrybudget"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / mutant.path
    text = target.read_text(encoding="utf-8")
    assert text.count(mutant.old) == 1, (
        f"mutant {mutant.name}: {mutant.old!r} no longer appears once in {mutant.path}; "
        "update the mutant to the rewritten code"
    )
    target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
    return into


def test_every_mutants_tests_pass_on_the_real_source() -> None:
    tests = tuple(dict.fromkeys(t for m in MUTANTS for t in m.tests))
    result = run_tests(None, tests)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_the_mutant_is_killed(mutant: Mutant, tmp_path: Path) -> None:
    parent = mutated_copy(mutant, tmp_path)
    result = run_tests(parent, mutant.tests)
    # 1: tests ran and failed (not 2/4: a collection or usage error would prove nothing)
    assert result.returncode == 1, (mutant.name, result.returncode, result.stdout[-3000:])
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED ")]
    # every named test (or one of its parameters) fails on the mutant
    for test in mutant.tests:
        assert any(line.startswith(f"FAILED {test}") for line in failed), (
            mutant.name, test, result.stdout[-3000:])
