"""The phone side of Hearth: one application core, and the doors that translate for it.

The core: `service` opens a home and puts its parts together; `ask` takes a request from
a door to its kept result; `asker` runs the route plan `routeplan` decides, one attempt
after the other (`local_route` on the phone's `local_model`, `remote` with a node), each
ending in an `outcomes` value; `prompt` builds every planner's input; `executor` runs the
plans; `completion` plans with an app's own tools; `commands` and `reports` answer the
reports. The doors: the command line (`cli`, `chat`, `terminal`, `client`, `demo`),
companion.sock (`socket_server`), the HTTP API and its pages (`api`), the Python API
(`sdk`); they never import one another (`tests/test_layout.py`).

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
