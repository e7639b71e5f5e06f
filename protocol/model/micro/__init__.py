"""Hearth's micro-planner: a small model trained by this project on synthetic requests
for the phone's built-in tools (`requests`), in its own chat template and Qwen3.5's
XML call format, so the demo and the end-to-end tests meet a model that truly plans.

`train` rebuilds it (`python -m hearth.protocol.model.micro.train`, by hand: JAX on
CPU, not in CI); the BF16 GGUF it writes is kept beside this file and Q4_K_M is
quantised from it by llama.cpp's own quantizer. Its architecture is llama.cpp's
`llama` (`weights` mirrors its forward pass exactly). The synthetic data and the
weights are the project's own (LICENSE beside this file).
"""
