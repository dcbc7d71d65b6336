"""The documentation does not lie about its commands: every `serq-ref` command
line README.md and docs/*.md show a user parses, names files that exist, and
the cheap ones run from the repository root with the exit status and the
output the doc shows.

What is collected (``collect``), from README.md and docs/*.md (not
docs/design/, the design notes written before the build, which show no
command):

- a line of a fenced block or of an indented (4-space) block that starts with
  ``serq-ref `` or ``$ serq-ref `` (the prompt stripped), or that runs one
  after ``&&`` (README's ``pip install -e . && serq-ref run …``: the serq-ref
  part); a ``serq-ref:`` line is output, not a command;
- in a table row, the inline code spans of its first cell that start with
  ``serq-ref ``, and the spans after one in the same cell that start with a
  subcommand (``fmt --check FILE...`` after ``serq-ref fmt FILE``), which get
  the ``serq-ref`` prefix.

How a line is read (``variants``):

- what follows a run of two or more spaces and ``#``, or of three or more
  spaces, is commentary (``# one Lean file on stdout``, conformance.md's
  column of explanations); a shell pipe `` | tail -2`` in a code block is
  cut (the command is what serq-ref runs);
- ``[X]`` is an optional X, taken (so every option shown is checked);
  ``--[no-]X`` is ``--X|--no-X``;
- ``A|B`` inside a word (``--steps N|all``, ``scenario|serve|replay``) and
  `` | `` between words (``[--out D | --no-write]``; at the top of a table
  cell, ``lean FILE | DIR --out D``, where an alternative without the
  subcommand words gets those of the first) are alternatives: variant i takes
  the i-th alternative of every choice (the last where there are fewer), so
  each alternative is parsed once;
- ``X ...``, ``X …`` and ``X...`` are one X; a ``…`` right after the
  subcommand words (oracle.md's ``oracle replay … --real``) stands for the
  arguments of the previous command of that subcommand in the same file;
- the placeholders of ``PLACEHOLDERS`` (FILE, DIR, PATH, SCENARIO.json,
  TRACE.csv, A.log, N, S, COMMAND, NAME=VALUE, …) are replaced by a real
  example of their kind; an upper-case word that looks like a placeholder and
  is none of them fails the test (a new placeholder needs its rule here).

What is decided per command:

- PARSE, every command: its subcommand exists and every option it uses is one
  the parser accepts, by its full name (not an abbreviation argparse would
  take), its values of the option's type: ``semantics.cli``'s
  ``build_parser().parse_args``; ``lean``'s own parsers (``lean``, ``lean
  check``, ``lean prove`` are built inside ``lean_bridge.cli``'s commands, so
  the command runs with their ``parse_args`` made to stop right after
  parsing); ``peer``'s verbs (``peer check DIR``, ``peer campaign N``) as
  ``oracle.peer_cli.command`` reads them, with the verb's work stubbed out.
  ``oracle``'s commands are subparsers of the main parser.
- FILES, every command without a placeholder: every argument that names a
  file (it has a ``/`` or ends in .sq, .json, .jsonl, .csv, .log, .py)
  exists, from the repository root (``../shared/`` is tests/shared_paths.py's
  SHARED), except the values of the options that write (``--out``,
  ``--report``, ``--dump``, ``--log``) and the files of ``NARRATED`` (a log
  the doc's text says an earlier step wrote; an engine the doc makes up) and
  those an earlier command of the same doc writes (``oracle run … --log F``
  then ``oracle diverge … F``).
- RUN, the commands without a placeholder that ``cheap`` allows, a simple
  allow-list of subcommands and argument shapes: ``check``, ``ir``, ``fmt
  --check``, ``trace --rules``, ``trace FILE --steps N`` (N at most 1 000),
  ``trace``/``run`` of a program of ``CHEAP_PROGRAMS`` (each measured under
  3 s of CPU), ``oracle run``/``oracle replay`` without ``--real``, ``oracle
  check`` of directories, ``oracle diverge``, ``lean SCENARIO.json`` without
  ``--out``, ``lean check`` and ``peer check`` of directories. Never: a
  campaign file whole (``.jsonl``: minutes; ``oracle check FILE.jsonl
  --cases I,J`` and a case by its label ``FILE.jsonl#N`` run), anything that writes a file
  (``--out``, ``--report``, ``--dump``, ``--logs``, ``--log`` other than ``-``, ``fmt
  -i``), anything of the real scheduler (``--real``, ``--vllm-python``,
  ``regenerate``, ``campaign``), ``lean prove`` (23 s of Z3), ``peer
  campaign``, a command naming a file an earlier command writes or a
  NARRATED file other than the logs of ``MADE``, which the test writes as the
  doc says (preempt.json with 11 and 12 blocks, ``oracle run --log``) and
  runs the command beside them. Each runs as ``python -m semantics …`` in a
  subprocess, from the repository root, and its exit status is checked: 0,
  or what the doc says nearby (``EXPIT``); and where the doc shows output
  below a ``$ serq-ref`` line, those lines must be printed, in order (others
  may come between; ``…`` stands for any text, a ``…`` line for lines left
  out; ``| tail -N``: the last N lines). The 14 runs take about 18 s of CPU
  on the 2-core host.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from unittest import mock

import pytest

from lean_bridge import cli as lean_cli
from oracle import peer_cli
from semantics import cli
from semantics.arguments import whole
from semantics.errors import SerqError
from shared_paths import SHARED

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: placeholder -> a real example of its kind (relative to the repository root)
PLACEHOLDERS = {
    "FILE": "examples/pools/preempt.sq",
    "DIR": "examples/pools",
    "PATH": "../shared/oracle/vllm",
    "SCENARIO.json": "../shared/oracle/vllm/preempt.json",
    "FILE.jsonl": "oracle/data/campaign/serve.jsonl",
    "TRACE.csv": "../shared/oracle/prefix_cache/cache_trace.csv",
    "A.log": "tests/data/schedule_logs/newest_first_preempt.vllm-0.33.0.log",
    "B.log": "tests/data/schedule_logs/newest_first_preempt.vllm-0.33.0.log",
    "LOG": "tests/data/schedule_logs/newest_first_preempt.vllm-0.33.0.log",
    "COMMAND": "python3 examples/adapters/pyserq_adapter.py",
    "NAME=VALUE": "older_rule=1",
    "PY": "python3",
    "D": "out",
    "LEANFILE": "Out.lean",
    "LEANDIR": "out",
    "PREFIX": "Out",
    "NAME=V1,V2,...": "lambda=0.5,0.8",
    "NAME=V1,V2,…": "lambda=0.5,0.8",
    "NAME=V1,V2,": "lambda=0.5,0.8",  # NAME=V1,V2,... once its "..." is read as "one X"
    "OUT": "out.csv",
    "OUT.png": "out.png",
    "ADDRESS": "127.0.0.1:6379",
    "I,J,…": "1,2",
    "I,J,...": "1,2",
    "I,J,": "1,2",  # `I,J,...` with its `...` read as the elision it is
    "FILE.jsonl#INDEX": "oracle/data/campaign/scenarios.jsonl#216",
    # numbers: counts, seeds, times, sizes
    **{letter: "3" for letter in ("N", "S", "B", "M", "K", "T", "C", "I", "H", "W", "BS")},
}

#: files a doc command names that are not in the repository on purpose: what they are
NARRATED = {
    "eleven.log": "oracle.md, conformance.md: serq-ref's log of preempt.json with 11 blocks (`oracle run --log`)",
    "twelve.log": "the same with 12 blocks",
    "wrong.py": "oracle.md: an engine made up to show what a failing engine's report looks like",
}

#: of the NARRATED files, those the test can make as the doc says (the scenario's num_blocks): their
#: command runs in a directory holding them
MADE = {"eleven.log": 11, "twelve.log": 12}

#: programs cheap enough to `run` or `trace` whole (CPU measured on 2026-12-02 on the 2-core host)
CHEAP_PROGRAMS = {
    "examples/pools/preempt.sq": 0.4,
    "examples/single-turn/mm1.sq --horizon 50000": 2.4,  # README's first command
    # docs/guide.md's (CPU measured on 2026-12-03 on the 2-core host at a load of about 20)
    "examples/guide/vllm_poisson.sq --horizon 60 --warmup 10": 1.9,
    "examples/guide/vllm_poisson.sq --set blocks=4000 --set token_budget=2048 --set max_seqs=128 --set rate=12 "
    "--horizon 30 --warmup 5": 2.6,
    "examples/multi-turn/vllm_chat.sq --horizon 60": 1.4,
    "examples/multi-turn/routing.sq --horizon 60": 2.1,
    "examples/pools/spill.sq": 0.6,
    "examples/pd-disaggregation/llmd_pull.sq --horizon 30": 1.4,
}

#: sweeps cheap enough to run (CPU measured on 2026-12-03 on the 2-core host)
CHEAP_SWEEPS = {
    "examples/single-turn/mm1.sq --set lambda=0.5:0.9:0.2 --horizon 2000 --warmup 0 --seeds 3 --y sojourn,slow": 1.4,
}

#: the exit status a doc says a command has, where it is not 0: (file, the command's words) -> status
EXPIT = {
    # "Exit status 0 when the logs agree, 1 when they differ" (the text below the command)
    ("docs/oracle.md", "serq-ref oracle diverge eleven.log twelve.log"): 1,
    ("docs/conformance.md", "serq-ref oracle diverge eleven.log twelve.log"): 1,
}

SUBCOMMANDS = ("check", "ir", "run", "trace", "fmt", "lean", "oracle", "peer")
VERBS = {"lean": ("check", "prove"), "oracle": ("run", "check", "diverge", "replay", "regenerate", "campaign"),
         "peer": ("check", "campaign")}
WRITES = ("--out", "--report", "--dump", "--log", "--logs", "--csv", "--plot", "--resume")
PATH_LIKE = re.compile(r"/|\.(sq|json|jsonl|csv|log|py)$")
LOOKS_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[a-z]+)?$|^[A-Z_]+=[A-Z_]+$|^[A-Z],[A-Z]")


@dataclass
class DocCommand:
    file: str
    line: int
    text: str  # as the doc shows it, the prompt and the commentary cut
    variants: list[list[str]] = field(default_factory=list)  # argv after `serq-ref`, placeholders replaced
    concrete: bool = True  # no placeholder, no elision: the words are the user's exact command
    written: frozenset = frozenset()  # the files earlier commands of the same doc write (their --log, --out, …)
    shown: list[str] = field(default_factory=list)  # after a `$ ` prompt: the output the doc shows below it
    tail: int | None = None  # `| tail -N` after it: the output shown is the last N lines

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


class UnknownPlaceholder(Exception):
    pass


def _command_words(words: list[str]) -> list[str]:
    """The leading subcommand words of ``words`` (``serq-ref``, ``oracle``, ``run``)."""
    out = []
    for w in words:
        if not out:
            if w != "serq-ref":
                break
        elif len(out) == 1:
            if w.startswith("-"):
                break
        elif len(out) == 2:
            if w not in VERBS.get(out[1], ()):
                break
        else:
            break
        out.append(w)
    return out


def _choices(tokens: list[str]) -> list:
    """A sequence of items: a word (a list of its in-word alternatives) or a group (a list of alternative
    sequences), from tokens where `[`, `]` and a lone `|` are their own tokens."""
    def seq(i: int, closing: str | None):
        alts, cur = [], []
        while i < len(tokens):
            t = tokens[i]
            if t == "[":
                group, i = seq(i + 1, "]")
                cur.append(("group", group))
                continue
            if t == "]":
                if closing != "]":
                    raise ValueError("unbalanced ]")
                alts.append(cur)
                return alts, i + 1
            if t == "|":
                alts.append(cur)
                cur = []
                i += 1
                continue
            cur.append(("word", t.split("|") if "|" in t and len(t) > 1 else [t]))
            i += 1
        if closing:
            raise ValueError("unbalanced [")
        alts.append(cur)
        return alts, i

    alts, _ = seq(0, None)
    return alts


def _expand(seq: list, k: int) -> list[str]:
    """Variant k of a sequence: the k-th alternative of every choice (the last where there are fewer)."""
    out = []
    for kind, value in seq:
        if kind == "word":
            out.append(value[min(k, len(value) - 1)])
        else:
            out += _expand(value[min(k, len(value) - 1)], k)
    return out


def _width(seq: list) -> int:
    n = 1
    for kind, value in seq:
        if kind == "word":
            n = max(n, len(value))
        else:
            n = max(n, len(value), *(_width(a) for a in value))
    return n


def variants(text: str, previous: dict[tuple[str, ...], list[str]], table: bool = False) -> tuple[list[list[str]], bool]:
    """The argvs (after `serq-ref`) a doc command stands for, and whether it is concrete."""
    text = re.sub(r"--\[no-\]([\w-]+)", r"--\1|--no-\1", text)
    text = text.replace("\\|", "|")
    text = re.sub(r"([\[\]])", r" \1 ", text)
    text = re.sub(r"(?<=\s)\|(?=\s)", " | ", text)
    tokens = shlex.split(text)
    alternatives = _choices(tokens)
    if table:  # top-level alternatives of a table cell: each a command, the first's subcommand words before the others
        head = _command_words(_expand(alternatives[0], 0))
        alternatives = [alt if _command_words(_expand(alt, 0)) else [("word", [w]) for w in head] + alt
                        for alt in alternatives]
    elif len(alternatives) > 1:
        raise ValueError("a top-level `|` in a code block is a shell pipe, cut before this")
    argvs, concrete = [], True
    for alt in alternatives:
        for k in range(_width(alt)):
            words = _expand(alt, k)
            head = _command_words(words)
            if len(head) < 2:
                raise ValueError(f"no subcommand after serq-ref in {text!r}")
            key = tuple(head[1:])
            rest = words[len(head):]
            elided = rest[:1] in (["…"], ["..."])
            if elided:
                if key not in previous:
                    raise ValueError(f"`…` after {' '.join(head)} with no earlier {' '.join(head)} in the file")
                rest = previous[key] + rest[1:]
                concrete = False
            argv = list(head[1:])
            for w in rest:
                if w in ("…", "..."):
                    continue
                if w.endswith("...") or w.endswith("…"):
                    w = w.rstrip(".…")
                if w in PLACEHOLDERS:
                    argv.append(PLACEHOLDERS[w])
                    concrete = False
                elif LOOKS_PLACEHOLDER.match(w):
                    raise UnknownPlaceholder(f"{w!r} looks like a placeholder and is none of PLACEHOLDERS")
                else:
                    argv.append(w)
            if not elided:
                previous[key] = argv[len(key):]
            if argv not in argvs:
                argvs.append(argv)
    return argvs, concrete


def _clean_code_line(line: str) -> str | None:
    """The serq-ref command of a code block's line, or None."""
    s = line.strip()
    if s.startswith("$ "):
        s = s[2:].lstrip()
    if not s.startswith("serq-ref "):
        m = re.search(r"&&\s*(serq-ref .*)$", s)
        if not m:
            return None
        s = m.group(1)
    s = re.split(r"\s{2,}#|\s{3,}", s)[0]
    s = re.split(r"\s\|\s", s)[0]  # a shell pipe
    return s.strip()


def doc_files(root: str = ROOT) -> list[str]:
    return ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))


def collect_text(name: str, text: str) -> list[DocCommand]:
    found: list[DocCommand] = []
    previous: dict = {}
    written: set[str] = set()
    fenced = False
    blank_before = True
    in_indented = False
    prompted: DocCommand | None = None  # the `$ serq-ref` command whose shown output the block's lines are
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            blank_before = False
            prompted = None
            continue
        if not fenced:
            # an indented code block: 4 spaces after a blank line, or in such a block (blank lines inside too)
            if stripped and line.startswith("    ") and (blank_before or in_indented):
                in_indented = True
            elif stripped:
                in_indented = False
                prompted = None
            blank_before = not stripped
        candidates: list[tuple[str, bool]] = []
        if fenced or in_indented:
            command = _clean_code_line(line)
            if command:
                candidates.append((command, False))
            elif stripped.startswith("$ "):
                prompted = None  # another program's command: what follows is its output
            elif stripped and prompted is not None:
                prompted.shown.append(line if fenced else line[4:])
        elif stripped.startswith("|"):
            cells = stripped.strip("|").split(" | ")
            spans = re.findall(r"`([^`]+)`", cells[0].replace("\\|", "\x00"))
            spans = [s.replace("\x00", "\\|") for s in spans]
            started = False
            for span in spans:
                if span.startswith("serq-ref "):
                    started = True
                    candidates.append((span, True))
                elif started and span.split(" ", 1)[0] in SUBCOMMANDS:
                    candidates.append(("serq-ref " + span, True))
        for command, table in candidates:
            argvs, concrete = variants(command, previous, table)
            found.append(DocCommand(name, number, command, argvs, concrete, frozenset(written)))
            if not table:
                prompted = found[-1] if stripped.startswith("$ ") else None
                pipe = re.search(r"\s\|\s*tail -(\d+)\s*$", stripped)
                found[-1].tail = int(pipe.group(1)) if pipe else None
            if concrete:
                written.update(argv[i + 1] for argv in argvs for i, w in enumerate(argv[:-1]) if w in WRITES)
    return found


def collect(root: str = ROOT) -> list[DocCommand]:
    found = []
    for name in doc_files(root):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            found += collect_text(name, f.read())
    return found


class _Parsed(Exception):
    def __init__(self, namespace, parser=None):
        super().__init__("parsed")
        self.namespace = namespace
        self.parser = parser


def _stop_after_parse(self, args=None, namespace=None):
    raise _Parsed(argparse.ArgumentParser.parse_args(self, args, namespace), self)


def _stop(args):
    raise _Parsed(args)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _full_names(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """argparse takes a unique prefix of a long option (``--max-seq`` for ``--max-seqs``); a doc shows
    the option's name."""
    for word in argv:
        if word.startswith("--") and word.split("=", 1)[0] not in parser._option_string_actions:
            raise ProblemWith(f"{word} is not an option's full name (argparse took it as an abbreviation)")


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``serq-ref ARGV`` as the command line would, running nothing; a UsageError (or
    ``ProblemWith``) if it does not parse or names an option by an abbreviation."""
    top = cli.build_parser()
    try:
        args = top.parse_args(argv)
    except SystemExit as e:  # --help, --version: no doc command is one
        raise ProblemWith(f"the parser exited ({e.code}) instead of parsing") from None
    if args.command == "lean":
        with mock.patch.object(lean_cli._Parser, "parse_args", _stop_after_parse):
            try:
                lean_cli.command(args)
            except _Parsed as p:
                _full_names(p.parser, args.rest)
                return p.namespace
        raise ProblemWith("lean did not reach one of its parsers")
    parser = _subparser(top, args.command)
    if args.command == "oracle":
        parser = _subparser(parser, args.oracle_command)
    _full_names(parser, argv)
    if args.command == "peer":
        with mock.patch.object(peer_cli, "_check", _stop), mock.patch.object(peer_cli, "_campaign", _stop), \
                mock.patch.object(peer_cli, "_one", _stop):
            try:
                peer_cli.command(args)
            except _Parsed:
                pass
        if args.file == "check" and not args.more:
            raise ProblemWith("peer check needs a DIR")
        if args.file == "campaign":
            if len(args.more) != 1:
                raise ProblemWith("peer campaign takes one N")
            whole(args.more[0])
    return args


class ProblemWith(Exception):
    pass


def _local(path: str) -> str:
    """A doc's ``../shared/…`` where SHARED is when that is elsewhere (the command then prints that path)."""
    if not (path.startswith("../shared/") or path == "../shared") or os.path.exists(os.path.join(ROOT, path)):
        return path
    return str(SHARED) + path[len("../shared"):]


def missing_files(argv: list[str], written: frozenset = frozenset()) -> list[str]:
    missing = []
    for i, word in enumerate(argv):
        if word.startswith("-") or not PATH_LIKE.search(word) or word in written:
            continue
        if i > 0 and argv[i - 1] in WRITES:
            continue
        if os.path.basename(word) in NARRATED:
            continue
        if word.startswith("python3 ") or " " in word:  # an --engine COMMAND: its script
            script = next((w for w in word.split()[1:] if PATH_LIKE.search(w)), None)
            if script and os.path.basename(script) not in NARRATED and not os.path.exists(os.path.join(ROOT, script)):
                missing.append(script)
            continue
        if not os.path.exists(os.path.join(ROOT, _local(re.sub(r"(?<=\.jsonl)#\d+$", "", word)))):
            missing.append(word)  # a campaign case's label FILE.jsonl#INDEX: its file
    return missing


def cheap(argv: list[str]) -> bool:
    """Whether a concrete command is on the allow-list of commands run (the module docstring)."""
    if any(w in argv for w in ("--real", "--vllm-python", "-i", "--in-place", "--out", "--report", "--dump", "--logs",
                               "--csv", "--plot", "--resume", "--ray")):
        return False
    if "--log" in argv and argv[argv.index("--log") + 1] != "-":
        return False
    if any((w.endswith(".jsonl") and not (argv[:2] == ["oracle", "check"] and "--cases" in argv))
           or any(os.path.basename(x) in NARRATED and x not in MADE for x in w.split()) for w in argv):
        return False  # a campaign file whole: minutes (its cases by --cases, or one by its label FILE.jsonl#N: cheap)
    command, rest = argv[0], argv[1:]
    if command in ("check", "ir"):
        return True
    if command == "fmt":
        return "--check" in rest
    if command in ("run", "trace"):
        if rest == ["--rules"]:
            return True
        program = " ".join(w for w in rest if w not in ("--coverage", "--json"))
        if program in CHEAP_PROGRAMS:
            return True
        if "--steps" in rest:
            steps = rest[rest.index("--steps") + 1]
            return steps.isdigit() and int(steps) <= 1000
        return False
    if command == "oracle":
        return rest[0] in ("run", "replay", "check", "diverge")
    if command == "lean":
        return rest[0] == "check" or rest[0].endswith(".json") or re.search(r"\.jsonl#\d+$", rest[0]) is not None
    if command == "peer":
        return rest[0] == "check"
    if command == "sweep":
        return " ".join(rest) in CHEAP_SWEEPS
    return False


COMMANDS = collect()
CONCRETE = [c for c in COMMANDS if c.concrete]
RUN = [c for c in CONCRETE if cheap(c.variants[0]) and not set(c.variants[0]) & c.written]


def test_the_docs_show_commands():
    # the collection itself: it finds the commands the docs show (the code blocks' lines, the command tables)
    assert len(COMMANDS) >= 60, len(COMMANDS)
    shown = {c.file for c in COMMANDS}
    assert {"README.md", "docs/oracle.md", "docs/lean.md", "docs/conformance.md", "docs/peer.md",
            "docs/step-trace.md", "docs/syntax.md", "docs/campaigns.md"} <= shown
    assert len(RUN) >= 12, [c.where for c in RUN]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.where} {c.text}")
def test_a_doc_command_parses(command):
    for argv in command.variants:
        try:
            parse(argv)
        except (SerqError, ProblemWith, argparse.ArgumentTypeError) as e:
            pytest.fail(f"{command.where}: `serq-ref {' '.join(argv)}` does not parse: {e}")


@pytest.mark.parametrize("command", CONCRETE, ids=lambda c: f"{c.where} {c.text}")
def test_the_files_of_a_doc_command_exist(command):
    for argv in command.variants:
        missing = missing_files(argv, command.written)
        assert not missing, f"{command.where}: no such file {missing}"


@pytest.mark.parametrize("command", RUN, ids=lambda c: f"{c.where} {c.text}")
def test_a_cheap_doc_command_runs(command, tmp_path):
    argv = [_local(w) for w in command.variants[0]]
    env = dict(os.environ, PYTHONPATH=ROOT)
    cwd = ROOT
    if set(argv) & MADE.keys():  # run where the logs the doc narrates are, every other path from the root
        cwd = str(tmp_path)
        argv = [os.path.join(ROOT, w) if PATH_LIKE.search(w) and os.path.exists(os.path.join(ROOT, w)) else w
                for w in argv]
        with open(SHARED / "oracle" / "vllm" / "preempt.json", encoding="utf-8") as f:
            scenario = json.load(f)
        for name in set(argv) & MADE.keys():
            scenario["num_blocks"] = MADE[name]
            (tmp_path / f"{name}.json").write_text(json.dumps(scenario), encoding="utf-8")
            subprocess.run([sys.executable, "-m", "semantics", "oracle", "run", f"{name}.json", "--log", name],
                           cwd=cwd, env=env, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "semantics", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    expected = EXPIT.get((command.file, command.text), 0)
    assert done.returncode == expected, (f"{command.where}: `{command.text}` exited {done.returncode}, the doc "
                                         f"says {expected}\n{done.stderr[-2000:]}")
    printed = done.stdout.splitlines()
    if command.tail is not None:
        printed = printed[-command.tail:]
    unmatched = output_not_printed(command.shown, printed)
    assert unmatched is None, (f"{command.where}: `{command.text}` does not print what the doc shows below it; "
                               f"from {unmatched!r} on, it printed:\n" + "\n".join(printed[:60]))


def output_not_printed(shown: list[str], printed: list[str]) -> str | None:
    """The first line the doc shows that the command did not print, or None. The shown lines must be
    printed in their order, others may come between them; `…` in a shown line stands for any text, and a
    line that is only `…` for lines left out."""
    at = 0
    for line in shown:
        if line.strip() in ("…", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in line.rstrip().split("…")))
        while at < len(printed) and not pattern.fullmatch(printed[at].rstrip()):
            at += 1
        if at == len(printed):
            return line
        at += 1
    return None


FAKE_DOC = """\
# A page

    $ serq-ref run examples/pools/preempt.sq --no-such-option 3
    serq-ref trace FILE --steps N|all
    serq-ref oracle run ../shared/oracle/vllm/no_such_scenario.json

| `serq-ref lean check DIR \\| FILE.jsonl --frobnicate` | a row |
"""


def test_a_made_up_option_is_caught():
    found = collect_text("fake.md", FAKE_DOC)
    assert [(c.line, c.concrete) for c in found] == [(3, True), (4, False), (5, True), (7, False)]
    with pytest.raises(SerqError, match="no-such-option"):
        parse(found[0].variants[0])
    # an abbreviation argparse would take is not the option's name
    with pytest.raises(ProblemWith, match="--max-seq "):
        parse(["oracle", "replay", "x.csv", "--spacing", "3", "--budget", "64", "--max-seq", "4", "--blocks", "20"])
    with pytest.raises(ProblemWith, match="--var "):
        parse(["lean", "check", "examples", "--var"])
    # both alternatives of `N|all` parse
    assert found[1].variants == [["trace", "examples/pools/preempt.sq", "--steps", "3"],
                                 ["trace", "examples/pools/preempt.sq", "--steps", "all"]]
    for argv in found[1].variants:
        parse(argv)
    assert missing_files(found[2].variants[0]) == ["../shared/oracle/vllm/no_such_scenario.json"]
    # lean's own parser: of the table cell's two alternatives, the one with the made-up option is refused
    assert found[3].variants == [["lean", "check", "examples/pools"],
                                 ["lean", "check", "oracle/data/campaign/serve.jsonl", "--frobnicate"]]
    parse(found[3].variants[0])
    with pytest.raises(SerqError, match="frobnicate"):
        parse(found[3].variants[1])


def test_a_made_up_placeholder_or_subcommand_is_caught():
    with pytest.raises(UnknownPlaceholder):
        collect_text("fake.md", "    serq-ref run WIDGET.sq\n")
    with pytest.raises(SerqError, match="invalid choice"):
        parse(collect_text("fake.md", "    serq-ref frobnicate examples/pools/preempt.sq\n")[0].variants[0])


def test_shown_output_is_held_to_what_runs():
    shown = ["request 0: first 1 done 30", "…", "preemptions 1 steps 61"]
    assert output_not_printed(shown, ["request 0: first 1 done 30", "request 1: first 31 done 60",
                                      "preemptions 1 steps 61"]) is None
    assert output_not_printed(shown, ["request 0: first 1 done 30", "preemptions 1 steps 62"]) == shown[2]
    assert output_not_printed(["22 passed, … failed"], ["22 passed, 0 failed"]) is None
    assert output_not_printed(["A", "B"], ["B", "A"]) == "B"  # in their order


def test_every_command_of_the_guide_runs():
    # docs/guide.md (issue 21 §4): every serq-ref command it shows is run, none only parsed
    guide = [c for c in COMMANDS if c.file == "docs/guide.md"]
    assert len(guide) >= 8, [c.text for c in guide]
    assert [c.where for c in guide if c not in RUN] == []


def test_the_long_commands_are_only_parsed():
    assert not cheap(["lean", "prove"])
    assert not cheap(["lean", "check", "oracle/data/campaign/serve.jsonl"])
    assert not cheap(["oracle", "campaign", "3", "--seed", "1"])
    assert not cheap(["oracle", "run", "../shared/oracle/vllm/preempt.json", "--real"])
    assert not cheap(["oracle", "run", "../shared/oracle/vllm/preempt.json", "--log", "x.log"])
    assert not cheap(["run", "examples/single-turn/mm1.sq"])  # the file's own horizon: 39 s
    assert not cheap(["peer", "campaign", "1000", "--seed", "1"])
    assert cheap(["oracle", "run", "../shared/oracle/vllm/preempt.json", "--log", "-"])
    assert cheap(["trace", "examples/single-turn/mm1.sq", "--steps", "3"])
    assert not cheap(["lean", "check", "oracle/data/campaign/serve.jsonl", "--cases", "3"])  # lean: every case too
    assert cheap(["oracle", "check", "oracle/data/campaign/serve.jsonl", "--cases", "3"])
    assert cheap(["oracle", "run", "oracle/data/campaign/serve.jsonl#3"])
    for command in RUN:
        assert not any(w in command.text for w in (" prove", " campaign ", "--real", "regenerate"))
        assert ".jsonl " not in command.text + " " or " --cases " in command.text
