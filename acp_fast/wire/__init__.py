"""Bytes and messages, no asyncio: the framer and its twin, frame events, the JSON-RPC codec, errors, limits."""
