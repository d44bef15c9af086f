"""The host's file table against what the runs in flight may hold in it (issue 32 family 2, "tables for the
whole machine"): a run holds files through mappings, their descriptors closed, as many as its memory allows."""

from __future__ import annotations

from codegym_sandbox.backends.host import FILE_BYTES, file_table_check, host_checks
from codegym_sandbox.config import Settings


def test_a_table_smaller_than_the_memory_budget_holds_of_files_is_a_warning_with_its_fix() -> None:
    settings = Settings(backend="local", memory_budget_mb=4096)
    held = (4096 << 20) // FILE_BYTES
    small = file_table_check(settings, lambda path: 2_466_170)  # a 24 GiB machine that sets no fs.file-max
    assert small.status == "warn" and f"fs.file-max 2466170; the runs in flight may hold {held} files" in small.found
    assert "every open on the host then fails" in small.costs and "fs.file-max=9223372036854775807" in small.fix
    # The table less the host's eighth must hold them all.
    assert file_table_check(settings, lambda path: held * 8 // 7 + 8).status == "ok"
    assert file_table_check(settings, lambda path: held).status == "warn"
    assert file_table_check(settings, lambda path: None).status == "info"
    assert "file table" in {c.name for c in host_checks(settings, "local")}
