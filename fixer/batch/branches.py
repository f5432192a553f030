"""``--branch NAME``: each clean git repository gets a new branch holding one commit with its
fixes, made beside the checkout: the working tree, the index and the current branch are not
touched (the commit is built in a temporary index from the fixed bytes).

Nothing a checked repository configures may run: hooks are off (``core.hooksPath=/dev/null``;
no command used here runs a hook but ``update-ref``'s reference-transaction), and so are
``core.fsmonitor``, signing and automatic gc; system config is not read
(``GIT_CONFIG_NOSYSTEM``). No command reads the working tree through git, so no filter driver
(``.gitattributes`` + ``filter.*``) or fsmonitor ever runs: whether the tree is clean is decided
by hashing the tracked files here, as git hashes them. A repository with changes to tracked
files, or untracked files, is skipped with a message."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tempfile
from typing import Optional, Sequence

from fixer.batch.changes import Change

SAFE = [
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
    "-c", "commit.gpgSign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.pager=cat",
]
_KEEP = ("GIT_AUTHOR_", "GIT_COMMITTER_")  # who commits: the only GIT_* variables passed on
# who commits where git knows no one (a fresh machine or CI image): graphfix's own commit only
FALLBACK_NAME, FALLBACK_EMAIL = "graphfix", "graphfix@localhost"


class GitError(Exception):
    pass


def _env(extra: Optional[dict] = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith(_KEEP)}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat", LC_ALL="C")
    env.update(extra or {})
    return env


def git(root: str, *args: str, data: Optional[bytes] = None, env: Optional[dict] = None) -> bytes:
    try:
        done = subprocess.run(["git", *SAFE, "-C", root, *args], input=data, capture_output=True, env=_env(env), timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if done.returncode:
        raise GitError(f"git {args[0]}: {done.stderr.decode('utf-8', 'replace').strip() or done.returncode}")
    return done.stdout


def valid_name(name: str) -> bool:
    """Whether ``name`` can name a branch (asked of git outside any repository)."""
    try:
        return subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], cwd="/", env=_env(), capture_output=True).returncode == 0
    except OSError:
        return False


def make_branch(root: Optional[str], name: str, changes: Sequence[Change], message: str) -> str:
    """Create the branch; what happened, in a few words. Raises GitError when git fails."""
    if root is None:
        return "skipped: not a git repository"
    if not changes:
        return "no fixes: no branch"
    stranger = _foreign_git_file(root)
    if stranger:
        return f"skipped: its .git file names {stranger}, a repository that does not point back to this folder"
    head = _maybe(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if head is None:
        return "skipped: no commit yet"
    if _maybe(root, "rev-parse", "--verify", "-q", f"refs/heads/{name}") is not None:
        return f"skipped: branch {name} already exists"
    dirty = _dirty(root)
    if dirty:
        return f"skipped: the working tree is not clean ({len(dirty)} changed or untracked path(s), e.g. {dirty[0]}); commit or stash first"
    modes = _tracked(root, head)
    tracked = [change for change in changes if change.name in modes]  # git ignores the others
    if not tracked:
        return "skipped: the files fixed are not tracked by git"
    with tempfile.TemporaryDirectory(prefix="graphfix-index-") as folder:
        index = {"GIT_INDEX_FILE": os.path.join(folder, "index")}
        git(root, "read-tree", head, env=index)
        converted = _eol_converted(root, [change.name for change in tracked])
        for change in tracked:
            data = change.fixed.replace(b"\r\n", b"\n") if change.name in converted else change.fixed  # as git stores it
            blob = git(root, "hash-object", "-w", "--no-filters", "--stdin", data=data).decode().strip()
            git(root, "update-index", "--cacheinfo", f"{modes[change.name]},{blob},{change.name}", env=index)
        tree = git(root, "write-tree", env=index).decode().strip()
    identity = _missing_identity(root)
    commit = git(root, "commit-tree", tree, "-p", head, "--no-gpg-sign", "-F", "-", data=message.encode(), env=identity).decode().strip()
    git(root, "update-ref", "-m", "graphfix --branch", f"refs/heads/{name}", commit, "")  # "": must not exist yet
    who = f"; committed as {FALLBACK_NAME} <{FALLBACK_EMAIL}> (no git identity configured)" if identity else ""
    return f"branch {name} ({commit[:12]}): {len(tracked)} file(s){_left_out(changes, modes)}{who}"


def _left_out(changes: Sequence[Change], modes: dict[str, str]) -> str:
    """The fixed files the commit leaves out: inside a submodule (tracked by its own
    repository, which gets no branch here), or untracked."""
    submodules = [path + "/" for path, mode in modes.items() if mode == "160000"]
    outside = [change.name for change in changes if change.name not in modes]
    inside = sum(any(name.startswith(folder) for folder in submodules) for name in outside)
    words = [f"{inside} file(s) of a submodule", f"{len(outside) - inside} untracked file(s)"]
    counts = (inside, len(outside) - inside)
    said = " and ".join(w for w, n in zip(words, counts) if n)
    return f"; {said} left out" if said else ""


def _foreign_git_file(root: str) -> Optional[str]:
    """For a ``.git`` file (``gitdir: X``), the repository X when X does not belong to ``root``.
    A linked worktree's X names it back (``X/gitdir``), and so does a submodule's (its
    ``core.worktree``); a copied folder with a stale or hostile ``.git`` file does not, and git
    would write the branch into X, a repository nobody named."""
    dot_git = os.path.join(root, ".git")
    if not os.path.isfile(dot_git):
        return None
    try:
        with open(dot_git, encoding="utf-8") as handle:
            named = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return dot_git
    if not named.startswith("gitdir:"):
        return dot_git
    gitdir = os.path.join(root, named[len("gitdir:"):].strip())
    here = os.path.realpath(root)
    try:
        with open(os.path.join(gitdir, "gitdir"), encoding="utf-8") as handle:  # a linked worktree
            back = os.path.join(gitdir, handle.read().strip())
        if os.path.realpath(os.path.dirname(back)) == here:
            return None
    except (OSError, UnicodeDecodeError):
        pass
    worktree = _maybe(root, "config", "--file", os.path.join(gitdir, "config"), "--get", "core.worktree")
    if worktree is not None and os.path.realpath(os.path.join(gitdir, worktree)) == here:  # a submodule
        return None
    return os.path.realpath(gitdir)


def _missing_identity(root: str) -> dict:
    """GIT_AUTHOR_*/GIT_COMMITTER_* naming graphfix for each role git cannot name (``git var``
    fails as ``git commit`` would: "Author identity unknown"); empty when git knows both."""
    missing = {}
    for role in ("AUTHOR", "COMMITTER"):
        if _maybe(root, "var", f"GIT_{role}_IDENT") is None:
            missing.update({f"GIT_{role}_NAME": FALLBACK_NAME, f"GIT_{role}_EMAIL": FALLBACK_EMAIL})
    return missing


def _maybe(root: str, *args: str) -> Optional[str]:
    try:
        return git(root, *args).decode().strip() or None
    except GitError:
        return None


def _tracked(root: str, head: str) -> dict[str, str]:
    """path -> mode of each file in ``head``."""
    listing = git(root, "ls-tree", "-r", "-z", "--full-tree", head)
    found = {}
    for entry in filter(None, listing.split(b"\0")):
        info, _, path = entry.partition(b"\t")
        found[os.fsdecode(path)] = info.split()[0].decode()
    return found


def _dirty(root: str) -> list[str]:
    """Paths whose index or working-tree state differs from HEAD, and untracked paths."""
    staged = git(root, "diff-index", "--cached", "--name-only", "-z", "HEAD", "--").split(b"\0")
    untracked = git(root, "ls-files", "-z", "--others", "--exclude-standard", "--directory", "--no-empty-directory").split(b"\0")
    algorithm = git(root, "rev-parse", "--show-object-format").decode().strip() or "sha1"
    modified = []
    for entry in filter(None, git(root, "ls-files", "-s", "-z").split(b"\0")):
        info, _, path = entry.partition(b"\t")
        mode, blob = info.split()[:2]
        name = os.fsdecode(path)
        if mode != b"160000" and _worktree_blob(os.path.join(root, name), mode.decode(), algorithm) != blob.decode():
            modified.append((name, mode.decode(), blob.decode()))
    converted = _eol_converted(root, [name for name, _, _ in modified])
    modified = [
        name for name, mode, blob in modified
        if name not in converted or _worktree_blob(os.path.join(root, name), mode, algorithm, lf=True) != blob
    ]
    return sorted({os.fsdecode(p) for p in staged + untracked if p} | set(modified))


def _eol_converted(root: str, names: list[str]) -> set[str]:
    """Those of ``names`` whose line endings git converts on the way in (``text``/``eol`` in
    ``.gitattributes``, or ``core.autocrlf``): git hashes such a file with CRLF made LF. Asked
    of ``check-attr`` and ``config``, which run no filter and no hook."""
    if not names:
        return set()
    autocrlf = (_maybe(root, "config", "--get", "core.autocrlf") or "false").lower() in ("true", "input")
    listing = git(root, "check-attr", "-z", "--stdin", "text", "eol", data=b"".join(os.fsencode(n) + b"\0" for n in names))
    fields = listing.split(b"\0")
    attributes: dict[str, dict[bytes, bytes]] = {}
    for index in range(0, len(fields) - 2, 3):  # path, attribute, value
        attributes.setdefault(os.fsdecode(fields[index]), {})[fields[index + 1]] = fields[index + 2]
    converted = set()
    for path, found in attributes.items():
        text, eol = found.get(b"text", b"unspecified"), found.get(b"eol", b"unspecified")
        if text != b"unset" and (text in (b"set", b"auto") or eol in (b"crlf", b"lf") or (text == b"unspecified" and autocrlf)):
            converted.add(path)
    return converted


def _worktree_blob(path: str, mode: str, algorithm: str, lf: bool = False) -> Optional[str]:
    """The blob id git would give the working-tree file (None: missing, or another kind or
    mode); ``lf``: with its CRLF line endings made LF, as git's eol conversion does."""
    try:
        info = os.lstat(path)
        if mode == "120000":
            data = os.fsencode(os.readlink(path)) if stat.S_ISLNK(info.st_mode) else None
        elif stat.S_ISREG(info.st_mode) and (mode == "100755") == bool(info.st_mode & stat.S_IXUSR):
            with open(path, "rb") as handle:
                data = handle.read()
        else:
            data = None
    except OSError:
        return None
    if data is None:
        return None
    if lf:
        data = data.replace(b"\r\n", b"\n")
    digest = hashlib.new(algorithm)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()
