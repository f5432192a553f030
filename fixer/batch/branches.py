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
        for change in tracked:
            blob = git(root, "hash-object", "-w", "--no-filters", "--stdin", data=change.fixed).decode().strip()
            git(root, "update-index", "--cacheinfo", f"{modes[change.name]},{blob},{change.name}", env=index)
        tree = git(root, "write-tree", env=index).decode().strip()
    identity = _missing_identity(root)
    commit = git(root, "commit-tree", tree, "-p", head, "--no-gpg-sign", "-F", "-", data=message.encode(), env=identity).decode().strip()
    git(root, "update-ref", "-m", "graphfix --branch", f"refs/heads/{name}", commit, "")  # "": must not exist yet
    left = f"; {len(changes) - len(tracked)} untracked file(s) left out" if len(tracked) < len(changes) else ""
    who = f"; committed as {FALLBACK_NAME} <{FALLBACK_EMAIL}> (no git identity configured)" if identity else ""
    return f"branch {name} ({commit[:12]}): {len(tracked)} file(s){left}{who}"


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
            modified.append(name)
    return sorted({os.fsdecode(p) for p in staged + untracked if p} | set(modified))


def _worktree_blob(path: str, mode: str, algorithm: str) -> Optional[str]:
    """The blob id git would give the working-tree file (None: missing, or another kind or mode)."""
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
    digest = hashlib.new(algorithm)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()
