"""The README's examples run (issue 29): each ```python block is run against a real bus, with the
URL and a token put in place of the README's placeholders."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from signalbus_client import AdminClient, Client, Signal

from conftest import CLIENT_DIR, Bus

README = CLIENT_DIR / "README.md"
URL_PLACEHOLDER = "http://127.0.0.1:7400"
TOKEN_PLACEHOLDER = "sb_…"


def python_blocks() -> List[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_python_examples() -> None:
    blocks = python_blocks()
    assert blocks, "no ```python block in the README"
    for block in blocks:
        assert URL_PLACEHOLDER in block and TOKEN_PLACEHOLDER in block, block


async def test_readme_examples_run_and_exit_quietly_on_ctrl_c(bus: Bus, admin: AdminClient, tmp_path: Path) -> None:
    bot_tok = (await admin.register("bot", kind="daemon")).token
    alice_tok = (await admin.register("alice", kind="daemon")).token
    for i, block in enumerate(python_blocks()):
        script = tmp_path / f"readme_{i}.py"
        script.write_text(block.replace(URL_PLACEHOLDER, bus.url).replace(TOKEN_PLACEHOLDER, bot_tok))
        proc = subprocess.Popen(
            [sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Ctrl-C as at a terminal: a suite started in the background (`cmd &` in a script)
            # inherits SIGINT ignored, and Python then keeps ignoring it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            async with Client(bus.url, alice_tok) as alice:
                # the example sends alice a StatusUpdate ...
                sig: Signal = await alice.receive(timeout=20)
                assert (sig.from_, sig.type, sig.payload) == ("bot", "StatusUpdate", {"build": "green"})
                await alice.ack(sig)
                # ... and answers a Question (its handler replies)
                answer = await alice.ask("bot", "Question", {"q": "?"}, timeout=10)
                assert (answer.type, answer.payload) == ("Answer", {"a": 42})
            assert proc.poll() is None, "the example should serve until cancelled"
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            deadline = time.monotonic() + 15
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            out, err = proc.communicate(timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = err.decode(errors="replace")
        assert proc.returncode == 0, f"exit {proc.returncode}:\n{stderr}"
        assert "Traceback" not in stderr, stderr
        assert b"alice Question {'q': '?'}" in out, out  # its handler printed the Question
