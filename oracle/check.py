"""``serq-ref oracle check DIR``: every recorded answer in DIR against
serq-ref's.

A case is a scenario ``NAME.json`` or an IR file ``NAME.ir.json`` (the
reference implementation's compiled oracle program) with a recorded answer
``NAME.out.json`` beside it. A case passes when every request's first and
done step, the preemption count and the steps are the recorded ones; each
difference is a line naming the case, the request (or the figure) and both
answers. A case serq-ref cannot run (a program error, a run-time error) is a
failure with its message. A scenario is answered under the vLLM rule its
corpus was recorded on (oracle/scenario.py, ``recorded_vllm``), or the
older rule with ``older_rule``; an IR file under the rule it has.
"""

from __future__ import annotations

import os

from semantics.errors import SerqError

from .scenario import answer_path, cases_in, read_json, run_ir, run_scenario


def differences(label: str, recorded: dict, ours: dict) -> list[str]:
    """One line per request, and per figure, where ``ours`` differs from ``recorded``."""
    lines = []
    requests = sorted(set(recorded.get("first", {})) | set(recorded.get("done", {})) | set(ours["first"])
                      | set(ours["done"]), key=int)
    for request in requests:
        want = (recorded.get("first", {}).get(request), recorded.get("done", {}).get(request))
        got = (ours["first"].get(request), ours["done"].get(request))
        if want != got:
            lines.append(f"{label}: request {request}: recorded first {_show(want[0])} done {_show(want[1])}, "
                         f"serq-ref first {_show(got[0])} done {_show(got[1])}")
    for figure in ("preemptions", "steps"):
        if figure in recorded and recorded[figure] != ours[figure]:
            lines.append(f"{label}: {figure}: recorded {recorded[figure]}, serq-ref {ours[figure]}")
    return lines


def _show(value) -> str:
    return "-" if value is None else str(value)


def check_case(path: str, older_rule: bool | None = None) -> list[str]:
    """The lines of one case: empty when it passes."""
    label = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    recorded = read_json(answer_path(path))
    try:
        ours = run_ir(path) if path.endswith(".ir.json") else run_scenario(read_json(path), path, older_rule)
    except SerqError as e:
        return [f"{label}: serq-ref stopped: {e.message}"]
    return differences(label, recorded, ours)


def check_dirs(dirs: list[str], older_rule: bool | None = None) -> tuple[list[str], int, int]:
    """Every case of every directory: (lines, passed, failed)."""
    lines, passed, failed = [], 0, 0
    for directory in dirs:
        for path in cases_in(directory):
            found = check_case(path, older_rule)
            lines += found
            failed += bool(found)
            passed += not found
    return lines, passed, failed
