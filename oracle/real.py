"""The real vLLM scheduler, run as a subprocess: serq-ref's side of the oracle.

Plain Python: nothing here imports vllm. The driver (``oracle/real/driver.py``)
runs in the vLLM environment that ``oracle/real/setup-vllm.sh`` builds (vLLM
0.33.0 on a CPU, about 3 GB, kept outside the repository); this module finds
that environment's python, streams JSON jobs through one driver process and
reads the answers back (importing vllm takes 10-12 s, so a batch shares one
process).

Which python: the ``python`` argument (a ``--vllm-python`` option), else the
environment variable ``SERQ_VLLM_PYTHON``, else the documented default
``../vllm-env/bin/python`` beside the repository (where setup-vllm.sh puts
the environment when given no path). Nothing in the default test suite needs
it; a test that does is skipped, with the reason, when it is missing.

Jobs and answers are the driver's (its docstring has the formats): a
scenario in the format of ../shared/oracle/vllm/NAME.json answered as
NAME.out.json, or a replay of a trace answered with the rows of
cache_trace.out.csv.

    python -m oracle.real scenario ../shared/oracle/vllm/*.json
    python -m oracle.real regenerate ../shared/oracle/vllm [--out DIR]
    python -m oracle.real replay TRACE.csv --spacing 3 --budget 64 --max-seqs 4 --blocks 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

#: The version of vLLM the driver and the recorded data are for.
VLLM_VERSION = "0.33.0"
#: The environment variable naming the vLLM environment's python.
PYTHON_VARIABLE = "SERQ_VLLM_PYTHON"

REPO_ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "real" / "driver.py"
SETUP = Path(__file__).resolve().parent / "real" / "setup-vllm.sh"
#: Where setup-vllm.sh builds the environment when given no path.
DEFAULT_PYTHON = REPO_ROOT.parent / "vllm-env" / "bin" / "python"

REPLAY_COLUMNS = ("session", "turn", "sent", "first", "done", "prompt", "cached", "out")


class RealVllmMissing(RuntimeError):
    """The vLLM environment is not there (or is not vLLM 0.33.0)."""


def find_python(python: str | os.PathLike | None = None) -> Path:
    """The vLLM environment's python: ``python``, else $SERQ_VLLM_PYTHON, else
    the default beside the repository. Raises RealVllmMissing, saying how to
    build the environment, when there is none."""
    if python is not None:
        candidate, source = Path(python), "--vllm-python"
    elif os.environ.get(PYTHON_VARIABLE):
        candidate, source = Path(os.environ[PYTHON_VARIABLE]), f"${PYTHON_VARIABLE}"
    else:
        candidate, source = DEFAULT_PYTHON, "the default"
    if not candidate.is_file() or not os.access(candidate, os.X_OK):
        raise RealVllmMissing(
            f"the real vLLM scheduler's python ({source}: {candidate}) does not exist; "
            f"build the environment with `bash {SETUP.relative_to(REPO_ROOT)} [VENV]` "
            f"(vLLM {VLLM_VERSION} on a CPU, ~3 GB, ~150 s) and set {PYTHON_VARIABLE}=VENV/bin/python"
        )
    return candidate


def available(python: str | os.PathLike | None = None) -> bool:
    """Whether the vLLM environment is there (without starting it)."""
    try:
        find_python(python)
    except RealVllmMissing:
        return False
    return True


def _environment() -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_PLUGINS", "")
    return env


def iter_answers(jobs: Iterable[dict], python: str | os.PathLike | None = None) -> Iterator[dict]:
    """Answer ``jobs`` in order with one driver process, yielding each answer
    as it comes. A job the driver could not answer comes back with ``error``."""
    executable = find_python(python)
    process = subprocess.Popen(
        [str(executable), str(DRIVER), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
    )
    errors: list[str] = []
    jobs = list(jobs)

    def feed():
        try:
            for job in jobs:
                process.stdin.write(json.dumps(job) + "\n")
                process.stdin.flush()
        except BrokenPipeError:
            pass
        finally:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass

    def drain_stderr():
        errors.extend(process.stderr)

    writer = threading.Thread(target=feed, daemon=True)
    reader = threading.Thread(target=drain_stderr, daemon=True)
    writer.start()
    reader.start()
    count = 0
    try:
        for line in process.stdout:
            if line.strip():
                count += 1
                yield json.loads(line)
    finally:
        if count < len(jobs) and process.poll() is None:
            process.kill()  # the caller stopped early (or failed): end the driver
    process.wait()
    writer.join()
    reader.join()
    if process.returncode != 0 or count != len(jobs):
        tail = "".join(errors[-20:])
        raise RuntimeError(
            f"the vLLM driver ({executable}) exited with {process.returncode} "
            f"after {count} of {len(jobs)} answers:\n{tail}"
        )


def answer_all(jobs: Iterable[dict], python: str | os.PathLike | None = None) -> list[dict]:
    """Every answer of ``jobs``, in order."""
    return list(iter_answers(jobs, python))


class Driver:
    """One driver process kept open, answering one job at a time: for work
    whose next job depends on the last answer (shrinking a divergence), where
    a process per job would pay vLLM's import (10-25 s) each time.

        with Driver(python) as driver:
            answer = driver.answer(job)
    """

    def __init__(self, python: str | os.PathLike | None = None) -> None:
        self.executable = find_python(python)
        self._process = subprocess.Popen(
            [str(self.executable), str(DRIVER), "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, env=_environment(),
        )
        self._errors: list[str] = []
        self._reader = threading.Thread(target=lambda: self._errors.extend(self._process.stderr), daemon=True)
        self._reader.start()

    def answer(self, job: dict) -> dict:
        """The driver's answer to ``job`` (with ``error`` if it could not answer it)."""
        try:
            self._process.stdin.write(json.dumps(job) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._process.wait()
            tail = "".join(self._errors[-20:])
            raise RuntimeError(f"the vLLM driver ({self.executable}) exited with {self._process.returncode}:\n{tail}")
        return json.loads(line)

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reader.join(timeout=5)

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scenario_job(scenario: dict, **extra) -> dict:
    """A scenario (the format of ../shared/oracle/vllm/NAME.json) as a job."""
    return {"kind": "scenario", **scenario, **extra}


def replay_job(trace_csv: str, *, spacing: float, budget: int, max_seqs: int, blocks: int,
               block_size: int = 16, **extra) -> dict:
    """A replay of ``trace_csv`` (the text of a session,turn,new,out,think,forced
    CSV) under the replay protocol of ../shared/oracle/README.md."""
    return {
        "kind": "replay", "trace": trace_csv, "spacing": spacing, "budget": budget,
        "max_seqs": max_seqs, "blocks": blocks, "block_size": block_size, **extra,
    }


def recorded_fields(answer: dict) -> dict:
    """The fields of a scenario answer that NAME.out.json records."""
    return {key: answer[key] for key in ("first", "done", "preemptions", "steps", "config")}


def scenario_files(directory: Path) -> list[Path]:
    """The scenarios of ``directory``: its NAME.json files that are not
    answers (.out.json), IR (.ir.json) or targets (.target.json)."""
    skip = (".out.json", ".ir.json", ".target.json")
    return sorted(p for p in directory.glob("*.json") if not p.name.endswith(skip)
                  and "requests" in json.loads(p.read_text()))


def regenerate(directory: Path, out: Path | None, python=None, older_rule: bool = False,
               report=print) -> int:
    """Answer every scenario of ``directory`` with the real scheduler. With
    ``out``, write NAME.out.json there (``directory`` itself: replacing the
    answers there); either way, compare each answer with the NAME.out.json
    that was beside the scenario before, if there was one, and report
    equal / differs / new per scenario (a line each, to ``report``). Returns
    the number that differ (or that the driver could not answer).
    ``older_rule``: serve-by scenarios with a self-preempting request ending
    the running loop, as before vLLM 0.33.0 (docs/vllm-0.33.md, D1)."""
    files = scenario_files(directory)
    extra = {"self_preempt_ends_pass": True} if older_rule else {}
    jobs = [scenario_job(json.loads(p.read_text()), **extra) for p in files]
    differ = 0
    for path, answer in zip(files, iter_answers(jobs, python)):
        name = path.name[: -len(".json")]
        if "error" in answer:
            report(f"{name}: the driver could not answer it: {answer['error']}")
            differ += 1
            continue
        fields = recorded_fields(answer)
        recorded = path.with_name(f"{name}.out.json")
        before = json.loads(recorded.read_text()) if recorded.exists() else None
        if before is None:
            verdict = "new"
        elif before == fields:
            verdict = "equal"
        else:
            verdict = "differs: " + "; ".join(answer_differences(before, fields))
            differ += 1
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.out.json").write_text(json.dumps(fields) + "\n")
        status = "" if answer["status"] == "finished" else f" ({answer['status']})"
        report(f"{name}: {verdict}{status}")
    return differ


def answer_differences(before: dict, now: dict) -> list[str]:
    """What differs between two answers in the NAME.out.json format, a phrase each."""
    phrases = []
    ids = sorted(set(before.get("first", {})) | set(before.get("done", {})) | set(now.get("first", {}))
                 | set(now.get("done", {})), key=lambda x: (len(x), x))
    for rid in ids:
        old = (before.get("first", {}).get(rid), before.get("done", {}).get(rid))
        new = (now.get("first", {}).get(rid), now.get("done", {}).get(rid))
        if old != new:
            phrases.append(f"request {rid}: there first {old[0]} done {old[1]}, now first {new[0]} done {new[1]}")
    for key in ("preemptions", "steps", "config"):
        if before.get(key) != now.get(key):
            phrases.append(f"{key}: there {before.get(key)}, now {now.get(key)}")
    return phrases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oracle.real", description="Answer scenarios or a replay with the real vLLM scheduler.")
    parser.add_argument("--vllm-python", help=f"the vLLM environment's python (default: ${PYTHON_VARIABLE}, else {DEFAULT_PYTHON.relative_to(REPO_ROOT.parent)} beside the repo)")
    commands = parser.add_subparsers(dest="command", required=True)
    scenario = commands.add_parser("scenario", help="answer NAME.json files as NAME.out.json (printed, or written with --write)")
    scenario.add_argument("files", nargs="+")
    scenario.add_argument("--write", action="store_true", help="write NAME.real.out.json beside each NAME.json")
    regen = commands.add_parser("regenerate", help="answer every scenario NAME.json of a directory and compare with its NAME.out.json")
    regen.add_argument("directory")
    regen.add_argument("--out", help="write NAME.out.json here")
    regen.add_argument("--older-rule", action="store_true", help="serve-by scenarios: a request that preempts itself ends the pass (before 0.33.0)")
    replay = commands.add_parser("replay", help="replay a trace and print the CSV answer")
    replay.add_argument("trace")
    replay.add_argument("--spacing", type=float, required=True)
    replay.add_argument("--budget", type=int, required=True)
    replay.add_argument("--max-seqs", type=int, required=True)
    replay.add_argument("--blocks", type=int, required=True)
    replay.add_argument("--block-size", type=int, default=16)
    replay.add_argument("--max-steps", type=int)
    args = parser.parse_args(argv)
    try:
        if args.command == "regenerate":
            out = None if args.out is None else Path(args.out)
            return 1 if regenerate(Path(args.directory), out, args.vllm_python, args.older_rule) else 0
        if args.command == "scenario":
            jobs = [scenario_job(json.loads(Path(f).read_text())) for f in args.files]
            for path, answer in zip(args.files, iter_answers(jobs, args.vllm_python)):
                if "error" in answer:
                    print(f"{path}: {answer['error']}", file=sys.stderr)
                    return 1
                text = json.dumps(recorded_fields(answer))
                if args.write:
                    out = Path(path).with_suffix("").with_suffix(".real.out.json")
                    out.write_text(text + "\n")
                    print(f"{out}: {answer['status']}")
                else:
                    print(text)
        else:
            extra = {} if args.max_steps is None else {"max_steps": args.max_steps}
            job = replay_job(Path(args.trace).read_text(), spacing=args.spacing, budget=args.budget,
                             max_seqs=args.max_seqs, blocks=args.blocks, block_size=args.block_size, **extra)
            (answer,) = answer_all([job], args.vllm_python)
            if "error" in answer:
                print(answer["error"], file=sys.stderr)
                return 1
            sys.stdout.write(answer["csv"])
            if answer["status"] != "finished":
                print(answer["status"], file=sys.stderr)
    except RealVllmMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
