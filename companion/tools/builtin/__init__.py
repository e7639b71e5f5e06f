"""The built-in phone tools, on real files (a PC acting as the phone) or the Termux API,
one registering function per tool, in a module per domain: calendar (iCalendar),
reminders, contacts (vCard), messages (outbox, or `termux-sms-send`), notes, files
inside a sandbox, clipboard, device status.

Writes are keyed by the step's idempotency key `plan_id:step_id`, in the data itself
(a note's or a reminder's id, an event's uid, an outbox file's name): a rerun after a
crash, also one between the write and the journal's record of it, finds the write done
and returns it instead of acting twice. A deletion records its intent first, so a rerun
that finds the event gone knows it was this step. An SMS cannot be checked: on Termux
`message_send` is not idempotent, so a send a crash interrupted is rerun only when the
user says so. Changing or deleting existing data (moving or deleting an event,
overwriting a file or the clipboard) keeps no previous version, so it is irreversible:
a confirmation per step. What the phone stores (files, notes, calendar, contacts,
clipboard, reminders) is private, and untrusted too: anyone may have written it (an
invitation, a download, a paste). Errors name the argument, never its value (the value
may be private).
"""

from __future__ import annotations

from ..registry import Registry
from ..storage import PhoneData, private_dir
from . import calendar, clipboard, contacts, device, files, messages, notes, reminders
from .common import READ
from .device import read_device_status

__all__ = ["READ", "read_device_status", "register_builtin"]

TOOLS = (
    calendar.calendar_list,
    calendar.calendar_create,
    calendar.calendar_move,
    calendar.calendar_delete,
    reminders.reminder_create,
    reminders.reminder_list,
    contacts.contacts_search,
    messages.message_send,
    notes.notes_create,
    notes.notes_search,
    files.files_read,
    files.files_write,
    files.files_list,
    clipboard.clipboard_get,
    clipboard.clipboard_set,
    device.device_status,
)


def register_builtin(registry: Registry, data: PhoneData) -> None:
    """Add every built-in tool, keeping its data under `data`."""
    private_dir(data.root)
    for add in TOOLS:
        add(registry, data)
