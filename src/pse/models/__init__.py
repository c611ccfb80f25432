"""The model layer: real providers, the offline scripted provider, cassettes, record/replay, cost.

```python
from pse.models import CassettePlayer, CassetteRecorder, create_model_client, price_of

player = CassettePlayer.from_file("cassette.json", strict=settings.replay_strict)   # drifts: player.drifts
client = create_model_client(settings, "Planner", player=player)   # an autogen ChatCompletionClient
cost = price_of(settings, "gpt-4o", prompt_tokens=812, completion_tokens=95)
```

With `PSE_MODEL_RPM`, `_TPM` or `_MAX_CONCURRENCY` set, every real provider's calls share one limit per
endpoint in the process (`limiter_for`); another executor installs its own `LimiterBackend`
(`install_limiter_backend`).
"""

from pse.models._client import (
    CONTEXT_WINDOW_TOKENS,
    SCRIPTED_MODEL_INFO,
    BaseChatCompletionClient,
    InProcessChatCompletionClient,
)
from pse.models._compare import MessageChange, RequestDifference, compare_request
from pse.models._constrained import (
    ConstrainedChatCompletionClient,
    ConstraintLog,
    SupportSource,
    with_constraint,
)
from pse.models._digest import TOOL_OUTPUT_SPEAKERS, message_texts, normalize, recorded_request
from pse.models._factory import GENERIC_MODEL_INFO, create_model_client
from pse.models._format import (
    Cassette,
    CassetteToolCall,
    CassetteTurn,
    MessageDigest,
    RecordedOn,
    RecordedRequest,
    TurnUsage,
)
from pse.models._metered import MeteredChatCompletionClient
from pse.models._native import NativeProtocolClient
from pse.models._prefix import PrefixClient, PrefixMeter, common_prefix_tokens
from pse.models._probe import (
    CACHE_TTL_S,
    PROBE_PROMPT,
    SERVER_PROBES,
    ConstraintProbes,
    ConstraintSupport,
    Dialect,
    ProbeCall,
    probe_server,
)
from pse.models._ratelimit import (
    WINDOW_S,
    Admission,
    Grant,
    LimiterBackend,
    LimitKey,
    Limits,
    LimitState,
    LocalLimiter,
    RateLimiter,
    install_limiter_backend,
    limiter_backend,
    limiter_for,
)
from pse.models._reasoning import split_reasoning
from pse.models._recording import CassetteRecorder, RecordingChatCompletionClient
from pse.models._resilient import ResilientChatCompletionClient, public_url
from pse.models._resumed import ResumedTurnsClient, Turn
from pse.models._retrying import RETRY_AFTER_CAP_S, RetryPolicy, retry_after_s
from pse.models._scripted import CassettePlayer, ScriptedChatCompletionClient
from pse.models._scrub import Scrubber, scrub_secrets
from pse.models._servers import crash_note, note_answered, note_started_server
from pse.models._turn_shape import STALE_TURNS, TaskGround
from pse.models._usage import SETTLE_S, CallUsage, Cost, UsageMeter, UsageSink, price_of
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient

__all__ = [
    "CACHE_TTL_S",
    "CONTEXT_WINDOW_TOKENS",
    "GENERIC_MODEL_INFO",
    "PROBE_PROMPT",
    "RETRY_AFTER_CAP_S",
    "SCRIPTED_MODEL_INFO",
    "SERVER_PROBES",
    "SETTLE_S",
    "STALE_TURNS",
    "TOOL_OUTPUT_SPEAKERS",
    "WINDOW_S",
    "Admission",
    "BaseChatCompletionClient",
    "CallOptions",
    "CallUsage",
    "Cassette",
    "CassettePlayer",
    "CassetteRecorder",
    "CassetteToolCall",
    "CassetteTurn",
    "ConstrainedChatCompletionClient",
    "ConstraintLog",
    "ConstraintProbes",
    "ConstraintSupport",
    "Cost",
    "Dialect",
    "Grant",
    "InProcessChatCompletionClient",
    "LimitKey",
    "LimitState",
    "LimiterBackend",
    "Limits",
    "LocalLimiter",
    "MessageChange",
    "MessageDigest",
    "MeteredChatCompletionClient",
    "NativeProtocolClient",
    "PrefixClient",
    "PrefixMeter",
    "ProbeCall",
    "RateLimiter",
    "RecordedOn",
    "RecordedRequest",
    "RecordingChatCompletionClient",
    "RequestDifference",
    "ResilientChatCompletionClient",
    "ResumedTurnsClient",
    "RetryPolicy",
    "ScriptedChatCompletionClient",
    "Scrubber",
    "SupportSource",
    "TaskGround",
    "Turn",
    "TurnUsage",
    "UsageMeter",
    "UsageSink",
    "WrapperChatCompletionClient",
    "common_prefix_tokens",
    "compare_request",
    "crash_note",
    "create_model_client",
    "install_limiter_backend",
    "limiter_backend",
    "limiter_for",
    "message_texts",
    "normalize",
    "note_answered",
    "note_started_server",
    "price_of",
    "probe_server",
    "public_url",
    "recorded_request",
    "retry_after_s",
    "scrub_secrets",
    "split_reasoning",
    "with_constraint",
]
