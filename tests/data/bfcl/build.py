"""Rebuild this folder's compact BFCL v4 data from a gorilla checkout.

    python tests/data/bfcl/build.py GORILLA_GIT_DIR [COMMIT]

reads `berkeley-function-call-leaderboard/bfcl_eval/data/BFCL_v4_<category>.json` and
`possible_answer/BFCL_v4_<category>.json` at COMMIT (default HEAD) with `git show`, and
writes `<category>.jsonl.gz` (one case a line: id, messages, functions as JSON Schema,
one chosen ground-truth call list), `excluded.json` (cases whose ground truth disagrees
with its own schema, with the reason) and `SOURCE` (repository and commit).

Conversion, as BFCL's own `convert_to_tool` does for OpenAI-style models, except that
`any` becomes "no type" (any JSON value) rather than a string: dict→object,
float→number, tuple→array, bool→boolean, list→array; the non-standard `optional` key is
dropped. Ground truth: BFCL lists acceptable values per argument (`""` among them means
the argument may be left out; a dict argument's options map keys to option lists, a
list of dicts likewise per element); the first option that fits the argument's schema
is kept; an argument with no fitting option is left out where `""` allows it.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
DATA = "berkeley-function-call-leaderboard/bfcl_eval/data"
TYPES = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "number": "number",
    "integer": "integer",
    "tuple": "array",
    "list": "array",
    "array": "array",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
}
HERE = Path(__file__).parent


def schema_of(param: dict[str, Any]) -> dict[str, Any]:
    """One BFCL parameter description as JSON Schema (recursively)."""
    out: dict[str, Any] = {}
    for key, value in param.items():
        if key == "optional":
            continue
        if key == "type":
            if value != "any":
                out["type"] = TYPES[value]
        elif key == "properties":
            out["properties"] = {name: schema_of(p) for name, p in value.items()}
        elif key == "items":
            out["items"] = schema_of(value)
        else:
            out[key] = value
    return out


def chosen(schema: dict[str, Any], options: list[Any], top: bool) -> tuple[bool, Any]:
    """(present, value): the first option fitting `schema`; else left out where `""`
    allows it; else the first option (and the case is excluded)."""
    values = [resolved(schema, o) if top else o for o in options if o != ""]
    fitting = [v for v in values if Draft202012Validator(schema).is_valid(v)]
    if fitting:
        return True, fitting[0]
    if "" in options or not values:
        return False, None
    return True, values[0]


def resolved(schema: dict[str, Any], option: Any) -> Any:
    """An argument's option with its option lists resolved: BFCL nests them one level,
    in a dict argument's values and in the values of a list-of-dicts argument's items."""
    if schema.get("type") == "object" and isinstance(option, dict):
        return arguments_of(schema.get("properties", {}), option, top=False)
    items = schema.get("items", {})
    if items.get("type") == "object" and isinstance(option, list):
        return [arguments_of(items.get("properties", {}), o, top=False) for o in option]
    return option


def arguments_of(
    properties: dict[str, Any], answer: dict[str, list[Any]], top: bool = True
) -> dict[str, Any]:
    out = {}
    for name, options in answer.items():
        present, value = chosen(properties.get(name, {}), options, top)
        if present:
            out[name] = value
    return out


def disagreement(functions: dict[str, dict[str, Any]], calls: list[dict[str, Any]]) -> str:
    """Why the chosen ground truth does not fit its own schemas ('' when it does)."""
    for call in calls:
        schema = functions.get(call["name"])
        if schema is None:
            return f"{call['name']}: not among the case's functions"
        error = next(iter(Draft202012Validator(schema).iter_errors(call["arguments"])), None)
        if error is not None:
            where = "/".join(str(p) for p in error.path) or "arguments"
            return f"{call['name']}: {where}: {error.message}"
    return ""


def lines(git_dir: str, commit: str, path: str) -> list[dict[str, Any]]:
    text = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{DATA}/{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build(git_dir: str, commit: str) -> None:
    excluded = []
    for category in CATEGORIES:
        answers = {
            a["id"]: a["ground_truth"]
            for a in lines(git_dir, commit, f"possible_answer/BFCL_v4_{category}.json")
        }
        cases = []
        for case in lines(git_dir, commit, f"BFCL_v4_{category}.json"):
            functions = [
                {
                    "name": f["name"],
                    "description": f["description"],
                    "parameters": schema_of(f["parameters"]),
                }
                for f in case["function"]
            ]
            schemas = {f["name"]: f["parameters"] for f in functions}
            calls = [
                {
                    "name": name,
                    "arguments": arguments_of(schemas[name].get("properties", {}), args)
                    if name in schemas
                    else {},
                }
                for call in answers[case["id"]]
                for name, args in call.items()
            ]
            if reason := disagreement(schemas, calls):
                excluded.append({"id": case["id"], "reason": reason})
                continue
            cases.append(
                {
                    "id": case["id"],
                    "messages": case["question"][0],
                    "functions": functions,
                    "calls": calls,
                }
            )
        with gzip.GzipFile(HERE / f"{category}.jsonl.gz", "wb", mtime=0) as out:
            for c in cases:
                out.write(json.dumps(c, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        print(f"{category}: kept {len(cases)}")
    (HERE / "excluded.json").write_text(json.dumps(excluded, indent=1, ensure_ascii=False) + "\n")
    resolved_commit = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (HERE / "SOURCE").write_text(f"github.com/ShishirPatil/gorilla {resolved_commit}\n")
    print(f"excluded {len(excluded)}")


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "HEAD")
