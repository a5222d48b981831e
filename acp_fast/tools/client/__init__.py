"""``acp-fast client``: a terminal client for any ACP agent.

console (the command and the conversation) -> links (a spawned process or a
WebSocket) and http_link (Streamable HTTP), each a running
``acp_fast.client.ClientSideConnection``.
"""
