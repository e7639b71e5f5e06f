"""The home side of Hearth: daemon, planner, backends, admission, pairing, discovery, CLI."""
