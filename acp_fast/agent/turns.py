"""A prompt turn inside its task: the turn made current, the agent's ``prompt``, the end-of-turn hook.

The server admits the prompt (its slot, its token, the context snapshot:
R02, R07, R08) and hands the pool one of these as the job's body; they run
in the job's task, so the context variables they set are that task's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .context import Turn, context_var, turn_var

if TYPE_CHECKING:
    from .base import Agent
    from .context import Context
    from .pool import Job

log = logging.getLogger(__name__)

Kwargs = dict[str, Any]


def stop_reason(value: Any) -> dict[str, Any]:
    """What ``prompt`` returned, as the answer to ``session/prompt``."""
    if value is None:
        return {"stopReason": "end_turn"}
    if isinstance(value, str):
        return {"stopReason": value}
    if isinstance(value, dict):
        return value
    raise TypeError(f"prompt() returned {type(value).__name__}; expected a dict, a str or None")


def enter_prompt(agent: Agent, job: Job, kwargs: Kwargs, snapshot: Context) -> Awaitable[Any]:
    """The turn of an agent without an end-of-turn hook: the agent's ``prompt`` coroutine itself.

    Called inside the job's task, so the context variables are the task's.
    No wrapping coroutine: a cancellation unwinds one frame less before the
    answer is written, and whatever ``prompt`` raises reaches the pool as
    it would through ``run_prompt``.
    """
    assert job.session is not None
    turn_var.set(Turn(job.session, job.token, job.request.id, snapshot))
    context_var.set(snapshot)
    return agent.prompt(**kwargs)


async def run_prompt(agent: Agent, job: Job, kwargs: Kwargs | None, snapshot: Context, turn_end_hook: bool) -> Any:
    """One turn: the agent's ``prompt``, then ``on_turn_end`` however it ended.

    ``kwargs`` None: the turn was cancelled before its task ran a step; the
    body is not called and nothing is emitted, but the end-of-turn hook
    still runs (R10).
    """
    assert job.session is not None
    session_id = job.session.id
    turn_var.set(Turn(job.session, job.token, job.request.id, snapshot))
    context_var.set(snapshot)
    outcome = "failed"
    try:
        if kwargs is None:
            outcome = "cancelled"
            return None
        value = await agent.prompt(**kwargs)
        outcome = "cancelled" if job.token.cancelled else stop_reason(value).get("stopReason", "end_turn")
        return value
    except asyncio.CancelledError:
        outcome = "aborted" if job.aborted else "cancelled"
        raise
    finally:
        if turn_end_hook:  # the base hook does nothing: a cancelled turn answers sooner without it
            try:
                await agent.on_turn_end(session_id, str(outcome))
            except Exception:
                log.exception("on_turn_end failed for session %r", session_id)

