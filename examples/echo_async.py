# examples/echo_async.py
import asyncio

from acp_fast import serve_stdio

from echo import Echo                              # examples/echo.py, saved beside this file


async def main():
    await serve_stdio(Echo())                      # returns once the shutdown is complete


if __name__ == "__main__":
    asyncio.run(main())
