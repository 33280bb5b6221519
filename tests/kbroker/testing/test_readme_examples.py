"""The README's "Use it in your tests" examples, copied from the README as they stand and run by a
fresh pytest in an empty directory: the plugin comes from the installed package's entry point,
with no conftest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_examples() -> list[str]:
    section = README.read_text().split("## Use it in your tests", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_readme_examples_pass_in_a_fresh_project(tmp_path: Path) -> None:
    examples = readme_examples()
    assert len(examples) == 2  # confluent-kafka and aiokafka
    for number, code in enumerate(examples):
        (tmp_path / f"test_example_{number}.py").write_text(code)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout
