"""Git's wire protocol version 2 for fetches (`Git-Protocol: version=2`), over upload-pack.

dulwich serves version 0 only, so version 2 is a translation around it:

- `GET info/refs?service=git-upload-pack` answers git's v2 capability advertisement
  (`ls-refs`, `fetch=shallow filter`, `object-format=sha1`), as `git upload-pack` does.
- `command=ls-refs` lists the refs the requested repository advertises in version 0 (so
  the same visibility: an agent never sees another agent's fork), with `ref-prefix`,
  `symrefs` and `peel`.
- `command=fetch` is rewritten into the version 0 stateless request it means (wants first,
  with their capabilities, then shallow/deepen/filter lines, the haves, `done`), which then
  goes through the same checks (`upload.checked_request`: visible haves only, at most
  `negotiation_haves`, wants reachable from readable refs) and the same `BoundedUploadPack`
  (walk bounds, byte budget, filters). Its answer is rewritten back: ACK/NAK lines become
  the `acknowledgments` section (no `ready`: the client then sends `done`), shallow lines
  the `shallow-info` section, and the side-band pack the `packfile` section.

Pushes stay on version 0 (git's receive-pack has no version 2).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from dulwich.objects import valid_hexsha
from dulwich.protocol import capability_agent, pkt_line
from dulwich.server import Handler

from forkhorse.adapters.git.store import ServedRepo
from forkhorse.domain.limits import GIT_WALKS
from forkhorse.githttp.wire import Refused

ADVERTISEMENT = (
    b"version 2\n",
    capability_agent() + b"\n",
    b"ls-refs\n",
    b"fetch=shallow filter\n",
    b"object-format=sha1\n",
)
DELIM = b"0001"
FLUSH = b"0000"
_PKT_MAX = 65520
_SPOOL_BYTES = 1024 * 1024
_FIRST_SECTION = (b"shallow", b"deepen", b"deepen-since", b"deepen-not", b"filter")
_WANT_CAPABILITIES = (b"no-progress", b"include-tag", b"deepen-relative")
_BASE_CAPABILITIES = (b"multi_ack_detailed", b"side-band-64k", b"thin-pack", b"ofs-delta")
_SIDE_BANDS = (b"\x01", b"\x02", b"\x03")


class _Delim:
    """A delim-pkt (0001), which separates a command's capabilities from its arguments."""


_DELIMITER = _Delim()
Packet = bytes | _Delim | None  # None is a flush-pkt


def requested(environ: dict[str, Any]) -> bool:
    """Whether the client asked for version 2 (`Git-Protocol: version=2`, items `:`-separated)."""
    header = str(environ.get("HTTP_GIT_PROTOCOL", ""))
    return "version=2" in (item.strip() for item in header.split(":"))


def advertise(write: Callable[[bytes], Any]) -> None:
    """The capability advertisement (git sends no `# service=` line in version 2)."""
    write(b"".join(pkt_line(line) for line in ADVERTISEMENT) + FLUSH)


def read_command(read: Callable[[int], bytes]) -> tuple[bytes, Iterator[bytes]]:
    """The command a request names and an iterator over its arguments (capabilities, such
    as `agent=` and `object-format=`, are read and ignored)."""
    packets = _packets(read)
    first = next(packets, None)
    if not isinstance(first, bytes) or not first.startswith(b"command="):
        raise Refused(400, "upload-pack: a protocol version 2 request starts with command=.")
    command = first.rstrip(b"\n").removeprefix(b"command=")
    if command not in (b"ls-refs", b"fetch"):
        raise Refused(400, f"upload-pack: unknown command {command[:40]!r}.")
    for packet in packets:
        if packet is None:
            return command, iter(())  # no arguments
        if isinstance(packet, _Delim):
            return command, _arguments(packets)
    raise Refused(400, "upload-pack: the request ends before its flush-pkt.")


def _arguments(packets: Iterator[Packet]) -> Iterator[bytes]:
    for packet in packets:
        if packet is None:
            return
        if not isinstance(packet, bytes):
            raise Refused(400, "upload-pack: a second delim-pkt in one command.")
        yield packet.rstrip(b"\n")
    raise Refused(400, "upload-pack: the request ends before its flush-pkt.")


def _packets(read: Callable[[int], bytes]) -> Iterator[Packet]:
    while True:
        header = read(4)
        if not header:
            return
        try:
            size = int(header, 16) if len(header) == 4 else -1
        except ValueError:
            size = -1
        if size == 0:
            yield None
        elif size == 1:
            yield _DELIMITER
        elif 4 < size <= _PKT_MAX:
            payload = read(size - 4)
            if len(payload) != size - 4:
                raise Refused(400, "The request ends inside a pkt-line.")
            yield payload
        else:
            raise Refused(400, f"Bad pkt-line length {header!r}: git's framing was expected.")


def ls_refs(repo: ServedRepo, arguments: Iterable[bytes], write: Callable[[bytes], Any]) -> None:
    """The refs version 0 would advertise for this repository, filtered by `ref-prefix`."""
    prefixes: list[bytes] = []
    symrefs = peel = False
    for argument in arguments:
        if argument == b"symrefs":
            symrefs = True
        elif argument == b"peel":
            peel = True
        elif argument.startswith(b"ref-prefix ") and len(prefixes) < 1024:
            prefixes.append(argument.removeprefix(b"ref-prefix "))
        elif argument != b"unborn":
            raise Refused(400, f"upload-pack: ls-refs does not take {argument[:40]!r}.")
    targets = repo.refs.get_symrefs() if symrefs else {}
    lines = []
    for name, sha in sorted(repo.get_refs().items()):
        if prefixes and not any(name.startswith(prefix) for prefix in prefixes):
            continue
        line = sha + b" " + name
        if name in targets:
            line += b" symref-target:" + targets[name]
        if peel:
            peeled = repo.get_peeled(name)
            if peeled is not None and peeled != sha:
                line += b" peeled:" + peeled
        lines.append(pkt_line(line + b"\n"))
    write(b"".join(lines) + FLUSH)


class FetchRequest:
    """A version 2 `fetch`, rewritten as the version 0 stateless request it means; `body`
    reads it (spooled to disk past 1 MiB). At most `negotiation_haves` distinct haves are
    kept, as version 0's check would consider no more."""

    def __init__(self, arguments: Iterable[bytes]) -> None:
        self.done = False
        capabilities = list(_BASE_CAPABILITIES)
        wants = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
        first = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
        haves: dict[bytes, None] = {}
        try:
            for argument in arguments:
                word, _, value = argument.partition(b" ")
                if self.done:
                    raise Refused(400, "upload-pack: nothing may follow 'done'.")
                if word == b"want":
                    wants.write(_object_id(value, word))
                elif word in _FIRST_SECTION:
                    first.write(pkt_line(argument + b"\n"))
                elif word == b"have":
                    if len(haves) < GIT_WALKS.negotiation_haves:
                        haves[_object_id(value, word)] = None
                elif word == b"done":
                    self.done = True
                elif word in _WANT_CAPABILITIES and word not in capabilities:
                    capabilities.append(word)
                elif word not in (b"thin-pack", b"ofs-delta", *_WANT_CAPABILITIES):
                    raise Refused(400, f"upload-pack: fetch does not take {word[:40]!r}.")
            self.body = self._assembled(wants, first, capabilities, haves)
        finally:
            wants.close()
            first.close()

    def _assembled(
        self, wants: IO[bytes], first: IO[bytes], capabilities: list[bytes], haves: Iterable[bytes]
    ) -> IO[bytes]:
        body = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned
        wants.seek(0)
        sha = wants.read(40)
        if sha:
            body.write(pkt_line(b"want " + sha + b" " + b" ".join(capabilities) + b"\n"))
        while sha := wants.read(40):
            body.write(pkt_line(b"want " + sha + b"\n"))
        first.seek(0)
        while chunk := first.read(64 * 1024):
            body.write(chunk)
        body.write(FLUSH)
        for have in haves:
            body.write(pkt_line(b"have " + have + b"\n"))
        body.write(pkt_line(b"done\n") if self.done else FLUSH)
        body.seek(0)
        return body


def _object_id(value: bytes, word: bytes) -> bytes:
    if len(value) != 40 or not valid_hexsha(value) or value != value.lower():
        raise Refused(400, f"upload-pack: {word.decode()} needs an object id.")
    return value


class FetchResponse:
    """Version 0 output of the upload-pack handler (written through `write`), rewritten as
    version 2's: see the module's docstring."""

    def __init__(self, write: Callable[[bytes], Any], *, done: bool) -> None:
        self._out = write
        self._done = done
        self._pending = b""
        self._acks: dict[bytes, None] = {}
        self._shallow: list[bytes] = []
        self._packing = False

    @property
    def packing(self) -> bool:
        return self._packing

    def write(self, data: bytes) -> int:
        if self._packing:
            self._out(data)
            return len(data)
        self._pending += data
        while len(self._pending) >= 4 and not self.packing:
            size = int(self._pending[:4], 16)
            if size == 0:
                line, self._pending = None, self._pending[4:]
            elif len(self._pending) < size:
                break
            else:
                line, self._pending = self._pending[4:size], self._pending[size:]
            self._line(line)
        if self.packing and self._pending:
            rest, self._pending = self._pending, b""
            self._out(rest)
        return len(data)

    def _line(self, line: bytes | None) -> None:
        if line is None:
            return  # the flush after version 0's shallow lines or negotiation
        if line[:1] in _SIDE_BANDS:
            self._start_pack()
            self._out(pkt_line(line))
            return
        words = line.rstrip(b"\n").split(b" ")
        if words[0] in (b"shallow", b"unshallow") and len(words) == 2:
            self._shallow.append(words[0] + b" " + words[1] + b"\n")
        elif words[0] == b"ACK" and len(words) >= 2:
            self._acks[words[1]] = None

    def _start_pack(self) -> None:
        self._packing = True
        head = []
        if self._shallow:
            head += [pkt_line(b"shallow-info\n"), *map(pkt_line, self._shallow), DELIM]
        head.append(pkt_line(b"packfile\n"))
        self._out(b"".join(head))

    def finish(self) -> None:
        """After the handler: a round without `done` gets its acknowledgments."""
        if self._packing:
            return
        if self._done:
            self._out(FLUSH)
            return
        lines = [b"ACK " + sha + b"\n" for sha in self._acks] or [b"NAK\n"]
        self._out(pkt_line(b"acknowledgments\n") + b"".join(map(pkt_line, lines)) + FLUSH)


class V2Fetch(Handler):
    """The version 0 upload-pack handler, then the version 2 answer's end."""

    def __init__(self, inner: Handler, response: FetchResponse) -> None:
        super().__init__(inner.backend, inner.proto, stateless_rpc=True)
        self._inner = inner
        self._response = response

    def handle(self) -> None:
        self._inner.handle()
        self._response.finish()
