"""The result cache (fixer.cache): a warm run answers from the cache without reading a checked file,
and a result is reused only while the file, every project file its analysis read,
graphfix's code and the settings are unchanged. Runs are subprocesses, as a user runs graphfix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixer import cache as cache_module
from tests.test_project_model import MODEL, SEPARATE, _project

ROOT = Path(__file__).resolve().parent.parent
BUGGY = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.before.py").read_text().replace("  # expect: GF301", "")
CLEAN = (ROOT / "fixtures/loss_accumulated_with_graph/item_already.ok.py").read_text()
UNSAFE_ONLY = (ROOT / "examples/seed001_double_backward.py").read_text()  # one GF106, its fix unsafe


def graphfix(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "GRAPHFIX_NO_CACHE"}  # conftest sets it
    environment.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "fixer", *args], cwd=cwd, capture_output=True, env=environment, timeout=120)


def age(*paths: Path) -> None:
    """Move mtimes a minute back: no longer 'racy', so the stat signature alone is trusted."""
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past))


def index(folder: Path, cache: str = ".graphfix_cache") -> dict:
    """The entries of the one index, each as [{dependency: fingerprint}, result]."""
    files = list(folder.glob(f"{cache}/*/*.json"))
    assert len(files) == 1
    document = json.loads(files[0].read_text())
    table = document["deps"]
    return {path: [dict(table[i] for i in deps), result] for path, (deps, result) in document["entries"].items()}


# graphfix run with an audit hook that lists the files it opens (a hit only stats its file)
OPENS = """
import os, sys
opened = []
sys.addaudithook(lambda event, args: event == "open" and isinstance(args[0], str) and opened.append(os.path.abspath(args[0])))
sys.argv = ["graphfix", *sys.argv[1:]]
try:
    from fixer.cli import main
    main()
finally:
    sys.stderr.write("\\nOPENED " + repr(opened) + "\\n")
"""


def analysed(cwd: Path, *args: str) -> set[str]:
    """The names of the project's .py files a run opened: the files it analysed (or read for one)."""
    environment = {k: v for k, v in os.environ.items() if k != "GRAPHFIX_NO_CACHE"}
    out = subprocess.run(
        [sys.executable, "-c", OPENS, *args], cwd=cwd, capture_output=True, env={**environment, "PYTHONPATH": str(ROOT)}, timeout=120,
    )
    opened = eval(out.stderr.decode().rpartition("OPENED ")[2])
    return {os.path.relpath(p, cwd) for p in opened if p.startswith(str(cwd) + os.sep) and p.endswith(".py")}


def mark_cached(folder: Path, name: str, cache: str = ".graphfix_cache") -> None:
    """Rewrite the cached findings' messages of ``name`` to 'CACHED': a hit shows them, an analysis
    does not (every test of what a change invalidates can tell a hit from a miss)."""
    for target in folder.glob(f"{cache}/*/*.json"):
        document = json.loads(target.read_text())
        for path, (_, result) in document["entries"].items():
            if os.path.basename(path) == name:
                for diagnostic in result[1]:
                    diagnostic[2] = "CACHED"
        target.write_text(json.dumps(document))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    age(tmp_path / "train.py", tmp_path / "clean.py", tmp_path)
    return tmp_path


def test_cold_then_warm_gives_the_same_answer_without_importing_the_analysis(project):
    cold = graphfix(".", cwd=project)
    assert cold.returncode == 1 and b"GF301" in cold.stdout
    assert (project / ".graphfix_cache/.gitignore").read_text().splitlines()[-1] == "*"
    assert (project / ".graphfix_cache/CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    warm = graphfix(".", cwd=project)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert analysed(project, ".") == set(), "a fully warm run analysed something"
    assert analysed(project, "--no-cache", ".") == {"train.py", "clean.py"}  # the check above can fail


def test_a_changed_file_is_analysed_again(project):
    graphfix(".", cwd=project)
    (project / "clean.py").write_text(BUGGY)  # same run, new content
    out = graphfix(".", cwd=project)
    assert out.stdout.decode().count("GF301") == 2
    (project / "train.py").write_text(CLEAN)
    assert graphfix(".", cwd=project).stdout.decode().count("GF301") == 1


def test_same_content_with_a_new_mtime_is_a_hit_and_the_signature_is_refreshed(project):
    graphfix(".", cwd=project)
    mark_cached(project, "train.py")
    os.utime(project / "train.py", (time.time() - 30, time.time() - 30))
    before = index(project)[str(project / "train.py")][0][str(project / "train.py")]
    assert b"CACHED" in graphfix(".", cwd=project).stdout  # read for its digest, which matched: no analysis
    after = index(project)[str(project / "train.py")][0][str(project / "train.py")]
    assert before[1] == after[1] and before[0] != after[0]


@pytest.mark.parametrize(
    "first, second",
    [
        ((), ("--select", "GF3")),  # the rule set
        (("--select", "GF301"), ("--select", "GF301", "--ignore", "GF301")),
        ((), ("--max-file-size", "1KB")),  # a setting that changes results
    ],
)
def test_settings_that_change_results_are_a_new_key(project, first, second):
    graphfix(*first, ".", cwd=project)
    graphfix(*second, ".", cwd=project)
    assert len(list(project.glob(".graphfix_cache/*/*.json"))) == 2
    assert b"GF301" not in graphfix("--select", "GF301", "--ignore", "GF301", ".", cwd=project).stdout


def test_config_in_pyproject_is_part_of_the_key(project):
    assert b"GF301" in graphfix(".", cwd=project).stdout
    (project / "pyproject.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')
    out = graphfix(".", cwd=project)
    assert (out.returncode, out.stdout) == (0, b"")


def test_the_key_changes_with_version_code_and_engine_settings(tmp_path, monkeypatch):
    def key(rules=("GF301",), size=100, root=None):
        return cache_module.settings_key(cache_module.code_key(), list(rules), size, root)

    first = key()
    assert first == key()
    assert len({first, key(("GF301", "GF302")), key(size=200), key(root="/repo")}) == 4
    monkeypatch.setattr(cache_module, "__version__", "99.0")
    assert key() != first
    monkeypatch.undo()
    # graphfix's own source files: a rule edited in a checkout is a new key
    for package in cache_module._PACKAGES:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "x.py").write_text("a = 1\n")
    (tmp_path / "codemods" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "codemods")
    first = key()
    (tmp_path / "fixer/analysis/x.py").write_text("a = 22\n")
    assert key() != first


def test_a_changed_imported_module_invalidates_the_importer(tmp_path):
    train = _project(tmp_path, "relative", MODEL)
    age(*tmp_path.rglob("*.py"), tmp_path, tmp_path / "pkg")
    assert b"GF105" in graphfix(".", cwd=tmp_path).stdout
    assert b"GF105" in graphfix(".", cwd=tmp_path).stdout  # warm
    (train.parent / "models.py").write_text(SEPARATE)  # the trunk is no longer shared
    out = graphfix(".", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (0, b"")
    (train.parent / "models.py").write_text(MODEL)
    assert b"GF105" in graphfix(".", cwd=tmp_path).stdout


def test_a_module_that_appears_invalidates_the_importer(tmp_path, tmp_path_factory):
    project = tmp_path / "project"
    project.mkdir()
    train = _project(project, "from-module", MODEL)
    (project / "models.py").rename(tmp_path / "later.py")  # not there yet: unknown, no finding
    age(train, project)
    cache = tmp_path_factory.mktemp("cache")  # outside: the project's listing stays as it was
    assert graphfix("--cache-dir", str(cache), "train.py", cwd=project).stdout == b""
    entry = index(cache, ".")[str(train)][0]
    assert entry[str(project)][0] == "folder"  # absence recorded as the folder's listing
    (tmp_path / "later.py").rename(project / "models.py")
    assert b"GF105" in graphfix("--cache-dir", str(cache), "train.py", cwd=project).stdout


def test_diff_and_fix_after_a_warm_check(project):
    graphfix(".", cwd=project)
    diff = graphfix("--diff", ".", cwd=project)
    assert diff.returncode == 1 and b"+    running_loss += loss.item()" in diff.stdout
    assert graphfix("--fix", ".", cwd=project).returncode == 0
    out = graphfix(".", cwd=project)
    assert (out.returncode, out.stdout) == (0, b"")


def test_unsafe_fixes_are_not_part_of_the_key_but_decide_what_a_diff_shows(tmp_path):
    (tmp_path / "train.py").write_text(UNSAFE_ONLY)
    age(tmp_path / "train.py", tmp_path)
    assert b"GF106 [-]" in graphfix("train.py", cwd=tmp_path).stdout
    safe = graphfix("--diff", "train.py", cwd=tmp_path)
    assert (safe.returncode, safe.stdout) == (1, b"")
    unsafe = graphfix("--diff", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert unsafe.returncode == 1 and b"--- a/train.py" in unsafe.stdout


def test_no_cache_neither_reads_nor_writes(project):
    graphfix("--no-cache", ".", cwd=project)
    assert not (project / ".graphfix_cache").exists()
    graphfix(".", cwd=project, env={"GRAPHFIX_NO_CACHE": "1"})
    assert not (project / ".graphfix_cache").exists()


def test_cache_dir_flag_env_and_config(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    graphfix("--cache-dir", str(elsewhere / "a"), ".", cwd=project)
    graphfix(".", cwd=project, env={"GRAPHFIX_CACHE_DIR": str(elsewhere / "b")})
    (project / "pyproject.toml").write_text('[tool.graphfix]\ncache-dir = "build/c"\n')  # inside the project only
    graphfix(".", cwd=project)
    assert all((elsewhere / name / "CACHEDIR.TAG").is_file() for name in "ab")
    assert (project / "build" / "c" / "CACHEDIR.TAG").is_file()
    assert not (project / ".graphfix_cache").exists()


def test_errors_the_same_bytes_always_give_are_stored_and_no_other(project):
    from fixer import depends
    from fixer.engine import FileResult

    (project / "broken.py").write_text("x.backward(\n")
    (project / "binary.py").write_bytes(b"loss.backward()\0")
    cold = graphfix(".", cwd=project)
    assert cold.returncode == 123 and b"broken.py: error: cannot parse" in cold.stderr
    assert sorted(Path(p).name for p in index(project)) == ["binary.py", "broken.py", "clean.py", "train.py"]
    warm = graphfix(".", cwd=project)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    cache = cache_module.Cache(str(project / "c"), "k")
    path = str(project / "train.py")
    for passing in ("cannot read: Permission denied", "cannot parse: MemoryError: ", "internal error: KeyError: 1"):
        cache.store(FileResult(path, errors=[passing]), {path: depends.fingerprint(path)})
    cache.store(FileResult(path, errors=["rule GF101 crashed: x"], internal=True), {path: depends.fingerprint(path)})
    assert cache.updates == {}
    cache.store(FileResult(path, errors=["cannot parse: invalid syntax (line 1)"]), {path: depends.fingerprint(path)})
    assert list(cache.updates) == [path]


def test_a_corrupt_index_is_ignored_and_rebuilt(project):
    cold = graphfix(".", cwd=project)
    (target,) = project.glob(".graphfix_cache/*/*.json")
    header = b'{"format": %d, "deps": [["x", null]], "entries": ' % cache_module.FORMAT
    for garbage in (b"\x00garbage{", header + b'{"x": 1}}', header + json.dumps({str(project / "train.py"): [[0, 7], [1, [["GF", 1]], []]]}).encode() + b"}"):
        target.write_bytes(garbage)
        out = graphfix(".", cwd=project)
        assert (out.returncode, out.stdout) == (cold.returncode, cold.stdout)
        assert str(project / "train.py") in index(project)


def test_an_index_nested_too_deep_for_json_is_ignored_and_rebuilt(project):
    cold = graphfix(".", cwd=project)
    (target,) = project.glob(".graphfix_cache/*/*.json")
    target.write_text("[" * 5000 + "]" * 5000)  # RecursionError in json.loads failed every run
    out = graphfix(".", cwd=project)
    assert (out.returncode, out.stdout, out.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert str(project / "train.py") in index(project)


def test_an_edit_in_place_with_its_mtime_put_back_is_seen(project):
    """Same size, same inode, same mtime: only the ctime tells the file changed."""
    path = project / "train.py"
    graphfix(".", cwd=project)
    before = os.stat(path)
    with open(path, "r+b") as handle:  # in place: the inode stays
        handle.write(path.read_bytes().replace(b"running_loss += loss", b"running_loss += 1.00"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    out = graphfix(".", cwd=project)
    assert (out.returncode, b"GF301" in out.stdout) == (0, False)


def test_indexes_of_older_graphfix_code_are_removed_after_a_day(project):
    graphfix(".", cwd=project)
    (ours,) = project.glob(".graphfix_cache/*/*.json")
    folder = ours.parent
    stale = [folder / ("0" * 16 + "-" + "1" * 32 + ".json"), folder / ("2" * 32 + ".json")]  # another code; the old naming
    recent, foreign = folder / ("3" * 16 + "-" + "4" * 32 + ".json"), folder / "notes.json"
    for path in stale + [recent, foreign]:
        path.write_text("{}")
    for path in stale + [foreign]:
        os.utime(path, (time.time() - 2 * 86400,) * 2)
    (project / "clean.py").write_text(CLEAN + "# changed\n")  # something to write
    graphfix(".", cwd=project)
    assert sorted(p.name for p in folder.iterdir()) == sorted([ours.name, recent.name, foreign.name])


def test_an_unwritable_cache_folder_leaves_the_run_going(project):
    (project / "file").write_text("")
    out = graphfix("--cache-dir", str(project / "file" / "cache"), ".", cwd=project)  # ENOTDIR, even as root
    assert out.returncode == 1 and b"GF301" in out.stdout
    assert b"warning: the result cache could not be written" in out.stderr
    if os.geteuid() != 0:
        (project / "ro").mkdir(mode=0o555)
        out = graphfix("--cache-dir", str(project / "ro"), ".", cwd=project)
        assert out.returncode == 1 and b"GF301" in out.stdout


def _writer(folder: str, key: str, tag: str, rounds: int) -> None:
    from fixer import depends
    from fixer.engine import FileResult

    os.makedirs(os.path.join(folder, tag))
    for number in range(rounds):
        path = os.path.join(folder, tag, f"{number}.py")
        Path(path).write_text(f"x = {number}\n")
        cache = cache_module.Cache(os.path.join(folder, "cache"), key)
        cache.store(FileResult(path, parsed=True), {path: depends.fingerprint(path)})
        cache.save()
        assert not cache.failed


def test_concurrent_writers_never_corrupt_the_index(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), "k", tag, 150)) for tag in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    entries = json.loads((tmp_path / "cache" / cache_module.__version__ / "k.json").read_text())["entries"]
    assert str(tmp_path / "a" / "149.py") in entries or str(tmp_path / "b" / "149.py") in entries  # the last writer's, whole
    # each writer merged what the other had written (the index is not locked: a writer that read it just before
    # the other's save drops that save's entry, so how many survive depends on the interleaving; under load
    # fewer than half did once)
    assert any(f"{os.sep}a{os.sep}" in path for path in entries) and any(f"{os.sep}b{os.sep}" in path for path in entries)
    assert not list((tmp_path / "cache" / cache_module.__version__).glob("*.tmp"))


def test_two_runs_at_once_both_answer_right(project):
    for number in range(12):
        (project / f"t{number}.py").write_text(BUGGY if number % 2 else CLEAN)
    args = [sys.executable, "-m", "fixer", "--jobs", "2", "."]
    env = {**{k: v for k, v in os.environ.items() if k != "GRAPHFIX_NO_CACHE"}, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.Popen(args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert outputs[0] == outputs[1] and outputs[0].count(b"GF301") == 7
    assert graphfix(".", cwd=project).stdout == outputs[0]
    assert len(index(project)) == 14


def test_clean_removes_the_cache_and_only_a_graphfix_cache(project):
    graphfix(".", cwd=project)
    out = graphfix("clean", cwd=project)
    assert out.returncode == 0 and not (project / ".graphfix_cache").exists()
    (project / "mine").mkdir()
    (project / "mine" / "keep.txt").write_text("x")
    out = graphfix("clean", "--cache-dir", str(project / "mine"), cwd=project)
    assert out.returncode == 2 and (project / "mine" / "keep.txt").exists()


_opened: list[str] = []
_listening = False


def _audit(event: str, args: tuple) -> None:
    if _listening and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.path.abspath(os.fsdecode(args[0])))


@pytest.mark.parametrize("spelling", ["relative", "package-reexport", "import-module", "relative-module"])
def test_every_project_file_an_analysis_opens_is_recorded(tmp_path, spelling):
    """The guard for code that reads other project files (today fixer.analysis.project_files and project_text): a file
    opened during an analysis but not reported to fixer.depends would leave stale results. A second
    importer analysed in the same process opens nothing new (per-process memos answer): its record
    must still hold every file the first one's analysis opened."""
    global _listening
    from fixer import depends
    from fixer.engine import Options, process_file
    from fixer.registry import all_rules

    train = _project(tmp_path, spelling, MODEL)
    second = train.with_name("train2.py")
    second.write_text(train.read_text())
    options = Options(rules=tuple(all_rules()))
    sys.addaudithook(_audit)  # stays installed, silent unless _listening
    _opened.clear()
    _listening = True
    try:
        with depends.collect() as found:
            assert [d.code for d in process_file(str(train), options).diagnostics] == ["GF105"]
    finally:
        _listening = False
    project_files = {p for p in _opened if p.startswith(str(tmp_path))}
    assert str(train) in project_files and len(project_files) >= 2
    assert project_files <= {os.path.abspath(p) for p in found}
    with depends.collect() as again:
        assert [d.code for d in process_file(str(second), options).diagnostics] == ["GF105"]
    assert (project_files - {str(train)}) | {str(second)} <= set(again)
    # (each may also have read the other while looking for callers of its functions)
    own = (str(train), str(second))
    assert {p: f for p, f in found.items() if p not in own} == {p: f for p, f in again.items() if p not in own}
