"""The companion's local HTTP API: OpenAI-compatible (`/v1`) and native (`/api`)."""

from .app import api_token, serve_api

__all__ = ["api_token", "serve_api"]
