#!/usr/bin/env python3
"""Bring the training corpus's trees in from local git mirrors, outside the repo.

Each line of training_corpus.txt is `owner/name <commit> <domain>`. The tree of
that commit is written to `<cache>/<owner>+<name>-<sha12>/` from the mirror's
git directory (`<mirror>/<owner>+<name>/repo[/.git]`, or a bare
`<mirror>/<owner>+<name>`). Trees already in the cache are skipped; repositories
missing from the mirror are named. Nothing from a tree is ever run.

Snapshots lack blobs of 4 MiB and more (images, data, weights), so `git archive`
fails on them; the tree is therefore written blob by blob with
`git cat-file --batch`, and blobs the mirror lacks are listed in
`<tree>.missing` beside the tree. Symlinks and submodules are not written.

Stdlib only; Python >= 3.9.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.join(HERE, "training_corpus.txt")
DEFAULT_MIRROR = "/work/.mirror"
DEFAULT_CACHE = os.path.expanduser("~/.cache/graphfix-bench/training")


@dataclass
class Repo:
    repo: str    # owner/name
    commit: str
    domain: str

    @property
    def key(self):
        return self.repo.replace("/", "+")

    @property
    def dirname(self):
        return f"{self.key}-{self.commit[:12]}"


def read_corpus(path):
    """[Repo] from `owner/name <commit> <domain>` lines ('#' starts a comment)."""
    repos = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3 or parts[0].count("/") != 1 or len(parts[1]) != 40:
                raise ValueError(f"{path}:{number}: expected 'owner/name <40-hex commit> <domain>'")
            repos.append(Repo(*parts))
    return repos


def git_dir(mirror, repo):
    """The mirror's git directory for repo, or None."""
    base = os.path.join(mirror, repo.key)
    for candidate in (os.path.join(base, "repo", ".git"), os.path.join(base, "repo"),
                      os.path.join(base, ".git"), base):
        if os.path.isfile(os.path.join(candidate, "HEAD")) and \
                os.path.isdir(os.path.join(candidate, "objects")):
            return candidate
    return None


def safe_relpath(path):
    """True if a tree path stays inside the tree and avoids .git folders."""
    parts = path.split("/")
    return (path and not path.startswith("/") and
            all(p not in ("", ".", "..", ".git") for p in parts))


def list_blobs(gdir, commit):
    """[(mode, sha, path)] of the regular files in commit's tree."""
    out = subprocess.run(["git", f"--git-dir={gdir}", "ls-tree", "-r", "-z", "--full-tree", commit],
                         capture_output=True, check=True).stdout
    blobs = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind == "blob" and mode in ("100644", "100755"):
            blobs.append((mode, sha, path.decode("utf-8", "surrogateescape")))
    return blobs


def write_tree(gdir, commit, dest):
    """Write commit's regular files under dest; return the paths whose blob is missing."""
    blobs = [b for b in list_blobs(gdir, commit) if safe_relpath(b[2])]
    proc = subprocess.Popen(["git", f"--git-dir={gdir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def feed():
        try:
            for _, sha, _ in blobs:
                proc.stdin.write(sha.encode() + b"\n")
        finally:
            proc.stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    missing = []
    for mode, sha, path in blobs:
        header = proc.stdout.readline().split()
        if len(header) == 2 and header[1] == b"missing":
            missing.append(path)
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)  # the newline after the content
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
        if mode == "100755":
            os.chmod(target, 0o755)
    feeder.join()
    if proc.wait() != 0:
        raise RuntimeError(f"git cat-file failed in {gdir}")
    return missing


def bring_in(repo, mirror, cache):
    """Return 'cached', 'written' or 'no mirror' for repo."""
    dest = os.path.join(cache, repo.dirname)
    if os.path.isdir(dest):
        return "cached"
    gdir = git_dir(mirror, repo)
    if gdir is None:
        return "no mirror"
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".unpack-", dir=cache)
    try:
        missing = write_tree(gdir, repo.commit, tmp)
        with open(dest + ".missing", "w") as f:
            f.writelines(p + "\n" for p in missing)
        os.rename(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "written"


def tree_path(cache, repo):
    return os.path.join(cache, repo.dirname)


def bring_all(repos, mirror, cache, quiet=False):
    """Bring every repo in; return the repos missing from the mirror."""
    absent = []
    for repo in repos:
        try:
            state = bring_in(repo, mirror, cache)
        except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
            print(f"{repo.repo}: failed: {e}", file=sys.stderr)
            absent.append(repo)
            continue
        if state == "no mirror":
            absent.append(repo)
        elif state == "written" and not quiet:
            print(f"{repo.repo}: written to {tree_path(cache, repo)}", file=sys.stderr)
    if absent:
        print(f"missing from the mirror {mirror} ({len(absent)}): "
              + ", ".join(r.repo for r in absent), file=sys.stderr)
    return absent


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=DEFAULT_CORPUS, help="list of repositories (default: %(default)s)")
    p.add_argument("--mirror", default=DEFAULT_MIRROR, help="folder of git mirrors (default: %(default)s)")
    p.add_argument("--cache", default=DEFAULT_CACHE, help="where trees go (default: %(default)s)")
    p.add_argument("--only", help="comma-separated owner/name to bring in")
    args = p.parse_args(argv)
    repos = read_corpus(args.corpus)
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = wanted - {r.repo for r in repos}
        if unknown:
            p.error(f"--only: not in the corpus: {', '.join(sorted(unknown))}")
        repos = [r for r in repos if r.repo in wanted]
    cache = os.path.abspath(os.path.expanduser(args.cache))
    absent = bring_all(repos, args.mirror, cache)
    print(f"{len(repos) - len(absent)} of {len(repos)} trees in {cache}", file=sys.stderr)
    return 1 if absent else 0


if __name__ == "__main__":
    sys.exit(main())
