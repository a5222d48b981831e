"""An ``initialize`` POST whose id cannot be matched to its answer is refused at once.

The Streamable HTTP profile answers ``initialize`` in the POST's own body, so
it must recognise that answer among the connection's output: a float, a
boolean, null, an object or an array as the id gave no match, and the POST
hung until the idle bound (40 s) with an agent instance alive meanwhile. Now
such a POST gets the -32600 error as its body (400, as a batch does) and no
connection is created. Over a real socket; the bound only turns a hang into a
failure.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from acp_fast.hosting import serve_ws
from tests.http_helpers import HttpAcpClient, request

BOUND_S = 10.0


@pytest.mark.parametrize("rid", [1.5, True, None, {"a": 1}, [1]], ids=["float", "bool", "null", "object", "array"])
def test_an_initialize_post_with_an_unmatchable_id_gets_its_error_at_once(run: Any, rid: Any) -> None:
    async def body() -> None:
        made: list[Any] = []

        def factory() -> Any:
            from acp_fast.demo import DemoAgent

            made.append(DemoAgent(pace_ms=1))
            return made[-1]

        host = await serve_ws(factory, "127.0.0.1", 0)
        try:
            message = {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {"protocolVersion": 1}}
            reply = await asyncio.wait_for(
                request(host.port, "POST", {"Content-Type": "application/json"}, json.dumps(message).encode()),
                BOUND_S,
            )
            assert reply.status == 400, reply
            answer = reply.json()
            assert answer["error"]["code"] == -32600 and answer["id"] is None, answer
            assert "acp-connection-id" not in reply.headers
            assert made == [] and host.counts["connections"] == 0  # no agent instance, no connection
            client = HttpAcpClient(host.port)  # and the host still serves
            result = await asyncio.wait_for(client.initialize(), BOUND_S)
            assert result["protocolVersion"] == 1
            client.close()
        finally:
            await asyncio.wait_for(host.drain(), BOUND_S)

    run(body())
