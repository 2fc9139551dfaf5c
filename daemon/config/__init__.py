"""Configuration: config.yaml and the environment read into one immutable Config, its
sections (MCP servers, the store), and the report `config check` and `doctor` print.

May import nothing else of the daemon.
"""
