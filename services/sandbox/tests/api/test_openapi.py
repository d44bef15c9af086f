"""Every operation of the OpenAPI document, with requests generated from it (schemathesis): never a 5xx.

Schemathesis found that ``files`` content beyond ASCII answered 500. The budget is small and the seed fixed
(``derandomize``), so that the suite stays within a minute and a failure repeats; the server's limits are tight,
so that a generated program in a compiled language costs a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from codegym_sandbox.config import Limits, Settings
from codegym_sandbox.main import create_app
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case
from schemathesis.python.asgi import shutdown_lifespans

LIMITS = Limits(
    run_timeout_s=0.5,
    max_run_timeout_s=0.5,
    compile_timeout_s=0.5,
    max_compile_timeout_s=0.5,
    memory_mb=128,
    max_memory_mb=256,
)
app = create_app(
    Settings(
        backend="local",
        workers=1,
        max_workers=2,
        reserve_workers=0,
        limits=LIMITS,
        max_runs_per_request=8,
        max_body_bytes=1 << 20,
    )
)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module", autouse=True)
def stopped() -> Iterator[None]:
    """Schemathesis starts the app's lifespan (its worker pool) at the first case and keeps it for the process:
    stopped with the module, so that its workers do not outlive these tests."""
    yield
    shutdown_lifespans()


@schema.parametrize()
@settings(
    max_examples=12,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error(case: Case) -> None:
    case.call_and_validate(checks=[not_a_server_error])
