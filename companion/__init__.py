"""The phone side of Hearth: local model, router, tools, executor, journal, node client, CLI.

`from hearth.companion import Companion` is the Python API for apps (`sdk`); it loads
on first use, so importing the package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sdk import Companion

__all__ = ["Companion"]


def __getattr__(name: str) -> Any:
    if name == "Companion":
        from .sdk import Companion

        return Companion
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
