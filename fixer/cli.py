"""Command line: ``graphfix [check] PATH...``, ``graphfix rules``, ``graphfix explain GFxxx``.

Diffs and diagnostics go to stdout, messages to stderr. Exit codes: 0 clean, 1 findings (or a
diff); 2 graphfix could not do what was asked: a usage or configuration error, or a bug of ours (a
crash, a rule crash, a fix refused because it broke the code), as ruff; 123 a file could not be
read, decoded, parsed or written (black's code). 2 wins over 123, which wins over 1."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import List, Optional, Sequence

import typer

from fixer import __version__
from fixer.batch import branches, report
from fixer.batch.deliver import deliver, print_grouped, usable_outputs
from fixer.batch.progress import Progress
from fixer.batch.units import UnitError, repositories
from fixer.batch.work import plan
from fixer.config import ConfigError, find_pyproject, parse_size
from fixer.diff import display_path
from fixer.engine import FileResult, Options
from fixer.output import FORMATS
from fixer.registry import all_rules, by_code, explanation, rules_page, unknown_selectors
from fixer.rule import rule_url
from fixer.hierarchy import ConfigTree, Flags
from fixer.ignore import compile_patterns
from fixer.interactive import Terminal, review_results, usage_problem
from fixer import reporting, stdin_filter
from fixer.reporting import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, err as _err
from fixer.runner import run

EXIT_INTERRUPTED = 130  # --interactive stopped by Ctrl-C (the shell's code for SIGINT)
REFUSED_CACHE = object()  # the cache folder chosen may not be used: checked without one, exit 2

app = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False, rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})


def _split(values: Optional[List[str]]) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _size_limit(flag: str) -> int:
    try:
        return parse_size(flag)
    except ValueError as exc:
        _err(f"graphfix: error: max-file-size: {exc}")
        raise typer.Exit(EXIT_ERROR)


def _tree(config: Optional[Path], flags: Flags) -> ConfigTree:
    try:
        return ConfigTree(flags, fixed=config, fallback=None if config else find_pyproject(Path.cwd()))
    except ConfigError as exc:
        _usage(str(exc))


def _usage(message: str) -> None:
    _err(f"graphfix: error: {message}")
    stdin_filter.give_back_buffer()  # an editor filter (--fix -) gets its buffer back as it came, never nothing
    raise typer.Exit(EXIT_ERROR)


@app.command("check")
def check(
    paths: List[str] = typer.Argument(None, help="Files or folders to check ('-' reads stdin). Default: current folder."),
    diff: bool = typer.Option(False, "--diff", help="Print the fixes as unified diffs; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply fixes in place (to stdout for '-')."),
    interactive: bool = typer.Option(False, "--interactive", help="With --fix: review each fix as a diff hunk and answer y/n/a/d/q/? (as git add -p); only accepted fixes are written. Needs a terminal."),
    unsafe_fixes: Optional[bool] = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes", help="Include fixes that change gradients or behaviour."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes, prefixes or names to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes, prefixes or names to disable."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", "--extend-exclude", help="Paths to skip: .gitignore-style patterns, relative to the folder given."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", help="Name to report for source read from stdin."),
    output_format: Optional[str] = typer.Option(None, "--output-format", help=f"One of: {', '.join(FORMATS)}."),
    color: str = typer.Option("auto", "--color", help="Colour text and full reports: auto (a terminal, unless NO_COLOR is set), always, never.", metavar="WHEN"),
    output_file: Optional[str] = typer.Option(None, "--output-file", "-o", help="Write the report (or diffs) to FILE, not stdout.", metavar="FILE"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes (default: all cores)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Config to read for every file: pyproject.toml ([tool.graphfix]), graphfix.toml or .graphfix.toml."),
    no_gitignore: bool = typer.Option(False, "--no-respect-gitignore", help="Also check files .gitignore excludes."),
    force_exclude: Optional[bool] = typer.Option(None, "--force-exclude/--no-force-exclude", help="Apply exclude also to paths named explicitly (and --stdin-filename), as pre-commit names them."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    exit_non_zero_on_fix: bool = typer.Option(False, "--exit-non-zero-on-fix", help="With --fix: exit 1 if anything was fixed."),
    statistics: bool = typer.Option(False, "--statistics", help="Print a count per rule instead of each finding."),
    max_file_size: Optional[str] = typer.Option(None, "--max-file-size", help="Skip (and name) larger files, e.g. 8MB, 500KB (default 8MB)."),
    repos_in: Optional[List[str]] = typer.Option(None, "--repos-in", help="Batch: every folder in DIR is a repository.", metavar="DIR"),
    repos_from: Optional[List[str]] = typer.Option(None, "--repos-from", help="Batch: the repositories listed in FILE, one path a line ('-': stdin).", metavar="FILE"),
    report_file: Optional[str] = typer.Option(None, "--report", help="Batch: write a summary per repository to FILE (.md or .json).", metavar="FILE"),
    patch_dir: Optional[str] = typer.Option(None, "--patch-dir", help="Batch: write one git-apply-able patch per repository into DIR.", metavar="DIR"),
    branch: Optional[str] = typer.Option(None, "--branch", help="Batch: commit each clean git repository's fixes on a new branch NAME (the checkout is not touched).", metavar="NAME"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Batch: run each repository's work on the dask.distributed cluster at ADDRESS (tcp://host:port, or a scheduler file); needs graphfix[distributed].", metavar="ADDRESS"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
    cache_dir: Optional[str] = typer.Option(None, "--cache-dir", help="The result cache's folder (default: .graphfix_cache at the project root; env GRAPHFIX_CACHE_DIR)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress display (shown only when stderr is a terminal)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (and, for --fix -, no remaining findings)."),
    silent: bool = typer.Option(False, "--silent", "-s", help="Nothing on stderr at all; the exit code tells. For editor filters."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Tracebacks for rule crashes."),
) -> None:
    """Find autograd graph-lifetime bugs; --diff shows fixes, --fix applies them."""
    reporting.silent = silent
    if fix and ("-" in (paths or []) or (not paths and stdin_filename is not None)):
        stdin_filter.owe_buffer()
    if color not in ("auto", "always", "never"):
        _usage(f"--color {color!r}: one of auto, always, never")
    reporting.color = color
    if diff and fix:
        _usage("--diff and --fix cannot be combined")
    if interactive and (problem := usage_problem(fix, diff, "-" in (paths or []) or stdin_filename is not None, silent)):
        _usage(problem)
    if branch is not None and (fix or not branches.valid_name(branch)):
        _usage("--branch leaves your files as they are: run --fix separately" if fix else f"--branch {branch!r} is not a valid branch name")
    if report_file is not None and not report_file.endswith(report.SUFFIXES):
        _usage(f"--report {report_file!r}: the name must end in .md (Markdown) or .json")
    selectors, ignores = _split(select), _split(ignore)
    bad = unknown_selectors(selectors + ignores)
    if bad:
        _usage(f"unknown rule selector(s): {', '.join(bad)} (see `graphfix rules`)")
    if max_file_size is not None:
        _size_limit(max_file_size)
    base = Options(rules=(), fix=bool(diff or fix or patch_dir or branch), write=fix and not interactive, verbose=verbose)
    flags = Flags(
        select=tuple(selectors) or None, ignore=tuple(ignores) or None, unsafe_fixes=unsafe_fixes,
        max_file_size=max_file_size, respect_gitignore=not no_gitignore, force_exclude=force_exclude, base=base,
    )
    tree = _tree(config, flags)
    settings = tree.fallback.settings  # the run's own settings: output format and jobs
    fmt = output_format or settings.output_format
    if fmt not in FORMATS:
        _usage(f"unknown --output-format {fmt!r} (one of: {', '.join(FORMATS)})")
    workers = jobs if jobs is not None else settings.jobs
    if workers < 0:
        _usage(f"--jobs must be 0 (all cores) or more, not {workers}")
    quiet = quiet or silent
    if stdin_filename is not None and paths and paths != ["-"]:
        _usage("--stdin-filename reads the source from stdin; give no other path (or '-')")
    batch = bool(repos_in or repos_from or report_file or patch_dir or branch or scheduler)
    paths = paths or ([] if repos_in or repos_from else ["-"] if stdin_filename is not None else ["."])
    if "-" in paths and fix and output_file is not None:
        _usage("--fix - writes the buffer to stdout: --output-file cannot take it")
    with contextlib.ExitStack() as stack:
        if output_file is not None:
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(_open_output(output_file))))
        code = _dispatch(paths, tree, stdin_filename, diff, fix, fmt, quiet, batch, no_cache, cache_dir, exclude, workers, statistics,
                         repos_in, repos_from, report_file, patch_dir, branch, no_progress, interactive, scheduler, exit_non_zero_on_fix)
    raise typer.Exit(EXIT_CLEAN if exit_zero and code == EXIT_FINDINGS else code)


def _open_output(name: str):
    try:
        return open(name, "w", encoding="utf-8")
    except OSError as exc:
        _usage(f"--output-file {name}: {exc.strerror or exc}")


def _dispatch(paths, tree, stdin_filename, diff, fix, fmt, quiet, batch, no_cache, cache_dir, exclude, workers, statistics,
              repos_in, repos_from, report_file, patch_dir, branch, no_progress, interactive, scheduler, exit_non_zero_on_fix) -> int:
    """Check stdin or the files; the exit code."""
    if "-" in paths:
        if len(paths) > 1 or batch:
            _usage("'-' (stdin) cannot be combined with other paths or batch options")
        resolved = (tree.for_file(stdin_filename) if stdin_filename else None) or tree.fallback
        name = os.path.abspath(stdin_filename or "-")
        code = stdin_filter.run_stdin(stdin_filename or "-", resolved.options(name, None), diff, fix, fmt, quiet, resolved.force_excluded(name, compile_patterns(_split(exclude)) if exclude else None))
        code = EXIT_ERROR if _config_errors(tree) else code
    else:
        cache = None if no_cache or os.environ.get("GRAPHFIX_NO_CACHE") else _open_cache(cache_dir, tree, [*paths, *(repos_in or [])])
        refused = cache is REFUSED_CACHE
        code, changed = _run_files(paths, tree, _split(exclude), workers, fmt, quiet, diff, fix, statistics, batch, repos_in or [],
                                   repos_from or [], report_file, patch_dir, branch, no_progress, interactive, scheduler,
                                   None if refused else cache)
        code = EXIT_ERROR if refused else code
        if fix and exit_non_zero_on_fix and code == EXIT_CLEAN and changed:
            code = EXIT_FINDINGS
    return code


def _config_errors(tree: ConfigTree) -> bool:
    """Print the configs that could not be used (the files below them were not checked)."""
    for path, message in tree.errors.items():
        _err(f"graphfix: error: {message}; the files below {display_path(os.path.dirname(path))} were not checked")
    return bool(tree.errors)


def _open_cache(flag: Optional[str], tree: ConfigTree, paths: list[str]):
    """The run's result cache, None when it is not used (nowhere given for paths outside the
    project); a folder graphfix may not use is named (the files are still checked, exit 2)."""
    from fixer.cache import open_run_cache  # a run with --no-cache never imports the cache
    from fixer.cache_folder import LocationError

    try:
        folder = _cache_folder(flag, tree, paths)
        return None if folder is None else open_run_cache(folder, _err)
    except LocationError as exc:
        _err(f"graphfix: error: the result cache is not used: {exc}")
        return REFUSED_CACHE


def _cache_folder(flag: Optional[str], tree: ConfigTree, paths: Sequence[str] = ()) -> Optional[str]:
    from fixer.cache_folder import choose

    config = tree.fallback.config
    return choose(flag, tree.fallback.settings.cache_dir, str(config) if config else None, os.getcwd(), paths)


def _run_files(paths, tree, exclude, workers, fmt, quiet, diff, fix, statistics, batch, repos_in, repos_from, report_file, patch_dir, branch, no_progress, interactive=False, scheduler=None, cache=None) -> tuple[int, bool]:
    """Check the files (of each repository, in a batch); (exit code, whether a file changed)."""
    started = time.perf_counter()
    try:
        repos = repositories(paths, repos_in, repos_from) if batch else None
    except UnitError as exc:
        _usage(str(exc))
    if batch and (problem := usable_outputs(patch_dir, report_file)):
        _usage(problem)
    cluster = _cluster(scheduler) if scheduler else None
    work = plan(paths, repos, tree, exclude, tree.flags.respect_gitignore)
    for problem in work.problems:
        if not problem.is_error:
            _err(f"{display_path(problem.path)}: warning: {problem.message}")
    # a path that could not be used is reported (and counted) as a file that could not be read
    unusable = [FileResult(p.path, errors=[p.message]) for p in work.problems if p.is_error]
    with Progress(work.files, work.owners, len(repos or ()), enabled=not (no_progress or quiet)) as progress:
        if cluster is not None:
            from fixer.batch.distributed import run_on_cluster

            with cluster:
                results = unusable + run_on_cluster(cluster, work, progress.advance)
        else:
            results = unusable + run(work.files, work.variants, workers, work.choice, progress.advance, cache)
    if cache is not None and cache.failed and not quiet:
        _err(f"graphfix: warning: the result cache could not be written ({cache.failed}): {display_path(cache.folder)}")
    if interactive:  # the run computed the fixes without writing: the user picks which are written
        options_of = dict(zip(work.files, (work.variants[c] for c in work.choice)))
        if review_results(results, options_of.__getitem__, Terminal(sys.stdin, sys.stderr)).interrupted:
            raise typer.Exit(EXIT_INTERRUPTED)
    unsafe = any(v.unsafe for v in work.variants)
    owners = {**work.problem_owners, **dict(zip(work.files, work.owners))}
    if statistics and not diff:
        code = reporting.statistics(results, fix, fmt)
    elif batch and fmt == "text" and not diff:
        found = print_grouped(repos, results, owners, "remaining" if fix else "diagnostics", unsafe, sys.stdout)
        code = reporting.finish(results, fix, diff, quiet, found, len(repos), unsafe)
    else:
        code = reporting.report(results, unsafe, diff, fix, fmt, quiet, len(repos) if repos is not None else None)
    failed = False
    if batch:
        summaries, failed = deliver(repos, results, owners, fix=fix, unsafe=unsafe, patch_dir=patch_dir, branch=branch, say=_err)
        if report_file:
            mode = "fix" if fix else "branch" if branch else "patch" if patch_dir else "diff" if diff else "check"
            try:
                report.write(report_file, summaries, time.perf_counter() - started, mode)
            except OSError as exc:
                failed = True
                _err(f"graphfix: error: --report {report_file}: {exc.strerror or exc}")
    changed = any(r.changed for r in results)
    return (EXIT_ERROR if _config_errors(tree) or failed else code), changed


def _cluster(scheduler: str):
    """The dask client (fixer.batch.distributed); exit 2 when the cluster cannot be used."""
    from fixer.batch.distributed import ClusterError, connect

    try:
        return connect(scheduler)
    except ClusterError as exc:
        _usage(str(exc))


@app.command("rules")
def rules_command(
    output_format: str = typer.Option("text", "--output-format", help="text, json, or markdown (the rules page)."),
) -> None:
    """List every rule: code, name, fix safety, summary."""
    if output_format == "markdown":
        typer.echo(rules_page(), nl=False)
    elif output_format == "json":
        records = [
            {"code": r.code, "name": r.name, "fix_safety": r.fix_safety, "summary": r.summary,
             "url": rule_url(r.code), "documentation": r.documentation}
            for r in all_rules()
        ]
        typer.echo(json.dumps(records, indent=2))
    else:
        for rule in all_rules():
            typer.echo(f"{rule.code}  {rule.name:<40} {rule.fix_safety:<7} {rule.summary}" + ("" if rule.default else " (opt-in)"))


@app.command("explain")
def explain(code: str = typer.Argument(..., help="Rule code (GF101) or name.")) -> None:
    """Print a rule's documentation."""
    try:
        rule = by_code(code)
    except KeyError:
        _err(f"graphfix: error: unknown rule {code!r} (see `graphfix rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(explanation(rule))


@app.command("clean")
def clean_command(
    config: Optional[Path] = typer.Option(None, "--config", help="pyproject.toml whose folder is the project root."),
    cache_dir: Optional[str] = typer.Option(None, "--cache-dir", help="The cache folder to remove (default: as check finds it)."),
) -> None:
    """Remove the result cache (.graphfix_cache at the project root): only what graphfix wrote there."""
    from fixer.cache_folder import LocationError, clean

    try:
        folder = _cache_folder(cache_dir, _tree(config, Flags()))
    except LocationError as exc:
        _err(f"graphfix: error: {exc}; nothing removed")
        raise typer.Exit(EXIT_ERROR)
    if folder is None or not os.path.lexists(folder):
        return
    try:
        kept = clean(folder)
    except OSError as exc:
        _err(f"graphfix: error: cannot remove {folder}: {exc.strerror or exc}")
        raise typer.Exit(EXIT_ERROR)
    if kept is None:
        _err(f"graphfix: error: {folder} is not a graphfix cache (no CACHEDIR.TAG of graphfix's); nothing removed")
        raise typer.Exit(EXIT_ERROR)
    if kept:
        _err(f"graphfix: removed graphfix's entries of {folder}; kept what graphfix did not write: {', '.join(kept)}")
    else:
        _err(f"graphfix: removed {folder}")


@app.command("server")
def server_command(
    stdio: bool = typer.Option(True, "--stdio", help="Talk LSP over stdin/stdout: the only transport (many clients pass the flag)."),
) -> None:
    """Run the language server on stdin/stdout."""
    from fixer.server.protocol import serve

    raise typer.Exit(serve())


def _describe_other_commands() -> None:
    """`graphfix --help` is the default command's help, ending with the other commands."""
    others = [c for c in app.registered_commands if c.name != "check"]
    listed = " ".join(f"graphfix {c.name}: {(c.callback.__doc__ or '').strip().splitlines()[0]}" for c in others)
    listed += " graphfix run SCRIPT [ARGS...]: run a training program under the autograd sanitizer."
    for command in app.registered_commands:
        if command.name == "check":
            command.epilog = f"Other commands (each has --help): {listed}"


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("--version", "-V"):
        typer.echo(f"graphfix {__version__}")
        return
    if args and args[0] == "run":  # runs the user's program: not a typer command (its ARGS are the program's)
        from fixer.runtime.command import main as run_main

        raise SystemExit(run_main(args[1:]))
    if args and args[0] in ("-h", "--help"):
        _describe_other_commands()
    if not args or args[0] not in {command.name for command in app.registered_commands}:
        args.insert(0, "check")  # the default command: `graphfix --help` shows its options
    try:
        app(args=args, prog_name="graphfix", standalone_mode=True)
    except Exception as exc:  # a bug of ours: one line and exit 2, never 1 (which means findings)
        if "-v" in args or "--verbose" in args:
            traceback.print_exc()
        _err(f"graphfix: internal error: {type(exc).__name__}: {exc} (--verbose shows the traceback)")
        raise SystemExit(EXIT_ERROR)
    except SystemExit as exc:  # click's usage errors exit 2 already
        raise SystemExit(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR))
