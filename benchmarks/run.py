#!/usr/bin/env python3
"""Real-code benchmark: run graphfix and ruff over torch's source and a pinned corpus.

Two corpora: `library` (torch plus the packages of corpus.txt) and `training`
(the repositories of training_corpus.txt, brought in by training_trees.py).
See benchmarks/README.md. Stdlib only; Python >= 3.9.
"""
import argparse
import functools
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import training_trees  # noqa: E402  (a sibling script)

CORPORA = {"library": os.path.join(HERE, "corpus.txt"),
           "training": training_trees.DEFAULT_CORPUS}
CRASH_MARKER = "Traceback (most recent call last)"
OK_EXIT_CODES = {0, 1, 123}
SPEED_RATIO_LIMIT = 2.0
RSS_LIMIT_MIB = 300.0


@dataclass
class Tree:
    """A source tree; tools run with cwd=base on the relative path rel."""

    name: str
    base: str
    rel: str
    is_torch: bool = False
    repo: "training_trees.Repo | None" = None

    @property
    def path(self):
        return os.path.join(self.base, self.rel)


@dataclass
class RunResult:
    wall: float
    code: int
    stdout: str
    stderr: str
    peak_mib: float


# ---------------------------------------------------------------- corpus


def normalize(name):
    """PEP 503 name normalization, with '_' so it matches archive file names."""
    return re.sub(r"[-_.]+", "_", name).lower()


def read_corpus(path):
    """Return [(name, version)] from 'name==version' lines."""
    reqs = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, version = line.split("==")
                reqs.append((name.strip(), version.strip()))
    return reqs


def split_archive_name(filename):
    """'pkg_name-1.0-py3-none-any.whl' / 'pkg-name-1.0.tar.gz' -> (name, version)."""
    if filename.endswith(".whl"):
        name, version = filename.split("-")[:2]
        return name, version
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            name, _, version = filename[: -len(ext)].rpartition("-")
            return name, version
    return None, None


def find_archive(dl_dir, name, version):
    """Downloaded archive for name==version, wheels first; None if absent."""
    if not os.path.isdir(dl_dir):
        return None
    matches = []
    for filename in os.listdir(dl_dir):
        arch_name, arch_version = split_archive_name(filename)
        if arch_name and normalize(arch_name) == normalize(name) and arch_version == version:
            matches.append(filename)
    matches.sort(key=lambda f: not f.endswith(".whl"))
    return os.path.join(dl_dir, matches[0]) if matches else None


def download(dl_dir, name, version):
    """pip-download name==version into dl_dir; return the archive or None."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           "--no-binary", ":none:", "-d", dl_dir, f"{name}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"download failed: {name}=={version}\n{proc.stderr.strip()}", file=sys.stderr)
        return None
    return find_archive(dl_dir, name, version)


def extract(archive, dest):
    """Unpack archive into dest, atomically (via a temp dir and rename)."""
    tmp = tempfile.mkdtemp(prefix=".unpack-", dir=os.path.dirname(dest))
    try:
        if archive.endswith((".whl", ".zip")):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                if hasattr(tarfile, "data_filter"):
                    tf.extractall(tmp, filter="data")
                else:
                    tf.extractall(tmp)
        root = tmp
        entries = os.listdir(tmp)
        # sdists wrap everything in one 'name-version/' folder: drop that level.
        if not archive.endswith(".whl") and len(entries) == 1:
            root = os.path.join(tmp, entries[0])
        os.rename(root, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def package_tree(cache, name, version, skip_download):
    """Return the unpacked Tree for name==version, downloading if needed."""
    src_dir = os.path.join(cache, "src")
    dirname = f"{name}-{version}"
    dest = os.path.join(src_dir, dirname)
    if not os.path.isdir(dest):
        dl_dir = os.path.join(cache, "dl")
        archive = find_archive(dl_dir, name, version)
        if archive is None and not skip_download:
            os.makedirs(dl_dir, exist_ok=True)
            archive = download(dl_dir, name, version)
        if archive is None:
            print(f"skipping {dirname}: not downloaded", file=sys.stderr)
            return None
        os.makedirs(src_dir, exist_ok=True)
        extract(archive, dest)
    return Tree(dirname, src_dir, dirname)


def torch_tree(torch_dir):
    """Tree for torch's installed source, located without importing torch."""
    if torch_dir is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            print("torch not found: use --torch-dir", file=sys.stderr)
            return None
        torch_dir = spec.submodule_search_locations[0]
    torch_dir = os.path.abspath(torch_dir)
    try:
        name = f"torch-{importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        name = "torch"
    return Tree(name, os.path.dirname(torch_dir), os.path.basename(torch_dir), is_torch=True)


def count_source(root):
    """(.py files, their lines, .ipynb files) under root."""
    files = lines = notebooks = 0
    for dirpath, _, filenames in os.walk(root):
        for filename in filenames:
            if filename.endswith(".py"):
                files += 1
                with open(os.path.join(dirpath, filename), "rb") as f:
                    lines += f.read().count(b"\n")
            elif filename.endswith(".ipynb"):
                notebooks += 1
    return files, lines, notebooks


# ---------------------------------------------------------------- measuring


def maxrss_mib(kib_or_bytes):
    """ru_maxrss is KiB on Linux, bytes on macOS."""
    return kib_or_bytes / (2**20 if sys.platform == "darwin" else 2**10)


@functools.cache
def gnu_time():
    """Path of GNU time (needed for -f/-o), or None."""
    path = "/usr/bin/time"
    if not os.access(path, os.X_OK):
        return None
    probe = subprocess.run([path, "--version"], capture_output=True, text=True)
    return path if "GNU" in probe.stdout + probe.stderr else None


def run_measured(cmd, cwd, keep_stdout):
    """Run cmd once: wall time via perf_counter, peak RSS (MiB) of its largest process.

    A child's ru_maxrss starts at this runner's own RSS high-water mark (it
    is inherited at exec), so cmd runs under GNU time, which forks it from a
    tiny process. Its %M, like os.wait4's rusage (the fallback, floored at the
    runner's RSS), also covers reaped descendants such as graphfix's workers.
    """
    timer = gnu_time()
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "maxrss")
        if timer:
            cmd = [timer, "-f", "%M", "-o", rss_file] + cmd
        with open(os.path.join(tmp, "out"), "w+b") as out, \
                open(os.path.join(tmp, "err"), "w+b") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            if timer:
                with open(rss_file) as f:
                    peak_kib = int(f.read().split()[-1])  # last line; a status line may precede it
                peak = peak_kib / 1024
            else:
                peak = maxrss_mib(usage.ru_maxrss)
            out.seek(0)
            err.seek(0)
            return RunResult(wall, proc.returncode,
                             out.read().decode("utf-8", "replace"),
                             err.read().decode("utf-8", "replace"),
                             peak)


def run_repeated(cmd, cwd, repeat, keep_stdout=True):
    """Run cmd `repeat` times; return all RunResults."""
    return [run_measured(cmd, cwd, keep_stdout) for _ in range(repeat)]


def byte_compile_graphfix():
    """Write the bytecode of graphfix's own modules, as installing a wheel does: an editable
    install under PYTHONDONTWRITEBYTECODE would otherwise compile them on every timed run
    (0.14 s each, measured)."""
    import compileall

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for package in ("fixer", "codemods"):
        compileall.compile_dir(os.path.join(root, package), quiet=1)


def find_tool(option, name):
    """Command list from --graphfix/--ruff, else from PATH; None if missing."""
    if option:
        return shlex.split(option)
    path = shutil.which(name)
    return [path] if path else None


# ---------------------------------------------------------------- graphfix results


def relativize(path, tree):
    """Path relative to the tree's base (cache src dir or torch's parent)."""
    if os.path.isabs(path):
        return os.path.relpath(path, tree.base)
    return path


def is_crash(run):
    return run.code not in OK_EXIT_CODES or CRASH_MARKER in run.stderr


def parse_findings(run, tree):
    """graphfix JSON stdout -> sorted finding dicts; None if not valid JSON."""
    try:
        raw = json.loads(run.stdout)
    except json.JSONDecodeError:
        return None
    findings = [{
        "path": relativize(d["filename"], tree),
        "row": d["location"]["row"],
        "column": d["location"]["column"],
        "code": d["code"],
        "message": d["message"],
        "fixable": d.get("fix") is not None,
        "applicability": (d.get("fix") or {}).get("applicability"),
        **({"cell": d["cell"]} if d.get("cell") is not None else {}),  # notebooks: rows count in the cell
    } for d in raw]
    findings.sort(key=lambda d: (d["path"], d.get("cell", 0), d["row"], d["column"], d["code"]))
    return findings


def parse_errors(run, tree):
    """stderr lines containing ': error:', with the path made relative."""
    errors = []
    for line in run.stderr.splitlines():
        if ": error:" in line:
            path, sep, rest = line.partition(": error:")
            errors.append(relativize(path, tree) + sep + rest)
    return errors


def graphfix_result(runs, tree):
    """Summary of graphfix runs on one tree (findings/errors from the first run)."""
    first = runs[0]
    findings = parse_findings(first, tree)
    crashes = [r for r in runs if is_crash(r)]
    crash_detail = None
    if crashes:
        r = crashes[0]
        crash_detail = f"exit {r.code}\n" + "\n".join(r.stderr.splitlines()[-20:])
    elif findings is None:
        crash_detail = "stdout is not valid JSON:\n" + first.stdout[:2000]
    return {
        "best_seconds": min(r.wall for r in runs),
        "seconds": [r.wall for r in runs],
        "peak_mib": max(r.peak_mib for r in runs),
        "exit_codes": [r.code for r in runs],
        "findings": findings or [],
        "errors": parse_errors(first, tree),
        "crash": crash_detail,
    }


def ruff_result(runs):
    return {
        "best_seconds": min(r.wall for r in runs),
        "seconds": [r.wall for r in runs],
        "peak_mib": max(r.peak_mib for r in runs),
        "exit_codes": [r.code for r in runs],
    }


# ---------------------------------------------------------------- benchmark


def bench_tree(tree, graphfix, ruff, jobs, repeat, unsafe=False):
    """Count and time one tree; return its result dict."""
    files, lines, notebooks = count_source(tree.path)
    result = {"tree": tree.name, "path": tree.path, "is_torch": tree.is_torch,
              "files": files, "lines": lines, "notebooks": notebooks,
              "graphfix": None, "ruff": None}
    if tree.repo:
        result.update(commit=tree.repo.commit, domain=tree.repo.domain)
    if graphfix:
        cmd = graphfix + ["--output-format", "json", "--no-cache", "--jobs", str(jobs)]  # cold runs, as ruff's
        cmd += ["--unsafe-fixes"] if unsafe else []
        result["graphfix"] = graphfix_result(run_repeated(cmd + [tree.rel], tree.base, repeat), tree)
    if ruff:
        cmd = ruff + ["check", "--isolated", "--no-cache", "--quiet", "--exit-zero", tree.rel]
        result["ruff"] = ruff_result(run_repeated(cmd, tree.base, repeat, keep_stdout=False))
    return result


def total_row(results):
    """The TOTAL row: sums, and the max peak."""
    def tool_total(key, peak):
        parts = [r[key] for r in results if r[key]]
        if not parts:
            return None
        total = {"best_seconds": sum(p["best_seconds"] for p in parts)}
        if peak:
            total["peak_mib"] = max(p["peak_mib"] for p in parts)
            total["findings"] = sum(len(p["findings"]) for p in parts)
            total["errors"] = sum(len(p["errors"]) for p in parts)
        return total

    return {"tree": "TOTAL",
            "files": sum(r["files"] for r in results),
            "lines": sum(r["lines"] for r in results),
            "notebooks": sum(r["notebooks"] for r in results),
            "graphfix": tool_total("graphfix", True),
            "ruff": tool_total("ruff", False)}


# ---------------------------------------------------------------- report

COLUMNS = [("tree", "<", 32), ("files", ">", 6), ("lines", ">", 9), ("ipynb", ">", 5),
           ("graphfix s", ">", 10),
           ("ruff s", ">", 7), ("ratio", ">", 6), ("gf MiB", ">", 7),
           ("findings", ">", 8), ("errors", ">", 6)]


def count_cell(value):
    """Tree rows hold lists of findings/errors; the TOTAL row holds counts."""
    return str(len(value)) if isinstance(value, list) else str(value)


def table_cells(row):
    gf, ruff = row["graphfix"], row["ruff"]
    ratio = "-"
    if gf and ruff and ruff["best_seconds"] > 0:
        ratio = f"{gf['best_seconds'] / ruff['best_seconds']:.2f}"
    return [row["tree"], str(row["files"]), str(row["lines"]), str(row["notebooks"]),
            f"{gf['best_seconds']:.2f}" if gf else "-",
            f"{ruff['best_seconds']:.2f}" if ruff else "-",
            ratio,
            f"{gf['peak_mib']:.0f}" if gf else "-",
            count_cell(gf["findings"]) if gf else "-",
            count_cell(gf["errors"]) if gf else "-"]


def format_row(cells):
    return "  ".join(f"{c:{align}{width}}" for c, (_, align, width) in zip(cells, COLUMNS))


def print_report(results, total):
    print(format_row([name for name, _, _ in COLUMNS]))
    for row in results:
        print(format_row(table_cells(row)))
    print(format_row(table_cells(total)))

    gf_results = [r for r in results if r["graphfix"]]
    findings = [f for r in gf_results for f in r["graphfix"]["findings"]]
    errors = [e for r in gf_results for e in r["graphfix"]["errors"]]
    by_rule = Counter(f["code"] for f in findings)
    per_rule = ", ".join(f"{code} {n}" for code, n in sorted(by_rule.items()))
    print(f"\nFindings ({len(findings)}):" + (f" {per_rule}" if per_rule else ""))
    for f in findings:
        cell = f"cell {f['cell']}:" if "cell" in f else ""
        print(f"{f['path']}:{cell}{f['row']}:{f['column']}: {f['code']} {f['message']}")
    print(f"\nErrors ({len(errors)}):")
    for e in errors:
        print(e)
    crashes = [r for r in gf_results if r["graphfix"]["crash"]]
    if crashes:
        print(f"\nCrashes ({len(crashes)}):")
        for r in crashes:
            print(f"--- {r['tree']}: {r['graphfix']['crash']}")


def write_diff(tree, graphfix, jobs, unsafe, diff_dir):
    """graphfix --diff on one tree (cwd = tree base) into DIR/<tree>.diff; stderr beside it."""
    os.makedirs(diff_dir, exist_ok=True)
    cmd = graphfix + ["--diff", "--no-cache", "--jobs", str(jobs)] + (["--unsafe-fixes"] if unsafe else [])
    proc = subprocess.run(cmd + [tree.rel], cwd=tree.base, capture_output=True, text=True)
    name = tree.name.replace("/", "+")
    with open(os.path.join(diff_dir, name + ".diff"), "w") as f:
        f.write(proc.stdout)
    if proc.stderr:
        with open(os.path.join(diff_dir, name + ".stderr"), "w") as f:
            f.write(proc.stderr)


def findings_record(results, unsafe):
    """Per tree: counts, time, errors and findings with paths relative to the tree root."""
    trees = []
    for r in results:
        gf = r["graphfix"]
        if gf is None:
            continue
        prefix = os.path.basename(r["path"]) + os.sep
        findings = [{"path": f["path"][len(prefix):] if f["path"].startswith(prefix) else f["path"],
                     "line": f["row"], "column": f["column"], "code": f["code"],
                     "message": f["message"], "fix": f["fixable"],
                     "applicability": f["applicability"], **({"cell": f["cell"]} if "cell" in f else {})}
                    for f in gf["findings"]]
        errors = [e[len(prefix):] if e.startswith(prefix) else e for e in gf["errors"]]
        tree = {"tree": r["tree"]}
        tree.update({k: r[k] for k in ("commit", "domain") if k in r})
        tree.update(files=r["files"], lines=r["lines"], notebooks=r["notebooks"],
                    graphfix_seconds=round(gf["best_seconds"], 3),
                    findings_by_rule=dict(sorted(Counter(f["code"] for f in findings).items())),
                    errors=errors, crash=gf["crash"], findings=findings)
        trees.append(tree)
    command = "graphfix --output-format json" + (" --unsafe-fixes" if unsafe else "")
    return {"command": command, "trees": trees}


def check_speed(results):
    """Problems with the torch tree's speed/memory budget (empty list if fine)."""
    torch_rows = [r for r in results if r["is_torch"]]
    if not torch_rows or not torch_rows[0]["graphfix"] or not torch_rows[0]["ruff"]:
        return ["--check-speed needs the torch tree measured with both graphfix and ruff"]
    gf, ruff = torch_rows[0]["graphfix"], torch_rows[0]["ruff"]
    problems = []
    if gf["best_seconds"] > SPEED_RATIO_LIMIT * ruff["best_seconds"]:
        problems.append(f"graphfix {gf['best_seconds']:.2f}s > {SPEED_RATIO_LIMIT:g}x "
                        f"ruff {ruff['best_seconds']:.2f}s on torch")
    if gf["peak_mib"] > RSS_LIMIT_MIB:
        problems.append(f"graphfix peak RSS {gf['peak_mib']:.0f} MiB > {RSS_LIMIT_MIB:g} MiB on torch")
    return problems


# ---------------------------------------------------------------- main


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default=os.path.expanduser("~/.cache/graphfix-bench"),
                   help="download/unpack folder, outside the repo (default: %(default)s)")
    p.add_argument("--corpus", default="library",
                   help="'library' (torch + corpus.txt), 'training' (training_corpus.txt), "
                        "or a list in either format (default: %(default)s)")
    p.add_argument("--mirror", default=training_trees.DEFAULT_MIRROR,
                   help="training corpus: folder of git mirrors (default: %(default)s)")
    p.add_argument("--torch-dir", help="torch source dir (default: found via importlib)")
    p.add_argument("--only", help="comma-separated tree names to run (e.g. torch,timm or owner/name)")
    p.add_argument("--skip-download", action="store_true", help="use only what is cached")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="graphfix --jobs (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=3, help="runs per tool; best wall time is kept")
    p.add_argument("--graphfix", help="graphfix command (default: graphfix on PATH)")
    p.add_argument("--ruff", help="ruff command (default: ruff on PATH)")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="pass --unsafe-fixes to graphfix (unsafe fixes in the JSON)")
    p.add_argument("--json", metavar="OUT", help="also write all results as JSON to OUT")
    p.add_argument("--findings", metavar="OUT",
                   help="write per-tree counts and findings (paths relative to the tree) to OUT")
    p.add_argument("--diff-dir", metavar="DIR",
                   help="also run graphfix --diff once per tree and write DIR/<tree>.diff")
    p.add_argument("--check-speed", action="store_true",
                   help=f"exit 2 if on torch graphfix > {SPEED_RATIO_LIMIT:g}x ruff "
                        f"or peak RSS > {RSS_LIMIT_MIB:g} MiB")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return p, args


def is_training_list(path):
    """True if the first entry of path is 'owner/name <commit> <domain>'."""
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                return "==" not in line
    return False


def collect_training_trees(args, parser, path):
    """Trees of a training list, brought in from the mirror unless --skip-download."""
    repos = training_trees.read_corpus(path)
    if args.only:
        only = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = only - {r.repo for r in repos}
        if unknown:
            parser.error(f"--only: unknown tree(s): {', '.join(sorted(unknown))}")
        repos = [r for r in repos if r.repo in only]
    cache = os.path.join(args.cache, "training")
    if not args.skip_download:
        training_trees.bring_all(repos, args.mirror, cache, quiet=True)
    trees = []
    for repo in repos:
        if os.path.isdir(training_trees.tree_path(cache, repo)):
            trees.append(Tree(repo.repo, cache, repo.dirname, repo=repo))
        else:
            print(f"skipping {repo.repo}: not in {cache}", file=sys.stderr)
    return trees


def collect_trees(args, parser):
    """Trees to benchmark, in corpus order with torch first."""
    path = CORPORA.get(args.corpus, args.corpus)
    if is_training_list(path):
        return collect_training_trees(args, parser, path)
    reqs = read_corpus(path)
    only = None
    if args.only:
        only = {normalize(n) for n in args.only.split(",") if n.strip()}
        unknown = only - {"torch"} - {normalize(n) for n, _ in reqs}
        if unknown:
            parser.error(f"--only: unknown tree(s): {', '.join(sorted(unknown))}")
    trees = []
    if only is None or "torch" in only:
        trees.append(torch_tree(args.torch_dir))
    for name, version in reqs:
        if only is None or normalize(name) in only:
            trees.append(package_tree(args.cache, name, version, args.skip_download))
    return [t for t in trees if t is not None]


def main(argv=None):
    parser, args = parse_args(argv)
    args.cache = os.path.abspath(os.path.expanduser(args.cache))
    graphfix = find_tool(args.graphfix, "graphfix")
    ruff = find_tool(args.ruff, "ruff")
    if graphfix is None:
        print("graphfix not found: pip install -e . (benchmarking ruff only)", file=sys.stderr)
    else:
        byte_compile_graphfix()
    if ruff is None:
        print("ruff not found: pip install ruff (benchmarking graphfix only)", file=sys.stderr)

    trees = collect_trees(args, parser)
    results = []
    for tree in trees:
        print(f"benchmarking {tree.name} ...", file=sys.stderr, flush=True)
        results.append(bench_tree(tree, graphfix, ruff, args.jobs, args.repeat, args.unsafe_fixes))
        if graphfix and args.diff_dir:
            write_diff(tree, graphfix, args.jobs, args.unsafe_fixes, args.diff_dir)
    total = total_row(results)
    print_report(results, total)
    if args.findings:
        with open(args.findings, "w") as f:
            json.dump(findings_record(results, args.unsafe_fixes), f, indent=1)
            f.write("\n")

    speed_problems = check_speed(results) if args.check_speed else []
    for problem in speed_problems:
        print(f"check-speed: FAIL: {problem}", file=sys.stderr)
    crashed = any(r["graphfix"] and r["graphfix"]["crash"] for r in results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trees": results, "total": total, "crashed": crashed,
                       "speed_problems": speed_problems}, f, indent=2)
    if crashed:
        return 1
    return 2 if speed_problems else 0


if __name__ == "__main__":
    sys.exit(main())
