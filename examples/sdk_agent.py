# examples/sdk_agent.py
import asyncio

from acp import InitializeResponse, NewSessionResponse, PromptResponse, text_block, update_agent_message

from acp_fast.compat import run_agent              # before: from acp import run_agent


class SdkEcho:                                     # written against the official SDK, unchanged
    def on_connect(self, conn):
        self.conn = conn

    async def initialize(self, protocol_version, **kwargs):
        return InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd, mcp_servers=None, **kwargs):
        return NewSessionResponse(session_id="s-1")

    async def prompt(self, session_id, prompt, **kwargs):
        for block in prompt:
            await self.conn.session_update(session_id, update_agent_message(text_block(block.text)))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(SdkEcho()))
