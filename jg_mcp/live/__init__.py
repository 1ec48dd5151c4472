"""The live side: the MCP server, its session, transports (stdio, HTTP), the command sandbox and the workspace."""
