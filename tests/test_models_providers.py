"""The real OpenAI and Ollama client paths, driven against loopback stand-ins of their HTTP APIs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from autogen_core.models import ChatCompletionClient, CreateResult, SystemMessage, UserMessage
from autogen_ext.models.ollama import OllamaChatCompletionClient
from autogen_ext.models.openai import OpenAIChatCompletionClient

from pse.config import Settings, load_settings
from pse.exceptions import ConfigError, ModelAuthError, ModelUnavailableError
from pse.models import ResilientChatCompletionClient, create_model_client, public_url
from pse.models._fenced import FencedWritesClient
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from pse.tokens import count_message_tokens, count_tokens
from pse.trace import load_trace
from standins import ChatStandIn, Reply

ASK = [SystemMessage(content="You are the Planner."), UserMessage(content="Sort a list.", source="user")]


@pytest.fixture(params=["openai", "ollama"])
def stand_in(request: pytest.FixtureRequest) -> Iterator[ChatStandIn]:
    with ChatStandIn(request.param) as server:
        yield server


Factory = Callable[..., ChatCompletionClient]


@pytest.fixture
async def make() -> AsyncIterator[Factory]:
    """create_model_client, closing every client it made when the test ends."""
    made: list[ChatCompletionClient] = []

    def build(settings: Settings, role: str) -> ChatCompletionClient:
        made.append(create_model_client(settings, role))
        return made[-1]

    yield build
    for client in made:
        await client.close()


def _settings(stand_in: ChatStandIn, **extra: object) -> Settings:
    values: dict[str, object] = {
        "provider": stand_in.api,
        "model": "my-model",
        "base_url": stand_in.url,
        "model_backoff_s": 0.01,
        "model_timeout_s": 5.0,
        "model_max_retries": 2,
    }
    if stand_in.api == "openai":
        values["api_key"] = "sk-test-key-0123456789abcdef"
    values.update(extra)
    return load_settings(**values)


def _path(stand_in: ChatStandIn) -> str:
    return "/v1/chat/completions" if stand_in.api == "openai" else "/api/chat"


async def test_request_shape_and_reported_usage(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(content="<plan>...</plan>", usage=(812, 95)))
    client = make(_settings(stand_in, model_temperature=0.2, model_max_tokens=300), "Planner")
    result = await client.create(ASK)
    assert (result.content, result.finish_reason) == ("<plan>...</plan>", "stop")
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (812, 95)
    [request] = stand_in.requests
    assert request.path == _path(stand_in)
    assert request.body["model"] == "my-model"
    assert [(m["role"], m["content"]) for m in request.body["messages"]] == [
        ("system", "You are the Planner."),
        ("user", "Sort a list."),
    ]
    if stand_in.api == "openai":
        assert request.headers["authorization"] == "Bearer sk-test-key-0123456789abcdef"
        assert (request.body["temperature"], request.body["max_tokens"]) == (0.2, 300)
    else:
        assert request.body["options"] == {"num_predict": 300, "temperature": 0.2}


async def test_a_503_is_retried_then_succeeds(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(status=503), Reply(content="second time lucky"))
    client = make(_settings(stand_in), "Specialist")
    result = await client.create(ASK)
    assert result.content == "second time lucky"
    assert len(stand_in.requests) == 2
    assert isinstance(client, ResilientChatCompletionClient) and client.attempts == 2


async def test_a_429_is_retried_up_to_the_limit_then_model_unavailable(
    stand_in: ChatStandIn, make: Factory
) -> None:
    stand_in.script(*[Reply(status=429, error="slow down")] * 5)
    client = make(_settings(stand_in, model_max_retries=2), "Evaluator")
    with pytest.raises(ModelUnavailableError) as info:
        await client.create(ASK)
    message = str(info.value)
    assert len(stand_in.requests) == 3  # the first try and 2 retries
    assert "after 3 attempt(s)" in message and "HTTP 429" in message and "slow down" in message
    assert "Evaluator's model 'my-model'" in message and stand_in.url in message
    assert "sk-test" not in message
    assert info.value.__cause__ is not None


async def test_a_hang_times_out_into_model_unavailable(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(hang=True), Reply(hang=True))
    client = make(_settings(stand_in, model_timeout_s=0.3, model_max_retries=1), "Planner")
    with pytest.raises(
        ModelUnavailableError, match=r"after 2 attempt\(s\); last error: no answer within the timeout"
    ):
        await client.create(ASK)
    assert len(stand_in.requests) == 2


async def test_a_401_is_an_auth_error_sent_exactly_once(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(status=401, error="invalid api key"))
    client = make(_settings(stand_in, model_max_retries=5), "Planner")
    with pytest.raises(
        ModelAuthError, match=r"refused the credentials \(HTTP 401: invalid api key\)"
    ) as info:
        await client.create(ASK)
    assert "PSE_PLANNER_API_KEY" in str(info.value) and "sk-test" not in str(info.value)
    assert len(stand_in.requests) == 1


async def test_a_400_is_not_retried(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(status=404, error="model 'my-model' not found"))
    client = make(_settings(stand_in), "Planner")
    with pytest.raises(
        ModelUnavailableError, match=r"after 1 attempt\(s\); last error: HTTP 404: model 'my-model'"
    ):
        await client.create(ASK)
    assert len(stand_in.requests) == 1


async def test_connection_refused_is_retried_then_model_unavailable(
    stand_in: ChatStandIn, make: Factory
) -> None:
    url = stand_in.url
    stand_in.__exit__(None, None, None)  # nothing listens on the port any more
    settings = _settings(stand_in, base_url=url, model_max_retries=1)
    client = make(settings, "Planner")
    assert isinstance(client, ResilientChatCompletionClient)
    with pytest.raises(ModelUnavailableError, match=r"after 2 attempt\(s\); last error: connection failed"):
        await client.create(ASK)
    assert client.attempts == 2


async def test_streaming_yields_chunks_then_a_result_with_usage(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(content="one two three", usage=(20, 3)))
    client = make(_settings(stand_in), "Planner")
    extra = {"stream_options": {"include_usage": True}} if stand_in.api == "openai" else {}
    items = [item async for item in client.create_stream(ASK, extra_create_args=extra)]
    *chunks, final = items
    assert "".join(str(c) for c in chunks) == "one two three"
    assert isinstance(final, CreateResult) and final.content == "one two three"
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (20, 3)
    assert stand_in.requests[0].body["stream"] is True


async def test_stream_retries_a_503_before_the_first_chunk(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(status=503), Reply(content="fine now"))
    client = make(_settings(stand_in), "Planner")
    items = [item async for item in client.create_stream(ASK)]
    assert isinstance(items[-1], CreateResult) and items[-1].content == "fine now"
    assert len(stand_in.requests) == 2


async def test_missing_usage_falls_back_to_the_offline_counter(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(content="the reply text", usage=None))
    result = await make(_settings(stand_in), "Planner").create(ASK)
    expected = (
        count_message_tokens(["You are the Planner.", "Sort a list."]),
        count_tokens("the reply text"),
    )
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == expected == (18, 4)


async def test_reasoning_only_reply_with_protocol_tags_becomes_the_content(make: Factory) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(Reply(content="", reasoning="thinking... <verdict status='PASS'>ok</verdict>"))
        result = await make(_settings(stand_in), "Evaluator").create(ASK)
    assert result.content == "thinking... <verdict status='PASS'>ok</verdict>"


@pytest.mark.parametrize("api", ["openai", "ollama"])
async def test_reasoning_that_ate_the_token_limit_is_a_clear_error_not_an_empty_turn(
    make: Factory, api: str
) -> None:
    with ChatStandIn(api) as stand_in:  # Ollama's done_reason "length" survives AutoGen's client too
        stand_in.script(Reply(content="", reasoning="let me think " * 50, finish_reason="length"))
        client = make(_settings(stand_in, model_max_tokens=64), "Evaluator")
        # (AutoGen's Ollama client keeps no `thinking`, so only OpenAI's answer can say what used it up.)
        why = r"max-tokens limit .*reasoning used it up.*" if api == "openai" else r"max-tokens limit .*"
        with pytest.raises(ModelUnavailableError, match=why + "PSE_MODEL_MAX_TOKENS"):
            await client.create(ASK)
        assert len(stand_in.requests) == 1


async def test_an_empty_reply_is_an_error(stand_in: ChatStandIn, make: Factory) -> None:
    stand_in.script(Reply(content="   "))
    with pytest.raises(ModelUnavailableError, match=r"returned an empty answer \(finish reason 'stop'\)"):
        await make(_settings(stand_in), "Specialist").create(ASK)


def test_factory_routes_each_role_by_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_PROVIDER", "openai")
    monkeypatch.setenv("PSE_API_KEY", "sk-global-0123456789abcdef")
    monkeypatch.setenv("PSE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PSE_EVALUATOR_PROVIDER", "ollama")
    monkeypatch.setenv("PSE_EVALUATOR_MODEL", "qwen3:8b")
    monkeypatch.setenv("PSE_EVALUATOR_BASE_URL", "http://127.0.0.1:11434")
    monkeypatch.setenv("PSE_PLANNER_MODEL", "deepseek-chat")
    settings = load_settings()
    planner = create_model_client(settings, "Planner")
    fenced = create_model_client(settings, "Evaluator")
    assert isinstance(
        fenced, FencedWritesClient
    )  # an 8B model writes files as file blocks (PSE_WRITE_FORMAT=auto)
    evaluator = fenced.inner
    assert isinstance(planner, ResilientChatCompletionClient) and isinstance(
        evaluator, ResilientChatCompletionClient
    )
    assert isinstance(planner.inner, OpenAIChatCompletionClient)
    assert isinstance(evaluator.inner, OllamaChatCompletionClient)
    assert (planner.spec.model, evaluator.spec.model) == ("deepseek-chat", "qwen3:8b")
    assert evaluator.spec.base_url == "http://127.0.0.1:11434"
    assert planner.model_info["family"] == "unknown"


def test_factory_prints_nothing(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    with ChatStandIn("openai") as stand_in:
        create_model_client(_settings(stand_in), "Planner")
    assert capsys.readouterr() == ("", "")


def test_openai_without_key_or_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"no API key and no base URL: set PSE_API_KEY"):
        create_model_client(load_settings(provider="openai"), "Planner")


async def test_a_local_server_needs_no_key(make: Factory) -> None:
    with ChatStandIn("openai") as stand_in:
        settings = load_settings(provider="openai", model="llama3", base_url=stand_in.url)
        result = await make(settings, "Planner").create(ASK)
        assert result.content == "ok"
        assert stand_in.requests[0].headers["authorization"] == "Bearer no-key-needed"


def test_public_url_hides_credentials() -> None:
    assert (
        public_url("https://user:pw@host.example:8443/v1?key=sk-x#f", "openai")
        == "https://host.example:8443/v1"
    )
    assert public_url(None, "openai") == "https://api.openai.com/v1"


async def test_each_message_of_a_run_says_why_its_model_stopped_and_how_long_it_took(
    stand_in: ChatStandIn, tmp_path: Path
) -> None:
    turns = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    replies = [Reply(content=t["content"]) for t in turns]
    replies[0] = Reply(content=turns[0]["content"], finish_reason="length", delay_s=0.05)  # a cut plan
    stand_in.script(*replies)
    settings = _settings(stand_in, runs_dir=tmp_path, sandbox="fallback")
    summary = await run_to_end(prepare_run("code-delivery", settings))
    assert summary.outcome == "PASSED"
    messages = [m for c in load_trace(Path(summary.trace).parent).cycles for m in c.messages]
    said = [(m.source, m.finish_reason) for m in messages if m.source != "ToolAgent"]
    # Both APIs: AutoGen's Ollama client alone would say "unknown" for Ollama's done_reason "length".
    assert said[0] == ("Planner", "length") and {f for _, f in said[1:]} == {"stop"}
    assert len(said) == len(turns)
    assert messages[0].model_ms is not None and messages[0].model_ms >= 50  # the reply's delay, at least
    assert all(m.model_ms is None and m.finish_reason is None for m in messages if m.source == "ToolAgent")
