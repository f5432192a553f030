"""The release: `python -m build` makes a wheel and an sdist of the version pyproject.toml names,
the wheel installs into a fresh virtual environment (a plain venv: nothing of this machine's
site-packages) with only graphfix's own dependencies, and the installed command works there: a
`--diff` on an example exits 1 with the diff, and `graphfix explain GF301` prints the rule's
documentation from the installed package (the docs ship with it).

Skipped only when building is impossible: the build tool (`build`, and setuptools for its isolated
build) cannot be installed, i.e. no network or package index to get them from. Any other failure
(the build, the install, the smoke test) fails the test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from fixer import __version__

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("pyproject.toml", "MANIFEST.in", "README.md", "CHANGELOG.md", "graphfix.py", "fixer", "codemods")
VERSION = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _make_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(where)
    return where / "bin" / "python"


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", *args], env=_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """wheel and sdist built by `python -m build` from a copy of the package's files."""
    base = tmp_path_factory.mktemp("release")
    source = base / "src"
    source.mkdir()
    for name in SHIPPED:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source / name)
    builder = _make_venv(base / "build-venv")
    got = _pip(builder, "install", "build")
    if got.returncode != 0:
        pytest.skip(f"cannot install the build tool (no network or package index?): {got.stderr.strip()[-300:]}")
    out = base / "dist"
    built = subprocess.run([str(builder), "-m", "build", "--outdir", str(out), str(source)],
                           env=_env(), capture_output=True, text=True, timeout=600)
    if built.returncode != 0 and re.search(r"Could not find a version|No matching distribution|connection", built.stdout + built.stderr, re.I):
        pytest.skip(f"the isolated build cannot get setuptools (no network or package index?): {built.stdout[-300:]}")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A fresh plain venv with the wheel and only its own dependencies: the bin folder."""
    env_dir = tmp_path_factory.mktemp("release-install") / "venv"
    python = _make_venv(env_dir)
    wheel = dist / f"graphfix-{VERSION}-py3-none-any.whl"
    got = _pip(python, "install", str(wheel))
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    return env_dir / "bin"


def test_version_is_one_and_the_changelog_names_it():
    assert VERSION == __version__ == "0.2.0"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(VERSION)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.M), "CHANGELOG.md has no entry for the version"


def test_build_makes_a_wheel_and_an_sdist_with_the_package_and_its_docs(dist):
    wheel = dist / f"graphfix-{VERSION}-py3-none-any.whl"
    sdist = dist / f"graphfix-{VERSION}.tar.gz"
    assert wheel.is_file() and sdist.is_file(), sorted(p.name for p in dist.iterdir())
    names = zipfile.ZipFile(wheel).namelist()
    assert "graphfix.py" in names and "fixer/cli.py" in names and "codemods/loss_accumulated_with_graph.py" in names
    assert not any(name.startswith(("tests/", "fixtures/", "benchmarks/")) for name in names)
    with tarfile.open(sdist) as tar:
        members = {Path(m).relative_to(f"graphfix-{VERSION}").as_posix() for m in tar.getnames() if "/" in m}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "fixer/cli.py", "codemods/loss_accumulated_with_graph.py"} <= members


def test_the_installed_wheel_fixes_an_example_and_explains_a_rule(installed, tmp_path):
    shutil.copy(ROOT / "examples" / "accumulate_loss.py", tmp_path / "train.py")
    run = lambda *args: subprocess.run([str(installed / "graphfix"), *args], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    version = run("--version")
    assert version.stdout.strip() == f"graphfix {VERSION}", version
    where = subprocess.run([str(installed / "python"), "-c", "import fixer; print(fixer.__file__)"], cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert str(installed.parent) in where.stdout and str(ROOT) not in where.stdout  # the wheel's copy, not this checkout
    diff = run("--diff", "train.py")
    assert diff.returncode == 1, diff
    assert "--- a/train.py\n+++ b/train.py\n" in diff.stdout and "+        running_loss += loss.item()" in diff.stdout
    explained = run("explain", "GF301")
    assert explained.returncode == 0, explained
    assert "## What it does" in explained.stdout and "## Fix safety" in explained.stdout
    python_m = subprocess.run([str(installed / "python"), "-m", "graphfix", "train.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert python_m.returncode == 1 and "GF301" in python_m.stdout, python_m
