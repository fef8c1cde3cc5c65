"""A WSGI app served by waitress on an ephemeral loopback port, on a thread of its own.

It is stopped on the server's own loop thread: closing its sockets from another thread races
the loop's `select` (EBADF there, an unhandled thread exception in the test).
"""

from __future__ import annotations

import threading
from typing import Any

from waitress import wasyncore
from waitress.server import create_server

STOP_SECONDS = 30.0


class LoopbackWsgi:
    def __init__(self, app: Any, threads: int = 4) -> None:
        self._server: Any = create_server(app, host="127.0.0.1", port=0, threads=threads)
        self.url = f"http://127.0.0.1:{self._server.effective_port}"
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> LoopbackWsgi:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every socket on the loop's thread (the loop then ends), then the workers."""
        sockets = self._server._map
        if self._thread.is_alive():
            try:
                self._server.trigger.pull_trigger(lambda: wasyncore.close_all(sockets))
            except OSError:  # the loop already closed its trigger: it is ending on its own
                wasyncore.close_all(sockets)
            self._thread.join(STOP_SECONDS)
        else:
            wasyncore.close_all(sockets)
        self._server.task_dispatcher.shutdown()
