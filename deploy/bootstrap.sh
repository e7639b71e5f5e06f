#!/usr/bin/env bash
# One-command set-up and run, for a fresh machine with Python 3.11+ and a C compiler.
#   bash deploy/bootstrap.sh demo    set up, then run the end-to-end demo
#   bash deploy/bootstrap.sh test    set up, then run every check, the whole test suite and
#                                    the fuzz targets (in the background; their total is printed)
# Set-up is a virtualenv in .venv with Hearth installed in it. llama-cpp-python is built
# from source once (5-13 minutes on 2 cores) and reused from pip's wheel cache after that.
set -euo pipefail
cd "$(dirname "$0")/.."

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1  # the browser tests drive Debian's chromium
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "Hearth needs Python 3.11 or newer (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }

stamp=.venv/.hearth-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    if "$PYTHON" -m pip cache list llama_cpp_python 2>/dev/null | grep -q llama_cpp_python; then
        echo "Installing Hearth and its dependencies into .venv (about a minute)..."
    else
        echo "Installing Hearth and its dependencies into .venv. The first time, pip builds"
        echo "llama.cpp (llama-cpp-python) from C++ source: roughly 5-13 minutes on 2 cores,"
        echo "with no output while it compiles. Later set-ups reuse the build (about a minute)."
    fi
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install --quiet --progress-bar off -e '.[dev]'
    echo "$want" > "$stamp"
    echo "Installed: the hearth and hearth-node commands are in .venv/bin/."
fi

js_peer() {  # the js-libp2p peer for the pnet interop test, when node and npm are here
    if command -v npm >/dev/null && command -v node >/dev/null; then
        if [ ! -d tests/js/node_modules ] || [ tests/js/package.json -nt tests/js/node_modules ]; then
            (cd tests/js && npm install --silent --no-audit --no-fund) \
                || echo "npm install failed: the js-libp2p interop test will be skipped" >&2
        fi
    fi
}

mcp_servers() {  # the real npm MCP servers (filesystem, memory, everything) of tests/mcp_real
    if command -v npm >/dev/null && command -v node >/dev/null; then
        if [ ! -d tests/mcp_real/node_modules ] || [ tests/mcp_real/package.json -nt tests/mcp_real/node_modules ]; then
            (cd tests/mcp_real && npm install --silent --no-audit --no-fund) \
                || echo "npm install failed: the real MCP server test will be skipped (under CI=true: fail)" >&2
        fi
    fi
}

browser() {  # Debian's chromium for the web page tests (Playwright never downloads one)
    if [ ! -x /usr/bin/chromium ]; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            apt-get install -y --no-install-recommends chromium >/dev/null \
                || { apt-get update -q >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; } \
                || echo "apt-get install chromium failed: the browser tests will be skipped" >&2
        else
            echo "no /usr/bin/chromium (apt-get install chromium): the browser tests will be skipped" >&2
        fi
    fi
}

systemd_tools() {  # systemd-analyze, to verify the service units as installed
    if ! command -v systemd-analyze >/dev/null; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            apt-get install -y --no-install-recommends systemd >/dev/null \
                || echo "apt-get install systemd failed: the unit checks will be skipped" >&2
        else
            echo "no systemd-analyze (apt-get install systemd): the unit checks will be skipped" >&2
        fi
    fi
}

case "${1:-}" in
    demo)
        exec .venv/bin/hearth demo ;;
    test)
        js_peer
        mcp_servers
        browser
        systemd_tools
        .venv/bin/ruff check .
        .venv/bin/mypy  # --strict over every product package: [tool.mypy] in pyproject.toml
        # the fuzz budget (>= 10^6 executions) runs beside the suite, at a lower priority
        fuzz_log=$(mktemp)
        nice -n 10 .venv/bin/python tests/fuzz/run_all.py >"$fuzz_log" 2>&1 &
        fuzz_pid=$!
        suite=0
        .venv/bin/pytest || suite=$?
        # the tests that wait on the clock, once more beside one CPU-burning process
        .venv/bin/python tests/under_load.py --runs 1 --burners 1 -- -m timing || suite=$?
        fuzz=0
        wait "$fuzz_pid" || fuzz=$?
        cat "$fuzz_log"
        rm -f "$fuzz_log"
        [ "$suite" -eq 0 ] && [ "$fuzz" -eq 0 ] || exit 1
        ;;
    *)
        echo "usage: bash deploy/bootstrap.sh demo|test" >&2; exit 2 ;;
esac
