"""An exit backend that asks a SearXNG instance (its JSON API) run by the exit's owner."""

from __future__ import annotations

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .packets import Result


class SearxngBackend:
    """`GET <url>/search?q=…&format=json`; SearXNG must have the json format enabled."""

    name = "searxng"

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, limit: int) -> list[Result]:
        import httpx  # only an exit with SearXNG configured needs it

        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.get(
                    f"{self.url}/search", params={"q": query, "format": "json"}
                )
                response.raise_for_status()
                data = response.json()
        except httpx.HTTPStatusError as exc:
            raise HearthError(
                ErrorCode.UNREACHABLE, f"SearXNG answered {exc.response.status_code}"
            ) from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise HearthError(ErrorCode.UNREACHABLE, f"SearXNG: {type(exc).__name__}") from exc
        rows = data.get("results", []) if isinstance(data, dict) else []
        return [
            Result(
                str(r.get("title", "")),
                str(r.get("url", "")),
                str(r.get("content", "")),
                "searxng:" + str(r.get("engine", "")),
            )
            for r in rows[:limit]
            if isinstance(r, dict)
        ]
