"""The phone side of Hearth: local model, router, tools, executor, journal, node client, CLI."""
