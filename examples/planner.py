# examples/planner.py
from acp_fast import Agent, run_agent

STEP = {"content": "fix the bug", "priority": "high", "status": "in_progress"}


class Planner(Agent):
    system_prompt_modes = frozenset({"append"})    # advertised as sessionCapabilities.systemPrompt

    async def new_session(self, cwd, mcp_servers, system_prompt=None, **kwargs):
        self.instructions = system_prompt           # {"mode": "append", "content": [...]} or None
        return None                                 # the runtime makes the session id

    async def prompt(self, session_id, prompt, **kwargs):   # kwargs: any field a newer client adds
        if self.client.supports_update("plan_update"):      # the client sent clientCapabilities.plan
            await self.client.plan_update(session_id, "main", entries=[STEP])
        else:                                               # an older client: the whole-plan update
            await self.client.plan(session_id, [STEP])
        return "end_turn"


if __name__ == "__main__":
    raise SystemExit(run_agent(Planner()))
