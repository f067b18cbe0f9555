"""The package as a user installs it: a wheel built from this tree, installed into a fresh
virtual environment, runs `agefacts demo` on an embedded engine of its own from the files the
wheel carries (queries, SQL, ontology, examples, the engine's pinned npm packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import free_port

TOP = Path(__file__).parents[2]


def _install(wheel: Path, venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # As `make install` does: uv, and pip where uv is missing or cannot reach the index (pip
    # reads the machine's own index settings, which uv does not).
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if Path(uv).exists():
        done = subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)], timeout=600)
        if done.returncode == 0:
            return
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)]
    subprocess.run(pip, check=True, timeout=600)


def test_a_wheel_installed_into_a_fresh_venv_runs_the_demo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(dist),
            str(TOP),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = dist.glob("agefacts-*.whl")
    venv = tmp_path / "venv"
    _install(wheel, venv)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGEFACTS_", "PG")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env |= {"AGEFACTS_HOME": str(tmp_path / "home"), "AGEFACTS_PORT": str(free_port())}
    agefacts = str(venv / "bin" / "agefacts")
    try:
        # Run from elsewhere, so that nothing of this tree can be imported instead of the wheel.
        demo = subprocess.run([agefacts, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert demo.returncode == 0, demo.stderr
        assert "conversations: 25 loaded" in demo.stdout
        assert "Siemens in Erlangen" in demo.stdout and "(12 rows)" in demo.stdout
        where = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import agefacts; print(agefacts.__file__)"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert str(venv) in where.stdout  # the installed package, not this tree
    finally:
        subprocess.run([agefacts, "db", "stop"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
