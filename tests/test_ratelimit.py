"""The shared model rate limit: its arithmetic on an explicit clock, then real clients and runs against
loopback stand-ins that time-stamp every request they receive."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import pickle
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from autogen_core.models import ChatCompletionClient, CreateResult, SystemMessage, UserMessage

import pse
from pse.config import Settings, load_settings
from pse.engine import load_trace
from pse.exceptions import ConfigError
from pse.models import (
    RETRY_AFTER_CAP_S,
    Admission,
    CallUsage,
    Grant,
    LimitKey,
    Limits,
    LimitState,
    LocalLimiter,
    RateLimiter,
    ResilientChatCompletionClient,
    create_model_client,
    install_limiter_backend,
    limiter_for,
    message_texts,
    retry_after_s,
)
from pse.roles import Role
from pse.tasks import TaskRegistry
from pse.tokens import count_message_tokens
from replay_support import usage_of
from standins import ChatStandIn, Reply

KEY: LimitKey = ("openai", "http://127.0.0.1:1/v1")
ASK = [SystemMessage(content="You are the Planner."), UserMessage(content="Sort a list.", source="user")]


@pytest.fixture(autouse=True)
def limiter() -> Iterator[LocalLimiter]:
    """A fresh process-wide limiter for each test, the previous one put back after it."""
    fresh = LocalLimiter()
    previous = install_limiter_backend(fresh)
    yield fresh
    install_limiter_backend(previous)


def _settings(stand_in: ChatStandIn, **extra: object) -> Settings:
    values: dict[str, object] = {
        "provider": "openai",
        "model": "m-test",
        "base_url": stand_in.url,
        "api_key": "sk-test-key-0123456789abcdef",
        "model_backoff_s": 0.01,
        "model_timeout_s": 10.0,
        "model_max_retries": 2,
    }
    return load_settings(**(values | extra))


Make = Callable[..., ChatCompletionClient]


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    """`make(settings, usages, role)`: a model client built as a run builds it, closed after the test."""
    made: list[ChatCompletionClient] = []

    def build(settings: Settings, usages: list[CallUsage], role: str = Role.PLANNER) -> ChatCompletionClient:
        made.append(create_model_client(settings, role, meter=usages.append))
        return made[-1]

    yield build
    for client in made:
        await client.close()


async def _until(condition: Callable[[], bool], guard_s: float = 60.0) -> None:
    """Wait until `condition` holds (the guard only keeps a broken test from hanging)."""
    deadline = time.monotonic() + guard_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.01)


def _most_in_window(times: list[float], window_s: float) -> int:
    """The most requests any half-open window [t, t + window_s) holds."""
    times = sorted(times)
    return max((sum(1 for u in times if t <= u < t + window_s) for t in times), default=0)


# --- the arithmetic, on an explicit clock ---------------------------------------------------------


def test_requests_are_spaced_evenly_so_no_window_of_a_minute_or_a_second_holds_more_than_the_rpm() -> None:
    state, limits = LimitState(), Limits(rpm=120)
    assert state.admit(KEY, 0.0, limits) == Admission(1)
    assert state.admit(KEY, 0.2, limits) == Admission(None, 0.3)
    assert state.admit(KEY, 0.5, limits) == Admission(2)
    starts, now = [0.0, 0.5], 0.5
    while now < 180.0:  # a caller that asks again exactly when told to, for three minutes
        admission = state.admit(KEY, now, limits)
        if admission.ticket is None:
            now += admission.wait_s
        else:
            starts.append(now)
    assert len(starts) == 360 and _most_in_window(starts, 60.0) == 120 and _most_in_window(starts, 1.0) == 2
    assert state.admit(("openai", "http://other/v1"), now, limits).ticket is not None  # its own limit


def test_a_pause_holds_every_call_to_its_endpoint_until_it_ends() -> None:
    state, limits = LimitState(), Limits(concurrency=5)
    assert state.pause(KEY, 10.0, 2.0) == 12.0
    assert state.pause(KEY, 11.0, 0.5) == 12.0  # a shorter pause leaves the longer one
    assert state.pause_left(KEY, 11.0) == 1.0
    assert state.admit(KEY, 11.0, limits) == Admission(None, 1.0)
    assert state.admit(("ollama", "http://elsewhere"), 11.0, limits).ticket == 1
    assert state.admit(KEY, 12.0, limits).ticket == 2
    assert state.pause_left(KEY, 12.0) == 0.0


def test_tokens_are_held_to_a_sliding_minute_and_settled_with_the_reported_usage() -> None:
    state, limits = LimitState(), Limits(tpm=100)
    assert state.admit(KEY, 0.0, limits, 60).ticket == 1
    assert state.admit(KEY, 1.0, limits, 30).ticket == 2
    assert state.admit(KEY, 2.0, limits, 20) == Admission(None, 58.0)  # ticket 1's 60 leave at 60 s
    state.settle(KEY, 1, used_tokens=10)  # it used 10 of the 60 it reserved
    assert state.window_tokens(KEY, 2.0) == 40
    assert state.admit(KEY, 2.0, limits, 20).ticket == 3
    state.settle(KEY, 2, used_tokens=None)  # usage unknown: the reservation stands
    assert state.window_tokens(KEY, 2.0) == 60
    # A call larger than the whole limit waits for an empty window, then goes alone.
    assert state.admit(KEY, 3.0, limits, 500) == Admission(None, 59.0)
    assert state.admit(KEY, 62.0, limits, 500).ticket == 4
    assert state.admit(KEY, 62.0, limits, 1) == Admission(None, 60.0)
    assert state.window_tokens(KEY, 122.0) == 0


def test_calls_in_flight_wait_for_a_release() -> None:
    state, limits = LimitState(), Limits(concurrency=2)
    assert [state.admit(KEY, 0.0, limits).ticket for _ in range(2)] == [1, 2]
    assert state.admit(KEY, 0.0, limits) == Admission(None, 0.0, full=True)
    state.settle(KEY, 1)
    assert state.in_flight(KEY) == 1
    assert state.admit(KEY, 0.0, limits).ticket == 3
    assert state.admit(KEY, 0.0, Limits(concurrency=4)).ticket == 4  # each call is held to its own limits


def test_retry_after_is_read_as_seconds_milliseconds_or_an_http_date(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = 1_700_000_000.0
    assert retry_after_s({"Retry-After": "2"}, now) == 2.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1.5
    assert retry_after_s({"Retry-After": email.utils.formatdate(now + 30, usegmt=True)}, now) == 30.0
    assert retry_after_s({"Retry-After": email.utils.formatdate(now - 30, usegmt=True)}, now) == 0.0
    assert retry_after_s({"Retry-After": "soon"}, now) is None
    assert retry_after_s({}, now) is None
    with caplog.at_level(logging.WARNING, logger="pse.models"):
        assert retry_after_s({"Retry-After": "86400"}, now) == RETRY_AFTER_CAP_S
    assert "asked to wait 86400 s" in caplog.text and f"at most {RETRY_AFTER_CAP_S:.0f} s" in caplog.text


def test_grants_and_limits_cross_process_boundaries() -> None:
    grant, limits = Grant(KEY, 7, 1.25), Limits(rpm=60, tpm=1000, concurrency=4)
    assert pickle.loads(pickle.dumps(grant)) == grant and pickle.loads(pickle.dumps(limits)) == limits


# --- the settings -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "abc", "1.5"])
def test_a_bad_limit_is_a_configuration_error_naming_its_variable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PSE_MODEL_RPM", value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert (
        "PSE_MODEL_RPM: Value error, a limit is a whole number of at least 0; set 0 or leave it empty"
        in message
    )
    assert f"(got {value!r})" in message and "Fix the variable in your environment or .env." in message


def test_a_negative_limit_given_in_python_names_its_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"PSE_MODEL_MAX_CONCURRENCY: Input should be greater than or equal to 0"
    ):
        load_settings(model_max_concurrency=-3)


async def test_no_limit_means_no_limiter(monkeypatch: pytest.MonkeyPatch, make: Make) -> None:
    monkeypatch.setenv("PSE_MODEL_TPM", "")
    settings = load_settings(provider="openai", base_url="http://127.0.0.1:1/v1")
    assert (settings.model_rpm, settings.model_tpm, settings.model_max_concurrency) == (0, 0, 0)
    assert limiter_for(settings) is None
    client = make(settings, [])
    assert isinstance(client, ResilientChatCompletionClient) and client.limiter is None
    limited = load_settings(provider="openai", base_url="http://x/v1", model_tpm=900, model_max_tokens=64)
    assert limiter_for(limited) == RateLimiter(Limits(tpm=900), completion_tokens=64)


# --- real clients against stand-ins -------------------------------------------------------------


async def test_fifty_concurrent_callers_never_exceed_the_rpm(limiter: LocalLimiter, make: Make) -> None:
    rpm = 45  # fewer than the callers: fifty at once would break it within the first second
    usages: list[CallUsage] = []
    with ChatStandIn("openai") as stand_in:
        settings = _settings(stand_in, model_rpm=rpm)
        roles = list(Role)
        clients = [make(settings, usages, roles[n % 3]) for n in range(50)]  # every role shares it
        calls = [asyncio.create_task(client.create(ASK)) for client in clients]
        await _until(lambda: sum(u.calls for u in usages) >= 4)  # four answered: about four seconds
        for call in calls:
            call.cancel()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        times = [request.at for request in stand_in.requests]
    answered = [u for u in usages if u.calls]
    assert len(times) == len(answered) == sum(not isinstance(o, BaseException) for o in outcomes) >= 4
    assert _most_in_window(times, 1.0) == 1  # ceil(45 / 60): the spacing is 60 / 45 = 1.33 s
    assert _most_in_window(times, 60.0) <= rpm
    assert sorted(u.waited_s for u in answered)[0] == 0.0
    assert all(u.waited_s > 1.0 for u in sorted(answered, key=lambda u: u.waited_s)[1:])
    # The callers still waiting were stopped: they sent nothing, and reported what they had waited.
    stopped = [u for u in usages if not u.calls]
    assert len(stopped) == 50 - len(answered) and all(u.waited_s > 0 and u.prompt == 0 for u in stopped)
    assert limiter.state.in_flight(("openai", stand_in.url)) == 0


async def test_a_429_with_retry_after_pauses_every_callers_next_call_to_that_endpoint(
    limiter: LocalLimiter, make: Make
) -> None:
    with ChatStandIn("openai") as paused, ChatStandIn("openai") as other:
        paused.script(Reply(status=429, error="slow down", headers={"Retry-After": "2"}))
        settings = _settings(paused, model_max_concurrency=100)  # a limit that never binds
        first: list[CallUsage] = []
        hit = asyncio.create_task(make(settings, first).create(ASK))
        key = ("openai", paused.url)
        await _until(lambda: limiter.state.pause_left(key, time.monotonic()) > 0)
        later: list[list[CallUsage]] = [[] for _ in range(9)]
        elsewhere: list[CallUsage] = []
        calls = [make(settings, usages).create(ASK) for usages in later]
        calls.append(make(_settings(other, model_max_concurrency=100), elsewhere).create(ASK))
        await asyncio.gather(hit, *calls)
    refused_at = paused.requests[0].at
    assert len(paused.requests) == 11 and len(other.requests) == 1
    assert all(request.at >= refused_at + 2.0 for request in paused.requests[1:])
    [retried] = first
    assert retried.retry_after_pauses == 1 and retried.waited_s >= 2.0
    assert all(len(u) == 1 and u[0].waited_s > 0 and u[0].retry_after_pauses == 0 for u in later)
    assert [u.waited_s for u in elsewhere] == [0.0]  # another base URL is not paused


async def test_without_a_limit_a_retry_after_still_holds_the_calls_own_retry(make: Make) -> None:
    usages: list[CallUsage] = []
    with ChatStandIn("openai") as stand_in:
        stand_in.script(Reply(status=429, headers={"Retry-After": "1"}))
        client = make(_settings(stand_in), usages)
        assert isinstance(client, ResilientChatCompletionClient) and client.limiter is None
        await client.create(ASK)
        refused, retried = stand_in.requests
    assert retried.at - refused.at >= 1.0
    [usage] = usages
    assert usage.retry_after_pauses == 1 and usage.waited_s >= 1.0


async def test_the_token_limit_holds_across_callers(limiter: LocalLimiter, make: Make) -> None:
    reserve = count_message_tokens(message_texts(ASK)) + 50  # the prompt and the completion limit
    usages: list[CallUsage] = []
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*[Reply(usage=(reserve - 50, 50)) for _ in range(5)])
        settings = _settings(stand_in, model_tpm=2 * reserve + reserve // 2, model_max_tokens=50)
        clients = [make(settings, usages) for _ in range(5)]
        calls = [asyncio.create_task(client.create(ASK)) for client in clients]
        await _until(lambda: len(usages) == 2)
        await asyncio.sleep(0.3)  # room for a third call, were the limit not holding
        assert len(stand_in.requests) == 2 and sum(not call.done() for call in calls) == 3
        assert limiter.state.window_tokens(("openai", stand_in.url), time.monotonic()) == 2 * reserve
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        assert len(stand_in.requests) == 2


async def test_calls_in_flight_never_exceed_the_concurrency_limit(limiter: LocalLimiter, make: Make) -> None:
    usages: list[CallUsage] = []
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*[Reply(delay_s=0.2) for _ in range(12)])
        settings = _settings(stand_in, model_max_concurrency=3)
        clients = [make(settings, usages, role) for role in list(Role) * 4]
        await asyncio.gather(*(client.create(ASK) for client in clients))
    assert len(stand_in.requests) == 12 and stand_in.max_in_flight == 3
    assert sum(u.waited_s > 0 for u in usages) == 9  # the first three went at once, the rest waited
    assert limiter.state.in_flight(("openai", stand_in.url)) == 0


class _Forwarding:
    """A backend that forwards to another, as a cluster's would to its one actor, noting each call."""

    def __init__(self, to: LocalLimiter) -> None:
        self.to = to
        self.calls: list[str] = []

    async def acquire(self, key: LimitKey, limits: Limits, tokens: int) -> Grant:
        self.calls.append("acquire")
        return await self.to.acquire(key, limits, tokens)

    async def release(self, grant: Grant, used_tokens: int | None) -> None:
        self.calls.append("release")
        await self.to.release(grant, used_tokens)

    async def pause(self, key: LimitKey, seconds: float) -> None:
        self.calls.append(f"pause {seconds:g}")
        await self.to.pause(key, seconds)


async def test_an_installed_backend_admits_every_limited_call(make: Make) -> None:
    forwarding = _Forwarding(LocalLimiter())
    install_limiter_backend(forwarding)  # the fixture puts the previous one back
    with ChatStandIn("openai") as stand_in:
        stand_in.script(Reply(status=429, headers={"retry-after-ms": "200"}))
        usages: list[CallUsage] = []
        client = make(_settings(stand_in, model_rpm=6000), usages)
        await client.create(ASK)
        assert forwarding.calls == ["acquire", "release", "pause 0.2", "acquire", "release"]
        chunks = [chunk async for chunk in client.create_stream(ASK)]  # a stream is admitted the same way
    assert forwarding.calls[5:] == ["acquire", "release"]
    assert chunks[:-1] == ["ok"] and isinstance(chunks[-1], CreateResult)
    assert [u.retry_after_pauses for u in usages] == [1, 0] and usages[0].waited_s >= 0.2


# --- whole runs ---------------------------------------------------------------------------------

_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


async def _run(stand_in: ChatStandIn, runs_dir: Path, **limits: int) -> pse.RunSummary:
    stand_in.script(*(Reply(content=t["content"], usage=(1000 + i, 100 + i)) for i, t in enumerate(_TURNS)))
    return await pse.arun(
        "code-delivery",
        provider="openai",
        model="m-test",
        base_url=stand_in.url,
        api_key="sk-live-secret-123456789",
        runs_dir=runs_dir,
        **limits,
    )


async def test_a_run_held_by_the_limit_records_its_waiting_in_the_trace(tmp_path: Path) -> None:
    with ChatStandIn("openai") as stand_in:
        limited = await _run(stand_in, tmp_path / "limited", model_rpm=100)  # a call every 0.6 s at most
        times = [request.at for request in stand_in.requests]
    with ChatStandIn("openai") as stand_in:
        free = await _run(stand_in, tmp_path / "free")
    assert limited.outcome == free.outcome == "PASSED" and len(times) == 9
    assert _most_in_window(times, 1.0) <= 2  # ceil(100 / 60)
    trace = load_trace(Path(limited.trace))
    rate = trace.rate_limit
    assert rate is not None and rate.waited_s > 0 and 1 <= rate.waits <= 8 and rate.retry_after_pauses == 0
    assert set(rate.by_role) <= set(Role) and all(seconds > 0 for seconds in rate.by_role.values())
    # Waiting is not usage: both runs counted the same nine calls and tokens.
    assert usage_of(limited.tokens) == usage_of(free.tokens)
    assert load_trace(Path(free.trace)).rate_limit is None


def test_the_scripted_provider_is_never_limited(tmp_path: Path) -> None:
    summary = pse.run("code-delivery", runs_dir=tmp_path, model_rpm=1)  # limited, 9 calls take 8 minutes
    assert summary.outcome == "PASSED" and load_trace(Path(summary.trace)).rate_limit is None
