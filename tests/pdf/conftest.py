"""The PDF tests spread over both cores by edition: each worker reads one edition's PDF
(test_pdf.book, half a minute of pypdf and pdfium each) and runs that edition's tests,
instead of both workers reading both (`--dist loadgroup`, scripts/run_tests.py)."""

from __future__ import annotations

import re

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover (pytest-xdist is a test dependency)
    pass
else:

    class ByEdition(LoadScopeScheduling):
        """A test's unit of work is its edition (`[book]`, `[student]`), or itself."""

        def _split_scope(self, nodeid: str) -> str:
            found = re.search(r"\[(book|student)\]$", nodeid)
            return found.group(1) if found else nodeid

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadgroup":
            return ByEdition(config, log)
        return None
