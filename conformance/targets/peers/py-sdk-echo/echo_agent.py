"""An echo agent on the official Python ACP SDK (agent-client-protocol 0.12.1): a target built by
nobody in this project, for the ski ACP conformance suite (profile py-sdk-echo.toml).

It answers initialize, session/new and session/prompt over stdio; a prompt's reply is the text of
its text blocks, sent as one agent_message_chunk, and the turn ends end_turn. session/cancel is
accepted (turns end at once). Everything else is left to the SDK.
"""

import asyncio
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation


class EchoAgent:
    """Replies to every prompt with its text."""

    def __init__(self) -> None:
        self._client: Client | None = None
        self._sessions: set[str] = set()

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="py-sdk-echo", version="0.12.1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sess_{uuid.uuid4().hex}"
        self._sessions.add(session_id)
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id not in self._sessions or self._client is None:
            raise RequestError.invalid_params({"sessionId": session_id})
        text = "".join(getattr(block, "text", "") for block in prompt if getattr(block, "type", "") == "text")
        await self._client.session_update(session_id, update_agent_message_text(text))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
