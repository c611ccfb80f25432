"""The model layer: real providers, the offline scripted provider, cassettes, record/replay, cost.

```python
from pse.models import CassettePlayer, CassetteRecorder, create_model_client, price_of

player = CassettePlayer.from_file("cassette.json", strict=settings.replay_strict)   # drifts: player.drifts
client = create_model_client(settings, "Planner", player=player)   # an autogen ChatCompletionClient
cost = price_of(settings, "gpt-4o", prompt_tokens=812, completion_tokens=95)
```
"""

from pse.models._compare import MessageChange, RequestDifference, compare_request
from pse.models._digest import TOOL_OUTPUT_SPEAKERS, normalize, recorded_request
from pse.models._factory import GENERIC_MODEL_INFO, create_model_client
from pse.models._format import Cassette, CassetteTurn, MessageDigest, RecordedRequest, TurnUsage
from pse.models._recording import CassetteRecorder, RecordingChatCompletionClient
from pse.models._resilient import ResilientChatCompletionClient, RetryPolicy, public_url
from pse.models._scripted import SCRIPTED_MODEL_INFO, CassettePlayer, ScriptedChatCompletionClient
from pse.models._scrub import Scrubber, scrub_secrets
from pse.models._usage import Cost, price_of
from pse.models._wrapper import CallOptions, WrapperChatCompletionClient

__all__ = [
    "GENERIC_MODEL_INFO",
    "SCRIPTED_MODEL_INFO",
    "TOOL_OUTPUT_SPEAKERS",
    "CallOptions",
    "Cassette",
    "CassettePlayer",
    "CassetteRecorder",
    "CassetteTurn",
    "Cost",
    "MessageChange",
    "MessageDigest",
    "RecordedRequest",
    "RecordingChatCompletionClient",
    "RequestDifference",
    "ResilientChatCompletionClient",
    "RetryPolicy",
    "ScriptedChatCompletionClient",
    "Scrubber",
    "TurnUsage",
    "WrapperChatCompletionClient",
    "compare_request",
    "create_model_client",
    "normalize",
    "price_of",
    "public_url",
    "recorded_request",
    "scrub_secrets",
]
