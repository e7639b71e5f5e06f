"""`hearth`: the companion's command line (a thin skin over the library).

Commands that stay off the network and off the model import neither libp2p nor
llama.cpp: heavy imports happen inside the commands that need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hearth.protocol.console import emit, reporting, resolve_home

app = typer.Typer(help="Hearth companion: your phone's private assistant.", no_args_is_help=True)
models_app = typer.Typer(help="Tiny test models and real model downloads.", no_args_is_help=True)
app.add_typer(models_app, name="models")

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="State directory (env HEARTH_HOME).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _home(home: Path | None) -> Path:
    return resolve_home(home, "HEARTH_HOME", "hearth")


@app.command()
def init(
    model: Annotated[Path | None, typer.Option(help="The phone's local (Q4) GGUF.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the phone's identity (and remember its local model)."""
    from hearth.companion.config import init_phone

    with reporting(as_json):
        directory = _home(home)
        peer_id = init_phone(directory, model)
        payload = {"peer_id": peer_id, "home": str(directory), "model": str(model or "")}
        emit(as_json, payload, lambda: typer.echo(f"Phone identity {peer_id}\n  home: {directory}"))


@models_app.command("make-tiny")
def make_tiny(
    directory: Annotated[Path, typer.Argument(help="Where to write the two GGUF files.")],
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same files).")] = 0,
    force: Annotated[bool, typer.Option(help="Rewrite files that exist.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write tiny-bf16.gguf and tiny-q4_k_m.gguf (random weights, real tokenizer)."""
    from hearth.protocol.model.tiny import make_tiny as build

    with reporting(as_json):
        from rich.console import Console

        with Console(stderr=True).status("making tiny qwen35 models"):
            bf16, q4 = build(directory, seed, force=force)
        payload = {"bf16": str(bf16), "q4_k_m": str(q4)}
        emit(as_json, payload, lambda: typer.echo(f"{bf16}\n{q4}"))


@models_app.command("pull")
def pull(
    name: Annotated[str, typer.Argument(help="Model name, e.g. botpsy-0.8b.")],
    quant: Annotated[str, typer.Option(help="q4_k_m, q8_0 or bf16.")] = "q4_k_m",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Download a real model from the Hugging Face Hub."""
    from hearth.protocol.model.hub import pull as download

    with reporting(as_json):
        path = download(name, quant.lower(), _home(home) / "models")
        emit(as_json, {"path": str(path)}, lambda: typer.echo(str(path)))


@app.command()
def demo() -> None:
    """Run what Hearth has so far, end to end on loopback, in temporary homes."""
    from hearth.companion.demo import run_demo

    with reporting(False):
        run_demo()


def main() -> None:
    app()
