"""The libp2p side of Hearth: host factory, pnet protector, roster gate, keepalive, frame streams.

Importing this package loads libp2p (over a second): only network commands do.
"""
