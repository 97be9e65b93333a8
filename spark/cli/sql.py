r"""``colmz sql [CATALOG]``: a psql-like shell on a colmz catalog, no Spark.

Design
------
The shell reads SQL and hands it to :meth:`colmz.Catalog.execute`; everything it prints is
psql's: a query's result as psql's *aligned* table (a centred header, ``-`` and ``+`` under
it, numbers right-aligned, NULL blank, ``(N rows)`` after it), any other statement its
command tag (``CREATE TABLE``, ``INSERT``), an error one line ``ERROR:  ...``.

Where the SQL comes from:

* ``-c SQL`` (repeatable): each is one script, one transaction, as ``psql -c`` -- its writes
  commit together and the last statement's result is printed;
* ``-f FILE`` (repeatable; ``-`` for standard input): statement by statement;
* otherwise the terminal: a prompt with line editing and history (``readline``; kept in
  ``$COLMZ_SQL_HISTORY``, default ``~/.colmz_sql_history``), ``colmz=>`` for a new statement
  and ``colmz->`` while one goes on. Standard input that is not a terminal is read as with
  ``-f -``.

A statement ends at a ``;`` outside strings, quoted names and comments -- colmz's tokenizer
decides, the one every SQL text colmz runs goes through -- so statements span lines and a
line may hold several. Backslash commands, alone on a line: ``\d`` lists the catalog's
objects, ``\d NAME`` an object's columns, ``\dt`` / ``\dm`` / ``\dct`` tables, materialized
views and continual tasks, ``\q`` quits, ``\?`` lists these.

At a prompt an error is printed and the shell goes on (psql's default); in ``-c`` and ``-f``
the first error stops the run: one line on standard error and exit status 2, the statements
before it kept (each was its own transaction), as ``psql -v ON_ERROR_STOP=1`` does.

``CATALOG`` is a durable catalog's directory (or storage URL, with ``--consensus`` for S3);
an absent one is made only with ``--create``, so a mistyped path is an error rather than a
new, empty catalog. Without ``CATALOG`` the catalog lives in memory for the session.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable, Iterator

from colmz.spark.cli.base import InputError, consensus_url, one_line

__all__ = ["Shell", "add_parser", "aligned", "command_tag", "render", "run", "split_statements"]

#: Backslash commands and what they do (``\?``).
HELP = (
    ("\\d", "list tables, materialized views and continual tasks"),
    ("\\d NAME", "describe an object's columns"),
    ("\\dt, \\dm, \\dct", "list tables / materialized views / continual tasks"),
    ("\\q", "quit"),
    ("\\?", "this list"),
)
_KINDS = {"\\dt": "table", "\\dm": "materialized view", "\\dct": "continual task"}
#: Words that name what a DDL statement acts on (its command tag is its verb and these).
_OBJECT_WORDS = {"TABLE", "VIEW", "MATERIALIZED", "CONTINUAL", "TASK", "SCHEMA", "DATABASE",
                 "INDEX", "SOURCE", "SINK", "CLUSTER", "TYPE", "SECRET", "CONNECTION", "ROLE"}


def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz sql`` to the subparsers ``sub``."""
    s = sub.add_parser(
        name,
        help=summary,
        description="A psql-like shell on a colmz catalog: a prompt with history and "
        "multi-line statements, query results printed as psql prints them, \\d to list "
        "objects; or run -c SQL / -f FILE and exit (the first error stops, exit status 2).",
    )
    s.add_argument("catalog", nargs="?", default=None,
                   help="a durable catalog's directory or storage URL (default: in memory)")
    s.add_argument("--consensus", type=consensus_url, default=None,
                   help="consensus URL for an s3:// catalog (postgresql://... or sqlite:///...)")
    s.add_argument("--create", action="store_true", help="make CATALOG when it does not exist")
    s.add_argument("-c", "--command", dest="commands", action="append", default=[],
                   help="run this SQL (one transaction) and exit; repeatable")
    s.add_argument("-f", "--file", dest="files", action="append", default=[],
                   help="run this file's statements ('-': standard input) and exit; repeatable")
    s.set_defaults(json=False)
    return s


def split_statements(text: str) -> tuple[list[str], str]:
    """Split ``text`` at the ``;`` that end statements: ``(complete statements, the rest)``.

    A ``;`` inside a string, a quoted name, a dollar-quoted body or a comment ends nothing;
    an unterminated string or comment leaves everything from its statement on as the rest.

    >>> split_statements("SELECT ';'; SELECT 2;\\nSELECT")
    (["SELECT ';';", 'SELECT 2;'], '\\nSELECT')
    >>> split_statements("SELECT 'open")
    ([], "SELECT 'open")
    """
    from colmz.sql import SQLError
    from colmz.sql.tokens import tokenize

    done: list[str] = []
    start = 0
    while True:
        rest = text[start:]
        try:
            toks = tokenize(rest)
        except SQLError:  # an unterminated string or comment: the statement goes on
            return done, rest
        end = next((t.end for t in toks if t.kind == "op" and t.text == ";"), None)
        if end is None:
            return done, rest
        stmt = rest[:end].strip()
        if stmt != ";":
            done.append(stmt)
        start += end


def command_tag(statement: str) -> str:
    """psql's command tag of a statement that returns no rows: its verb, and for DDL the kind
    of object (``CREATE MATERIALIZED VIEW``).

    >>> command_tag("create table if not exists t (k int)"), command_tag("INSERT INTO t VALUES (1)")
    ('CREATE TABLE', 'INSERT')
    """
    from colmz.sql.tokens import tokenize

    words = [t.upper for t in tokenize(statement)[:8] if t.kind == "word"]
    if not words:
        return ""
    tag = [words[0]]
    if words[0] in ("CREATE", "DROP", "ALTER"):
        tag += [w for w in words[1:] if w in _OBJECT_WORDS]
    return " ".join(tag)


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        if v != v:
            return "NaN"
        if v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    return str(v)


def aligned(names: list[str], rows: list[tuple], numeric: list[bool], title: str | None = None) -> str:
    """Rows as psql's aligned format: header, rule, rows, ``(N rows)``.

    >>> print(aligned(["k", "name"], [(1, "a"), (22, None)], [True, False]))
     k  | name
    ----+------
      1 | a
     22 |
    (2 rows)
    """
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    lines = []
    if title is not None:
        total = sum(widths) + 3 * len(widths) - 1
        lines.append(title.center(total).rstrip())
    lines.append("|".join(f" {n.center(w)} " for n, w in zip(names, widths)).rstrip())
    lines.append("+".join("-" * (w + 2) for w in widths))
    for r in cells:
        lines.append("|".join(
            f" {c.rjust(w) if num else c.ljust(w)} " for c, w, num in zip(r, widths, numeric)
        ).rstrip())
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines)


def _table_text(table) -> str:
    import pyarrow as pa

    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)
               for f in table.schema]
    # Columns by position: a result may hold two columns of one name (count, count).
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return aligned(list(table.column_names), list(zip(*cols)) if cols else [], numeric)


#: What the terminal's line source yields for ^C: drop the statement under way (as psql).
RESET = object()


class Shell:
    """The shell's state: a catalog and where to print. :meth:`run_statement` and
    :meth:`run_backslash` return the text to print (no trailing newline)."""

    def __init__(self, catalog, out):
        self.catalog = catalog
        self.out = out

    def say(self, text: str) -> None:
        if text:
            print(text, file=self.out, flush=True)

    def run_script(self, script: str) -> str:
        """Run ``script`` as one transaction; the text of its last statement's result."""
        result = self.catalog.execute(script)
        if result is not None:
            return _table_text(result)
        last = split_statements(script if script.rstrip().endswith(";") else script + ";")[0]
        return command_tag(last[-1]) if last else ""

    def run_backslash(self, line: str) -> str:
        from colmz.sql.assign import pg_type_name

        parts = line.split(None, 1)
        cmd, arg = parts[0], (parts[1].strip() if len(parts) > 1 else None)
        if cmd in ("\\q", "\\quit"):
            raise EOFError
        if cmd == "\\?":
            return "\n".join(f"  {c:<16} {what}" for c, what in HELP)
        if cmd == "\\d" and arg:
            try:
                obj = self.catalog.object(arg)
            except KeyError:
                raise InputError(f'Did not find any relation named "{arg}".') from None
            rows = [(c.name, pg_type_name(c.type)) for c in obj.schema]
            return aligned(["Column", "Type"], rows, [False, False], title=f'{obj.kind} "{arg}"')
        if cmd == "\\d" or cmd in _KINDS:
            want = _KINDS.get(cmd)
            rows = []
            for name in self.catalog.names:
                kind = self.catalog.object(name).kind
                if want is None or kind == want:
                    schema = getattr(name, "schema", "public")
                    rows.append((schema, getattr(name, "item", name), kind))
            if not rows:
                return "Did not find any relations."
            return aligned(["Schema", "Name", "Type"], rows, [False] * 3, title="List of relations")
        raise InputError(f"invalid command {cmd} (\\? lists the commands)")

    def statements(self, lines: Iterable[str], prompt=None) -> Iterator[str]:
        """Complete statements and backslash commands from ``lines`` (``prompt(pending)`` is
        told before each line whether a statement is under way)."""
        pending = ""
        it = iter(lines)
        while True:
            if prompt is not None:
                prompt(bool(pending.strip()))
            try:
                line = next(it)
            except StopIteration:
                if pending.strip():
                    yield pending.strip()  # psql runs a last statement without its ';' too
                return
            if line is RESET:  # ^C at the prompt: the statement under way is dropped
                pending = ""
                continue
            if not pending.strip() and line.lstrip().startswith("\\"):
                yield line.strip()
                continue
            done, pending = split_statements(pending + line + "\n")
            yield from done


def _open_catalog(args):
    import colmz

    path = args.catalog
    if path is None:
        if args.consensus is not None:
            raise InputError("--consensus needs CATALOG (the catalog's blob store)")
        return colmz.Catalog()
    local = "://" not in path or path.startswith("file://")
    if local:
        p = path[len("file://"):] if path.startswith("file://") else path
        if os.path.exists(p) and not os.path.isdir(p):
            raise InputError(f"CATALOG {path!r} is a file, not a catalog directory")
        if not os.path.exists(p) and not args.create:
            raise InputError(f"no catalog at {path!r} (use --create to make one there)")
    try:
        return colmz.Catalog(path, consensus=args.consensus)
    except (ValueError, TypeError, OSError) as e:
        raise InputError(f"cannot open catalog {path!r}: {e}") from e


def _error_line(e: BaseException) -> str:
    return one_line(e) or type(e).__name__


def run(args, out) -> dict:
    """``colmz sql``: returns a summary (statements run, errors)."""

    catalog = _open_catalog(args)
    shell = Shell(catalog, out)
    ran = 0
    failures = _failures()
    if args.commands or args.files:
        for sql in args.commands:
            try:
                run_one = shell.run_backslash if sql.lstrip().startswith("\\") else shell.run_script
                shell.say(run_one(sql.strip()))
            except failures as e:
                raise InputError(f"ERROR:  {_error_line(e)}") from e
            ran += 1
        for path in args.files:
            if path != "-" and not os.path.isfile(path):
                raise InputError(f"-f {path!r} is not a file")
            with open(path) if path != "-" else contextlib.nullcontext(sys.stdin) as f:
                ran += _run_lines(shell, f, stop=True)
        return {"statements": ran, "interactive": False}
    if not sys.stdin.isatty():
        return {"statements": _run_lines(shell, sys.stdin, stop=True), "interactive": False}
    return {"statements": _interactive(shell), "interactive": True}


def _run_lines(shell: Shell, lines: Iterable[str], stop: bool) -> int:
    return _run_statements(shell, shell.statements(line.rstrip("\n") for line in lines), stop)


def _failures() -> tuple[type[BaseException], ...]:
    """What a statement may raise that is the user's error, said in one line."""
    from colmz.sql import SQLError

    return (SQLError, ValueError, TypeError, KeyError, OverflowError, InputError, RuntimeError)


def _run_statements(shell: Shell, statements: Iterable[str], stop: bool) -> int:
    ran = 0
    failures = _failures()
    for stmt in statements:
        try:
            if stmt.startswith("\\"):
                shell.say(shell.run_backslash(stmt))
            else:
                shell.say(shell.run_script(stmt))
            ran += 1
        except EOFError:
            break
        except failures as e:
            if stop:
                raise InputError(f"ERROR:  {_error_line(e)}") from e
            print(f"ERROR:  {_error_line(e)}", file=shell.out, flush=True)
    return ran


def _interactive(shell: Shell) -> int:
    import readline

    history = os.environ.get("COLMZ_SQL_HISTORY") or os.path.expanduser("~/.colmz_sql_history")
    with contextlib.suppress(OSError):  # no history yet
        readline.read_history_file(history)
    where = shell.catalog.path or "memory"
    print(f"colmz sql on {where} (\\? for help, \\q to quit)", file=shell.out, flush=True)
    state = {"prompt": "colmz=> "}

    def prompt(pending: bool) -> None:
        state["prompt"] = "colmz-> " if pending else "colmz=> "

    def lines() -> Iterator[str]:
        while True:
            try:
                yield input(state["prompt"])
            except EOFError:
                print(file=shell.out)
                return
            except KeyboardInterrupt:  # ^C drops the statement under way, as psql's
                print(file=shell.out)
                yield RESET

    ran = 0
    try:
        ran = _run_statements(shell, shell.statements(lines(), prompt), stop=False)
    finally:
        try:
            readline.set_history_length(1000)
            readline.write_history_file(history)
        except OSError:
            pass
    return ran


def render(summary: dict, out) -> None:
    """Nothing more to say: every result was printed as it came."""
