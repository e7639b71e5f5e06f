"""What the phone and the nodes share: the wire format, the transport and the model layer.

Nothing heavy is imported here: `transport` (libp2p) and `model` (llama.cpp) load
only when a command needs them.
"""
