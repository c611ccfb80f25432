"""`ToolAgent`: the AutoGen face of the executor. Not an LLM; the only holder of side effects."""

from __future__ import annotations

from collections.abc import Sequence

from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import Response
from autogen_agentchat.messages import BaseChatMessage, TextMessage
from autogen_core import CancellationToken

from pse.exceptions import ToolInfrastructureError
from pse.protocol import ResultItem, render_tool_results
from pse.roles import TOOL_AGENT
from pse.toolagent._decide import Scope
from pse.toolagent._executor import ToolExecutor

__all__ = ["ToolAgent"]


class ToolAgent(BaseChatAgent):
    """Executes the tool requests of the latest message and answers `<tool_results for="ROLE">`.

    Only the LAST message of the delta counts (a delta may hold several); its `source` is the requester
    the policy judges. The agent never raises into its phase: any failure becomes an error result.
    A failure of the tool machinery is reported to the executor (`executor.infrastructure_error`), which
    the engine checks after each ToolAgent message to end the run as ERROR.

    Args:
        executor: decides, runs and audits the requests.
        name: the agent's name (the `source` of its messages).
        description: what AutoGen is told about it (its spans carry it).
        scope: the step of a steps plan this agent serves (its budgets, records, write scope).
    """

    def __init__(
        self,
        executor: ToolExecutor,
        name: str = TOOL_AGENT,
        description: str = "Executes <tool_calls> requests under the requesting role's policy; not an LLM.",
        scope: Scope | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        self.executor = executor
        self.scope = scope

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        """It only ever answers with text (`<tool_results>`)."""
        return (TextMessage,)

    async def on_messages(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> Response:
        """Run the requests of the last message and answer with their results."""
        if not messages:
            content = self._error("(nobody)", "the ToolAgent was called with no message to answer")
            return Response(chat_message=TextMessage(source=self.name, content=content))
        last = messages[-1]
        requester = last.source
        try:
            batch = await self.executor.execute(requester, last.to_text(), self.scope)
            content = batch.text
        except ToolInfrastructureError as exc:
            self.executor.report_infrastructure_error(exc)
            content = self._error(requester, f"the tool machinery failed, not your request: {exc}")
        except Exception as exc:  # never let a bug of ours kill the phase; the engine sees the error
            error = ToolInfrastructureError(f"ToolAgent failed: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self.executor.report_infrastructure_error(error)
            content = self._error(requester, f"the ToolAgent failed, not your request: {exc}")
        return Response(chat_message=TextMessage(source=self.name, content=content))

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        """Nothing to clear: the agent keeps no conversation state (`executor.new_cycle` resets budgets)."""

    @staticmethod
    def _error(requester: str, message: str) -> str:
        return render_tool_results(requester, [ResultItem(1, "(toolagent)", "error", message)])
