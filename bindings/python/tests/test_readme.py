"""The README's example, run as written against a real omrd (its URLs and key directory
pointed at the test's): it prints the payload it sent."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_example_sends_and_retrieves(light, tmp_path, monkeypatch):
    [code] = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(code.strip().splitlines()) <= 7, "the example stays short"
    code = (code.replace("http://127.0.0.1:8080", light.http)
                .replace("http://127.0.0.1:50051", light.grpc))
    monkeypatch.chdir(tmp_path)  # its key directory, "alice", goes here
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "__main__"})
    assert out.getvalue().strip() == "[b'hello']"
    assert (tmp_path / "alice" / "registration.json").exists()
