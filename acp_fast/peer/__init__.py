"""One JSON-RPC peer over a byte transport: read adapter, writer, dispatch loop, pending requests."""
