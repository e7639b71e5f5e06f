"""The device status tool: battery and network from the Termux API."""

from __future__ import annotations

import json
from typing import Any

from hearth.protocol.wire.messages import DeviceContext

from ...clock import PhoneClock
from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData
from .common import READ, termux


def read_device_status() -> dict[str, Any]:
    """Battery and network from the Termux API; "unknown" elsewhere."""
    status: dict[str, Any] = {"battery": "unknown", "charging": "unknown", "network": "unknown"}
    battery = termux("termux-battery-status")
    if battery:
        info = json.loads(battery)
        status.update(
            battery=info.get("percentage", "unknown"),
            charging=info.get("plugged", "unknown") != "UNPLUGGED",
        )
    wifi = termux("termux-wifi-connectioninfo")
    if wifi:
        status["network"] = "wifi" if json.loads(wifi).get("ip") else "cellular"
    return status


def device_context(clock: PhoneClock, asked_at: float | None = None) -> DeviceContext:
    """What the phone says about itself (its time and zone; battery and network where it
    can tell) to the router and its planners; its time is when the request was asked
    (`asked_at`, wall clock: a request kept for the home) or now."""
    status = read_device_status()
    network = status["network"] if status["network"] in ("wifi", "cellular") else "unknown"
    return DeviceContext(
        timezone=clock.zone_name(),
        local_time=(clock.now() if asked_at is None else clock.at(asked_at)).isoformat(
            timespec="seconds"
        ),
        battery=status["battery"] if isinstance(status["battery"], int) else None,
        charging=status["charging"] if isinstance(status["charging"], bool) else None,
        network=network,
        metered={"wifi": False, "cellular": True}.get(network),
    )


def device_status(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.READ_ONLY, annotations=READ)
    async def device_status(ctx: ToolContext) -> dict[str, Any]:
        """Battery and network state ("unknown" where the device does not say)."""
        return read_device_status()
