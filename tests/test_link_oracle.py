"""Every oracle IR file links: no error, and the same warnings on every run.

The oracle's IR files were compiled by the reference implementation, whose
linker accepted them (../shared/oracle/README.md); a check here that
rejects one of them is a check that disagrees with the language.
"""

from __future__ import annotations

import glob
import os

import pytest

from semantics import codec
from semantics.link import link
from semantics.sourcemap import SourceMap
from shared_paths import SHARED

ORACLE = os.environ.get("SERQ_ORACLE", str(SHARED / "oracle"))
IR_FILES = sorted(glob.glob(os.path.join(ORACLE, "**", "*.ir.json"), recursive=True))


def test_the_oracle_has_ir_files():
    assert os.path.isdir(ORACLE), f"no oracle directory at {ORACLE}"
    assert IR_FILES


@pytest.mark.parametrize("path", IR_FILES, ids=[os.path.relpath(p, ORACLE) for p in IR_FILES])
def test_an_oracle_ir_file_links_without_error(path):
    with open(path, encoding="utf-8") as f:
        program = codec.loads(f.read())
    smap = SourceMap(file=path)
    warnings = link(program, smap)
    assert link(program, smap) == warnings
    for warning in warnings:
        assert warning.file == path and warning.message.startswith("blocks[")
