"""The tree stays ruff-clean (the project's lint configuration lives in pyproject.toml)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
