"""A small MCP server for the tests, written with the ``mcp`` package's MCPServer.

``python mcpdemo.py`` serves over stdio; ``python mcpdemo.py --http PORT`` over
streamable HTTP on 127.0.0.1 (DNS-rebinding protection on, as for any local
server). Tools: ``add`` (structured result), ``shout`` (text), ``pixel`` (an
image), ``fail`` (an error result), ``whoami`` (what the server can see),
``grow`` (adds the tool ``double`` and says the list changed), ``count``
(reports progress), ``die`` (the process exits mid-call), ``reach`` (tries to
read and write files and says what happened: what a sandbox lets through).
Resources: ``demo://readme`` (text), ``demo://pixel`` (a PNG), ``demo://secret``,
the template ``demo://greeting/{name}``; a prompt: ``review(code, style?)``.
"""

from __future__ import annotations

import base64
import os
import sys
import uuid

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

server = MCPServer("demo")
#: this process's own mark (a pid says little inside a pid namespace)
BOOT = uuid.uuid4().hex[:12]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper() + "!"


@server.tool()
def pixel() -> Image:
    """A tiny picture."""
    return Image(data=PNG, format="png")


@server.tool()
def fail(why: str) -> str:
    """Always fails."""
    from mcp.server.mcpserver.exceptions import ToolError

    raise ToolError(f"failed on purpose: {why}")


@server.tool()
def whoami() -> str:
    """The server's pid and whether it saw the test's secret variable."""
    return f"boot={BOOT} secret={os.environ.get('DEMO_SECRET', '-')} " \
           f"leak={os.environ.get('OPENAI_API_KEY', '-')}"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``double`` and tell the client."""
    server.add_tool(lambda x: x * 2, name="double", description="Double a number.")
    await ctx.notify_tools_changed()
    return "grown"


@server.tool()
async def count(ctx: Context, to: int = 3) -> str:
    """Count, reporting progress at each step."""
    for i in range(1, to + 1):
        await ctx.report_progress(i, to, f"step {i}")
    return f"counted to {to}"


@server.tool()
def reach(read: list[str], write: list[str]) -> dict[str, str]:
    """Try to read each of ``read`` and write each of ``write``; say what happened
    to each path ("ok: ..." or the error's name), and what HOME is."""
    out = {"HOME": os.environ.get("HOME", "-")}
    for path in read:
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as f:
                out[f"read {path}"] = "ok: " + f.read(200)
        except OSError as exc:
            out[f"read {path}"] = type(exc).__name__
    for path in write:
        try:
            with open(os.path.expanduser(path), "w", encoding="utf-8") as f:
                f.write(f"written by {BOOT}")
            out[f"write {path}"] = "ok"
        except OSError as exc:
            out[f"write {path}"] = type(exc).__name__
    return out


@server.resource("demo://readme", name="readme", description="What the demo is.",
                 mime_type="text/plain")
def readme() -> str:
    return "The demo server, for tether's tests."


@server.resource("demo://pixel", name="pixel", mime_type="image/png")
def pixel_resource() -> bytes:
    return PNG


@server.resource("demo://secret", name="secret", mime_type="text/plain")
def secret() -> str:
    return "the secret resource"


@server.resource("demo://greeting/{name}", name="greeting", description="A greeting.")
def greeting(name: str) -> str:
    return f"hello, {name}"


@server.prompt(description="Ask for a review of some code.")
def review(code: str, style: str = "terse") -> str:
    return f"Review this code ({style}):\n{code}"


@server.tool()
def die() -> str:
    """Exit the process in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
