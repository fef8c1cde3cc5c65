"""`forkhorse serve` and `forkhorse demo`: the API, git smart HTTP and the console on a real
WSGI server (waitress), bound to 127.0.0.1 by default, with all state under one home."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

from forkhorse.api.wsgi import access_logged
from forkhorse.domain.limits import GIT, STOP
from forkhorse.domain.messages import escape_controls
from forkhorse.observability import log_to_files, log_to_terminal
from forkhorse.service.facade import ServiceSettings
from forkhorse.wiring.local import (
    LocalApp,
    add_home_argument,
    build_local_app,
    build_local_runtime,
    ensure_owner_token,
)
from forkhorse.wiring.settings import LocalSettings

DEFAULT_HOST = "127.0.0.1"
THREADS = 8
# How long waitress's own shutdown waits for requests in flight (its default) before the
# runs drain: the rest of STOP.stop_seconds is the drain's.
REQUESTS_STOP_SECONDS = 5.0

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser("serve", help="run the API, git smart HTTP and the console")
    _server_arguments(serve)
    serve.add_argument("--demo", action="store_true", help="seed a demo project once")
    serve.set_defaults(func=_serve)
    demo = subparsers.add_parser("demo", help="serve with a demo project (seeded once)")
    _server_arguments(demo)
    demo.set_defaults(func=_serve, demo=True)


def _server_arguments(parser: argparse.ArgumentParser) -> None:
    settings = LocalSettings.from_environ()
    add_home_argument(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=settings.port,
        help="TCP port (FORKHORSE_PORT; default 8787)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (127.0.0.1)")
    parser.add_argument(
        "--public-url",
        default=settings.public_url,
        help="the URL browsers and git use (FORKHORSE_PUBLIC_URL; default http://HOST:PORT);"
        " the only origin the API accepts",
    )


def _serve(args: argparse.Namespace) -> int:
    from waitress.server import create_server

    from forkhorse.adapters.sandbox.session import stop_running_sessions

    log_to_terminal()  # escaped lines, no metrics, dulwich at WARNING
    home = private_home(args.home.resolve())
    log_to_files(home / "logs")
    url = (args.public_url or f"http://{args.host}:{args.port}").rstrip("/")
    app = open_local_app(home, url)
    app.runtime.supervisor.on_stop(stop_running_sessions)  # a stop kills quick checks at once
    token = ensure_owner_token(app.service, home)
    server = create_server(
        access_logged(app.http, _print_line),
        host=args.host,
        port=args.port,
        threads=THREADS,
        max_request_body_size=GIT.request_bytes,  # the largest body any route accepts
    )
    log.info("listening", extra={"url": url, "home": str(home)})
    print(f"Forkhorse is listening on {url}", flush=True)
    print(f"  console:    {url}/", flush=True)
    print(f"  API docs:   {url}/docs", flush=True)
    print(f"  owner token: {token}  (also in {home / 'owner-token'})", flush=True)
    if args.demo:
        from forkhorse.demo import seed_demo

        threading.Thread(
            target=seed_demo, args=(app, home, url, token), name="demo-seed", daemon=True
        ).start()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop, as Ctrl-C is
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        _drain(app)
    return 0


def _drain(app: LocalApp) -> None:
    """A graceful stop: no more requests are served; runs in flight end as infrastructure
    errors saying the service stopped, their containers removed and workspaces unmounted
    (`LocalSupervisor.shutdown`). A stop never outlasts STOP.stop_seconds: past it, the
    process exits and the next start sweeps what is left, as after a crash."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM cannot cut the drain
    began = time.monotonic()
    closing = threading.Thread(target=app.close, name="drain", daemon=True)
    closing.start()
    closing.join(STOP.stop_seconds - REQUESTS_STOP_SECONDS)
    if closing.is_alive():
        log.error("the stop overran %.0f s; the next start sweeps", time.monotonic() - began)
    else:
        log.info("stopped", extra={"seconds": round(time.monotonic() - began, 3)})


def _print_line(line: str) -> None:
    """One write per line, so lines of concurrent requests never interleave; a control
    character a client put in its path is printed as an escape, never to the terminal."""
    sys.stdout.write(escape_controls(line) + "\n")
    sys.stdout.flush()


def private_home(home: Path) -> Path:
    """The home holds tokens and the database: only its owner may enter it, also when an
    older version created it world-readable."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)
    return home


def open_local_app(home: Path, url: str) -> LocalApp:
    """Recovery runs before the server accepts work (inside `build_local_runtime`)."""
    runtime = build_local_runtime(home)
    return build_local_app(runtime, ServiceSettings(public_url=url))
