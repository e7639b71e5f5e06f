"""The phone's tools: the registry (the local manifest) and the built-in tools."""
