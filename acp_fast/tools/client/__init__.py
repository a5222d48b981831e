"""``acp-fast client``: a terminal client for any ACP agent.

console (the conversation) reads its flags through options and typed lines
through line_source, and reaches the agent through links (a spawned process),
ws_link (WebSocket) or http_link (Streamable HTTP), each a running
``acp_fast.client.ClientSideConnection``.
"""
