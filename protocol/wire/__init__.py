"""Sans-IO core of the Hearth protocols: messages, framing, sessions, errors, signing, roster.

Bytes in, events out: no sockets, no clocks (callers pass `now`), no tasks.
"""
