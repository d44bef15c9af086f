"""What a job may name: the one place that turns a client's job body into a run the service will do.

A job is a client's request, carried out with the service's means: its sandbox (and the token for it), its
network and its files. So a body may name only what the operator lets clients use:

- ``sandbox_url``: the service's own sandbox (``SANDBOX_URL``), the default, or one of ``JOB_SANDBOX_URLS``.
  The service's ``SANDBOX_TOKEN`` goes only to its own sandbox; a job that names another one brings its own
  ``sandbox_token`` or none.
- ``base_url``: any endpoint, or, with ``MODEL_URLS``, one under those roots. No credential of the service goes
  with it (a job brings its own ``api_key``).
- ``path`` and ``samples``: files under ``INPUT_DIR``; without it, no file of the service's host.
- ``output``: never; the service chooses where a job writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from ..config import RunConfig
from .settings import EvaluatorSettings

_CONFIG = TypeAdapter(RunConfig)
ANY = "*"


class Refused(Exception):
    """A job the service will not run: ``status`` (422: not a job; 403: names what the service does not lend)
    and ``detail``, the reason for the client."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def admit(body: dict[str, Any], settings: EvaluatorSettings) -> RunConfig:
    """The run ``body`` asks for, with the service's sandbox filled in where it names none; raises
    :class:`Refused` saying why otherwise."""
    body = {k: v for k, v in body.items() if k != "output"}  # the service chooses where a job writes
    try:
        config = _CONFIG.validate_python(body)
    except ValidationError as exc:
        raise Refused(422, json.loads(exc.json(include_url=False))) from None
    own = config.sandbox_url == [] or all(_url(u, "sandbox_url") in _own(settings) for u in config.sandbox_url)
    config.sandbox_url = config.sandbox_url or list(settings.sandbox_url)
    if not config.sandbox_url:
        raise Refused(422, "no sandbox_url in the job and none configured (CODEGYM_EVALUATOR_SANDBOX_URL)")
    if config.samples is None and config.base_url is None:
        raise Refused(422, "a job needs base_url (an OpenAI-compatible endpoint) or samples (a file path)")
    if not own:
        _check_sandboxes(config.sandbox_url, settings)
    elif config.sandbox_token is None and settings.sandbox_token is not None:
        config.sandbox_token = settings.sandbox_token.get_secret_value()
    if config.base_url is not None:
        _check_model(config.base_url, settings)
    config.path = _input(config.path, "path", settings)
    config.samples = _input(config.samples, "samples", settings)
    return config


def _url(url: str, field: str) -> str:
    """``url`` in one spelling (scheme, host and port as the client connects, the path without a trailing
    slash); a URL whose meaning hides in user info, a query, a fragment or dot segments is refused."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise Refused(422, f"{field} {url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise Refused(422, f"{field} {url!r} is not an http(s) URL")
    if parsed.userinfo or parsed.query or parsed.fragment or b"%" in parsed.raw_path:
        raise Refused(422, f"{field} {url!r}: a job's URLs carry no user info, query, fragment or escapes")
    if any(part in (".", "..") for part in url.split("?")[0].split("/")[3:]):
        raise Refused(422, f"{field} {url!r}: a job's URLs carry no dot segments")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{parsed.host}:{port}{parsed.path.rstrip('/')}"


def _own(settings: EvaluatorSettings) -> set[str]:
    return {_url(u, "CODEGYM_EVALUATOR_SANDBOX_URL") for u in settings.sandbox_url}


def _check_sandboxes(urls: list[str], settings: EvaluatorSettings) -> None:
    if ANY in settings.job_sandbox_urls:
        return
    allowed = _own(settings) | {_url(u, "CODEGYM_EVALUATOR_JOB_SANDBOX_URLS") for u in settings.job_sandbox_urls}
    for url in urls:
        if _url(url, "sandbox_url") not in allowed:
            raise Refused(
                403,
                f"sandbox_url {url!r} is not a sandbox of this service: jobs use CODEGYM_EVALUATOR_SANDBOX_URL, "
                "or one the operator lists in CODEGYM_EVALUATOR_JOB_SANDBOX_URLS",
            )


def _check_model(url: str, settings: EvaluatorSettings) -> None:
    given = _url(url, "base_url")
    if settings.model_urls is None or ANY in settings.model_urls:
        return
    for root in settings.model_urls:
        allowed = _url(root, "CODEGYM_EVALUATOR_MODEL_URLS")
        if given == allowed or given.startswith(allowed + "/"):
            return
    raise Refused(
        403,
        f"base_url {url!r} is not under a model endpoint of this service (CODEGYM_EVALUATOR_MODEL_URLS: "
        f"{', '.join(settings.model_urls) or 'none'})",
    )


def _input(name: str | None, field: str, settings: EvaluatorSettings) -> str | None:
    """The file ``name`` (relative to ``INPUT_DIR``, or absolute within it) as the path the job will read:
    resolved, links followed, so that what is checked is what is read."""
    if name is None:
        return None
    if settings.input_dir is None:
        raise Refused(
            403,
            f"{field} names a file of the service's host, and this service lets jobs read none "
            "(the operator sets CODEGYM_EVALUATOR_INPUT_DIR to the directory jobs may read)",
        )
    root = Path(settings.input_dir).resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise Refused(403, f"{field} {name!r} is outside the directory jobs may read (CODEGYM_EVALUATOR_INPUT_DIR)")
    return str(path)
