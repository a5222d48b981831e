# examples/hosted.py
import asyncio
import os
import signal

from acp_fast.hosting import bearer_token, serve_ws

from echo import Echo                              # examples/echo.py, saved beside this file


async def main():
    token = os.environ.get("ACP_TOKEN")            # unset: no auth (loopback only, please)
    port = int(os.environ.get("PORT", "8765"))
    host = await serve_ws(Echo, "127.0.0.1", port, authorize=bearer_token(token) if token else None)
    print(f"serving ws://127.0.0.1:{host.port}/acp", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await host.drain()                             # what SIGTERM does under `acp-fast ... --listen`


if __name__ == "__main__":
    asyncio.run(main())
