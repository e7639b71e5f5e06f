"""The testing kit's own promises (hearth.companion.swarmkit): a process that dies before
it is ready is said at once, a ready file that is not a JSON object is refused, a failed
command carries its output, and every process started is killed at cleanup."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hearth.companion.swarmkit import KitError, Processes, last_json, run, wait_ready

pytestmark = pytest.mark.timeout(120)


def test_a_process_that_exits_before_it_is_ready_is_reported_not_waited_for(tmp_path) -> None:
    with Processes() as processes:
        proc = processes.spawn(sys.executable, "-c", "raise SystemExit(7)")
        with pytest.raises(KitError, match="exited with 7 before it was ready"):
            wait_ready(proc, tmp_path / "never.json", timeout=100)


@pytest.mark.parametrize("content", ["[1, 2]", '"peer"', "{not json"])
def test_a_ready_file_that_is_not_a_json_object_is_refused(tmp_path, content) -> None:
    ready = tmp_path / "ready.json"
    ready.write_text(content)
    with Processes() as processes:
        proc = processes.spawn(sys.executable, "-c", "import time; time.sleep(60)")
        with pytest.raises(KitError, match="not a JSON object"):
            wait_ready(proc, ready, timeout=30)


def test_cleanup_kills_every_process_still_running() -> None:
    processes = Processes()
    procs = [processes.spawn(sys.executable, "-c", "import time; time.sleep(60)") for _ in "ab"]
    processes.cleanup()
    assert [p.returncode for p in procs] == [-9, -9] and not processes.started


def test_a_failed_command_carries_its_exit_status_and_output() -> None:
    with pytest.raises(KitError, match="exit 2") as info:
        run("hearth", "no-such-command")
    assert "no-such-command" in str(info.value)
    done = run("hearth", "no-such-command", check=False)
    assert done.returncode == 2
    with pytest.raises(KitError, match="printed nothing"):
        last_json(done)


def test_the_last_json_line_is_read_and_a_non_object_is_refused() -> None:
    def printed(out: str) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(["hearth"], 0, out, "")

    assert last_json(printed('progress\n{"ok": true}\n')) == {"ok": True}
    with pytest.raises(KitError, match="not a JSON object"):
        last_json(printed("[1]\n"))
