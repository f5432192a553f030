"""Where the result cache may live and what `graphfix clean` removes (fixer.cache_folder): nothing
graphfix did not create is ever deleted, and nothing outside the cache is written for it. Each run
has HOME set to a folder of the test, so the home folder the tests protect is their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixer import __version__, cache_folder
from tests.test_cache import BUGGY, ROOT, graphfix


def listing(folder: Path) -> dict[str, bytes]:
    """Every entry below ``folder`` with its bytes (folders and links by name)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        found[name] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes() if path.is_file() else b"<dir>"
    return found


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A home folder with a file in it, a project inside it, and a folder beside the project."""
    (tmp_path / "home" / "proj").mkdir(parents=True)
    (tmp_path / "home" / "notes.txt").write_text("precious")
    (tmp_path / "home" / "proj" / "leak.py").write_text(BUGGY)
    (tmp_path / "home" / "userdir").mkdir()
    (tmp_path / "home" / "userdir" / "notes.txt").write_text("precious")
    return tmp_path


def run(world: Path, *args: str, cwd: str = "home/proj"):
    return graphfix(*args, cwd=world / cwd, env={"HOME": str(world / "home")})


def test_a_home_folder_given_as_the_cache_is_neither_written_nor_removed(world):
    """The incident of the reliability review: `graphfix --cache-dir ~ .`, then `graphfix clean --cache-dir ~`."""
    before = listing(world / "home" / "userdir"), (world / "home" / "notes.txt").read_bytes()
    checked = run(world, "--cache-dir", str(world / "home"), ".")
    assert checked.returncode == 2 and b"GF301" in checked.stdout  # the files are still checked
    assert b"is the home folder or a folder above it" in checked.stderr
    assert not (world / "home" / "CACHEDIR.TAG").exists() and not (world / "home" / ".gitignore").exists()
    cleaned = run(world, "clean", "--cache-dir", str(world / "home"))
    assert cleaned.returncode == 2 and b"nothing removed" in cleaned.stderr
    assert (listing(world / "home" / "userdir"), (world / "home" / "notes.txt").read_bytes()) == before
    for above in (str(world), "/"):
        assert run(world, "clean", "--cache-dir", above).returncode == 2


@pytest.mark.parametrize("configured", ["../userdir", "..", "../..", "/tmp", "sub/../../userdir"])
def test_a_repository_config_cannot_place_the_cache_outside_it(world, configured):
    (world / "home" / "proj" / "pyproject.toml").write_text(f'[tool.graphfix]\ncache-dir = "{configured}"\n')
    before = listing(world / "home")
    checked = run(world, ".")
    assert checked.returncode == 2 and b"GF301" in checked.stdout
    assert b"outside the project" in checked.stderr
    cleaned = run(world, "clean")
    assert cleaned.returncode == 2
    assert listing(world / "home") == before


def test_a_config_cache_dir_inside_the_repository_is_used_relative_to_the_config(world):
    (world / "home" / "proj" / "pyproject.toml").write_text('[tool.graphfix]\ncache-dir = "build/cache"\n')
    (world / "home" / "proj" / "pkg").mkdir()
    assert run(world, "..", cwd="home/proj/pkg").returncode == 1
    assert cache_folder.owned(str(world / "home" / "proj" / "build" / "cache"))
    assert run(world, "clean", cwd="home/proj/pkg").returncode == 0
    assert not (world / "home" / "proj" / "build" / "cache").exists()


@pytest.mark.parametrize("folder", [".", "..", "leak.py"])
def test_the_project_root_a_folder_above_it_or_a_file_is_refused(world, folder):
    before = listing(world / "home")
    out = run(world, "--cache-dir", folder, ".")
    assert out.returncode == 2 and b"GF301" in out.stdout
    assert listing(world / "home") == before


def test_an_existing_folder_graphfix_did_not_create_is_never_adopted(world):
    before = listing(world / "home" / "userdir")
    out = run(world, "--cache-dir", str(world / "home" / "userdir"), ".")
    assert out.returncode == 2 and b"not a graphfix cache" in out.stderr
    assert run(world, "clean", "--cache-dir", str(world / "home" / "userdir")).returncode == 2
    assert listing(world / "home" / "userdir") == before


def test_an_empty_folder_is_taken_and_clean_removes_it(world):
    (world / "home" / "proj" / ".graphfix_cache").mkdir()
    assert run(world, ".").returncode == 1
    assert cache_folder.owned(str(world / "home" / "proj" / ".graphfix_cache"))
    assert run(world, "clean").returncode == 0
    assert not (world / "home" / "proj" / ".graphfix_cache").exists()


def test_clean_removes_only_what_graphfix_wrote_even_under_a_planted_tag(world):
    cache = world / "home" / "proj" / ".graphfix_cache"
    assert run(world, ".").returncode == 1
    version = next(p for p in cache.iterdir() if p.is_dir())
    (cache / "data").mkdir()
    (cache / "data" / "weights.pt").write_text("mine")
    (cache / "notes.txt").write_text("mine")
    (version / "results.csv").write_text("mine")
    (version / ("0" * 32 + ".json")).symlink_to(world / "home" / "notes.txt")  # a link, even with our name, is not ours
    out = run(world, "clean")
    assert out.returncode == 0 and b"kept what graphfix did not write" in out.stderr
    assert sorted(listing(cache)) == sorted(["data", "data/weights.pt", "notes.txt", version.name,
                                             f"{version.name}/results.csv", f"{version.name}/{'0' * 32}.json"])
    assert (world / "home" / "notes.txt").read_text() == "precious"


def test_a_cache_folder_linked_out_of_the_repository_is_refused(world):
    """A cloned repository holding `.graphfix_cache` as a link to a folder elsewhere (C2)."""
    (world / "home" / "proj" / ".graphfix_cache").symlink_to(world / "home" / "userdir", target_is_directory=True)
    before = listing(world / "home" / "userdir")
    out = run(world, ".")
    assert out.returncode == 2 and b"outside the project" in out.stderr
    assert run(world, "clean").returncode == 2
    assert listing(world / "home" / "userdir") == before


def test_marker_links_and_a_linked_version_folder_are_never_written_through(world):
    """A repository ships `.graphfix_cache/.gitignore` as a link to a file outside (C2), or a tag
    and a version folder linked outside: nothing outside is written, created or removed."""
    cache = world / "home" / "proj" / ".graphfix_cache"
    cache.mkdir()
    (cache / ".gitignore").symlink_to(world / "home" / "userdir" / "ignore")  # dangling: exists() is false
    before = listing(world / "home" / "userdir")
    assert run(world, ".").returncode == 2
    assert listing(world / "home" / "userdir") == before
    (cache / ".gitignore").unlink()
    (cache / "CACHEDIR.TAG").write_text(cache_folder.TAG)
    (cache / __version__).symlink_to(world / "home" / "userdir", target_is_directory=True)
    out = run(world, ".")
    assert out.returncode == 1 and b"could not be written" in out.stderr
    assert run(world, "clean").returncode == 0
    assert listing(world / "home" / "userdir") == before


def test_an_explicit_cache_folder_may_be_a_link_the_user_made(world, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("scratch") / "cache"
    elsewhere.mkdir()
    (world / "home" / "proj" / "cache-link").symlink_to(elsewhere, target_is_directory=True)
    assert run(world, "--cache-dir", "cache-link", ".").returncode == 1
    assert cache_folder.owned(str(elsewhere))
    assert run(world, "clean", "--cache-dir", "cache-link").returncode == 0
    assert not elsewhere.exists() and (world / "home" / "proj" / "cache-link").is_symlink()


@pytest.mark.parametrize("config", [
    b'[project]\nname = "demo"\nauthors = [{name = "Jos\xe9 Garc\xeda"}]\n\n[tool.graphfix]\nselect = ["GF1"]\n',
    b"\xff\xfe[tool.graphfix]\n",
    b"[tool.graphfix]\nselect = " + b"[" * 5000 + b"]" * 5000 + b"\n",
])
def test_a_config_graphfix_cannot_read_is_named_and_an_editor_buffer_survives(world, config):
    (world / "home" / "proj" / "pyproject.toml").write_bytes(config)
    out = run(world, "leak.py")
    assert out.returncode == 2 and b"internal error" not in out.stderr
    assert str(world / "home" / "proj" / "pyproject.toml").encode() in out.stderr
    source = (world / "home" / "proj" / "leak.py").read_bytes()
    environment = {k: v for k, v in os.environ.items() if k != "GRAPHFIX_NO_CACHE"}
    environment.update(PYTHONPATH=str(ROOT), HOME=str(world / "home"))
    filtered = subprocess.run([sys.executable, "-m", "fixer", "--fix", "-", "--stdin-filename", "leak.py"], input=source,
                              cwd=world / "home" / "proj", capture_output=True, env=environment, timeout=120)
    assert filtered.returncode == 2 and filtered.stdout == source  # the editor's buffer, as it came


def test_paths_outside_the_project_get_no_cache_unless_one_is_named(world, tmp_path_factory):
    """C4: from a folder with no config, checking a file elsewhere writes nothing anywhere; a
    cache named with --cache-dir is still used."""
    empty = tmp_path_factory.mktemp("empty")
    target = str(world / "home" / "proj" / "leak.py")
    before = listing(world / "home")
    for args in (("--diff", target), (target,)):
        out = graphfix(*args, cwd=empty, env={"HOME": str(world / "home")})
        assert out.returncode == 1 and b"running_loss" in out.stdout
    assert not list(empty.iterdir()) and listing(world / "home") == before
    named = tmp_path_factory.mktemp("named") / "cache"
    assert graphfix("--cache-dir", str(named), target, cwd=empty, env={"HOME": str(world / "home")}).returncode == 1
    assert cache_folder.owned(str(named))


@pytest.mark.parametrize("written", [cache_folder.IGNORE, cache_folder.IGNORE[:12], ""])
def test_a_folder_another_run_is_claiming_is_shared_not_refused(tmp_path, written):
    """Two runs that start together claim one folder: the second sees the first's .gitignore
    whole or half written (and no tag yet). It must take the folder too, not call it foreign (a
    concurrent-writers test failed so, once in a few runs under load)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / cache_folder.IGNORE_NAME).write_text(written)
    cache_folder.check_usable(str(folder))
    if written == cache_folder.IGNORE:
        cache_folder.claim(str(folder))
        assert cache_folder.owned(str(folder))


def test_a_folder_holding_another_gitignore_is_still_refused(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / cache_folder.IGNORE_NAME).write_text("*.pyc\n")
    with pytest.raises(cache_folder.LocationError):
        cache_folder.check_usable(str(folder))
