"""Drives toolrouter's MCP endpoint with the official Python MCP client (mcp 2.x):
initialize, tools/list, then the tools/call requests given as JSON on the command line.
With a third argument (an ElicitResult as JSON) the client declares form elicitation and
answers every elicitation request with it. Prints one JSON object: the server's
instructions, the listed tools, each call's result and the elicitation messages received."""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, calls: list, answer) -> None:
    asked = []

    async def elicit(context, params):
        asked.append({"message": params.message, "schema": params.requested_schema})
        return types.ElicitResult.model_validate(answer)

    callback = elicit if answer is not None else None
    async with streamable_http_client(url) as streams:
        read, write = streams
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            results = []
            for call in calls:
                r = await session.call_tool(call["name"], call["arguments"])
                texts = [c.text for c in r.content if getattr(c, "type", "") == "text"]
                results.append({"is_error": bool(r.is_error), "text": texts[0] if texts else None, "structured": r.structured_content})
            out = {
                "instructions": init.instructions,
                "tools": [{"name": t.name, "input_schema": t.input_schema} for t in listed.tools],
                "results": results,
                "asked": asked,
            }
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]) if len(sys.argv) > 3 else None))
