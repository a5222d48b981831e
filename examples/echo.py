# examples/echo.py
from acp_fast import Agent, current_turn, run_agent


class Echo(Agent):
    async def prompt(self, session_id, prompt, **kwargs):
        try:
            for block in prompt:
                if current_turn().cancelled:        # cooperative check (optional) ...
                    break
                await self.client.agent_message_chunk(session_id, block.get("text", ""))
            return {"stopReason": "end_turn"}     # ... a cancel also lands at any await
        finally:
            pass                                   # usage accounting: runs on every path (R13)


if __name__ == "__main__":                         # `acp-fast serve echo:Echo` imports this file
    raise SystemExit(run_agent(Echo()))            # 0, or 1 if the shutdown abandoned a task
