"""The companion's local HTTP API: OpenAI-compatible (`/v1`) and native (`/api`)."""

from .app import serve_api

__all__ = ["serve_api"]
