"""``codegym-sandbox``: serve the sandbox, or run one program through a running server."""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys


def _serve(args: argparse.Namespace) -> int:
    import uvicorn
    from pydantic import ValidationError

    from .api.connections import protocol_class
    from .api.hosts import HostCheck, answered_hosts
    from .config import Settings
    from .main import create_app

    overrides = {
        k: v
        for k, v in {"host": args.host, "port": args.port, "backend": args.backend, "workers": args.workers}.items()
        if v is not None
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        print(f"codegym-sandbox: bad settings:\n{exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Every connection waiting for its request head holds a descriptor: a quarter of them at most, so that a
    # crowd of slow clients can never take the ones the server, its workers and its real clients need.
    waiting = min(settings.max_waiting_connections, _open_files() // 4)
    app = create_app(settings)
    dropped = app.state.metrics.dropped_connections
    uvicorn.run(
        HostCheck(app, answered_hosts(settings)),  # on a socket only: an app served in-process has no Host to check
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=False,
        loop="auto",
        http=protocol_class(
            settings.header_timeout_s,
            waiting,
            lambda why: dropped.labels(reason=why).inc(),
            send_stall_s=settings.send_stall_s,
            max_unsent=settings.max_unsent_mb << 20,
            min_body_rate=settings.min_body_rate_kib_s * 1024,
        ),
        timeout_keep_alive=75,
        timeout_graceful_shutdown=settings.shutdown_grace_s,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told not to: only the proxies the settings name.
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=settings.trusted_proxies or None,
    )
    return 0


def _open_files() -> int:
    """The server's limit of open files, first raised to its hard limit (64 Ki at most), as servers do: the
    usual soft limit (1024) is a few hundred clients."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return 65536 if soft == resource.RLIM_INFINITY else soft


def _doctor(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .config import Settings
    from .doctor import as_json, diagnose, healthy, render

    try:
        settings = Settings(**({"backend": args.backend} if args.backend else {}))
    except ValidationError as exc:
        print(f"codegym-sandbox: bad settings:\n{exc}", file=sys.stderr)
        return 2
    if not args.json:
        print("codegym-sandbox doctor: what this machine gives the sandbox", flush=True)
    # The live run's server logs to stderr at warning level only: the report is the output.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    kind, reason, checks = diagnose(settings, run=not args.no_run)
    print(as_json(kind, reason, checks) if args.json else render(kind, reason, checks))
    return 0 if healthy(kind, checks) else 1


def _demo(args: argparse.Namespace) -> int:
    from .api.fusion_models import RunCodeRequest
    from .client import SandboxClient

    request = RunCodeRequest(code=args.code, language=args.language, stdin=args.stdin)
    with SandboxClient(args.url, token=os.environ.get("CODEGYM_SANDBOX_API_TOKEN")) as client:
        result = client.run_code(request)
    print(result.model_dump_json(indent=2))
    return 0 if result.status.value == "Success" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="codegym-sandbox",
        description="Run untrusted programs fast and safely behind a SandboxFusion-compatible REST API.",
        epilog="Every setting can also come from CODEGYM_SANDBOX_* environment variables (see the README).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the server")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1; others need an API token)")
    serve.add_argument("--port", type=int, help="port (default 8080)")
    serve.add_argument(
        "--backend",
        choices=["auto", "local", "docker", "podman", "podman-hpc"],
        help="where programs run (default auto: a container engine with the runtime image, else local)",
    )
    serve.add_argument("--workers", type=int, help="concurrent runs (default: one per CPU core)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(func=_serve)
    doctor = sub.add_parser(
        "doctor",
        help="check what this machine gives the sandbox, and say what is missing and how to fix it",
        description=(
            "Check user namespaces, seccomp, cgroups, the runtime packages, the languages' toolchains, the "
            "container engines and their runtime image, gVisor, and the memory budget and workers a server "
            "would use; say what each missing piece costs and the command that fixes it; then run one program "
            "through a server on the backend it would choose. Exits 1 when that backend cannot run programs "
            "isolated."
        ),
    )
    doctor.add_argument(
        "--backend", choices=["auto", "local", "docker", "podman", "podman-hpc"], help="the backend to check for"
    )
    doctor.add_argument("--no-run", action="store_true", help="only the checks: no program is run")
    doctor.add_argument("--json", action="store_true", help="the report as JSON")
    doctor.set_defaults(func=_doctor)
    run = sub.add_parser("run", help="run one program through a running server and print the result")
    run.add_argument("code", help="the program's source")
    run.add_argument("--language", default="python")
    run.add_argument("--stdin")
    run.add_argument("--url", default="http://127.0.0.1:8080")
    run.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
