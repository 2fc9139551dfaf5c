"""MCP servers as the ``mcp`` toolset (docs/mcp.md).

- server.py: `McpServer`, one server's connection (stdio or streamable HTTP),
  started on first need, started again when it stops, closed at shutdown;
- results.py: a tool result (and a resource's contents) as the model reads it;
  tool names;
- resources.py: a server's resources as two more tools for the model, and its
  resources, templates and prompts as mcp.resources lists them;
- manager.py: `McpManager`, every server's tools as the owner offers them, the
  approval check of each call, and the mcp.* methods.

The ``mcp`` package is imported only when a server starts.

May import: config, runtime, approvals, engine (what a tool is), toolsets (the sandbox, output caps).
"""
