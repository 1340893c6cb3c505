"""``crabrec serve``: an HTTP JSON service over a trained run, with dynamic batching (see :mod:`.app`)."""

from __future__ import annotations

from pathlib import Path


def served_methods(run_dir: str | Path, chosen: list[str] | None) -> list[str]:
    """``chosen``, else every method of the run that has been evaluated (Table 1's order)."""
    from crabrec.errors import CrabError
    from crabrec.methods import get, methods
    from crabrec.runfiles import RunFiles, run_folder

    files = RunFiles(run_folder(run_dir))
    if chosen:
        return list(dict.fromkeys(get(m).name for m in chosen))
    found = [m.name for m in methods() if m.ranker is not None and files.metrics(m.name).is_file()]
    if not found:
        raise CrabError(f"{run_dir}: no evaluated method to serve; run `crabrec run` (or pass --method)")
    return found


def build_app(
    run_dir: str | Path,
    chosen: list[str] | None = None,
    new_items: str | Path | None = None,
    new_share: float | None = None,
    unavailable: str | Path | None = None,
    **options,
):
    """The service app of a run: loads each served method once (the first is the default of a request), with
    ``new_items`` (an item table) added to the catalogue of each, encoded once (``new_share``: see
    :func:`crabrec.load`), and the items of ``unavailable`` (a file of item ids) never recommended."""
    from crabrec.errors import CrabError
    from crabrec.recommender import load
    from crabrec.serve.app import create_app

    served = served_methods(run_dir, chosen)
    if new_items is not None:
        from crabrec.methods import get
        from crabrec.new_items import read

        if not chosen:  # by default, every evaluated method that can take them
            served = [m for m in served if get(m).sids != "none"]
            if not served:
                raise CrabError(f"{run_dir}: no evaluated method ranks semantic IDs, which new items need")
        new_items = read(run_dir, new_items)
    if unavailable is not None:  # read once for every served method
        from crabrec.config import load_saved
        from crabrec.unavailable import given_ids

        unavailable, name = given_ids(unavailable, load_saved(Path(run_dir)).data)
    recommenders = {m: load(run_dir, m, new_items=new_items, new_share=new_share) for m in served}
    if unavailable is not None:
        for n, rec in enumerate(recommenders.values()):  # one catalogue: its unknown ids logged once
            rec.set_unavailable(unavailable, name, report=n == 0)
    return create_app(run_dir, recommenders, **options)


def listen(host: str, port: int):
    """A TCP socket bound to ``host:port`` (port 0: a free one), or a :class:`CrabError` saying why not (an unknown
    host, a port in use or reserved), before any model is loaded. The server is handed this socket, so the port it
    reports is the one it listens on."""
    import socket

    from crabrec.errors import CrabError
    from crabrec.io import os_reason

    if not host.strip():
        raise CrabError(f"--host {host!r}: expected an address (127.0.0.1, or 0.0.0.0 for every interface)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise CrabError(f"--host {host!r}: not an address this machine can listen on ({exc})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart may bind over connections in TIME_WAIT
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise CrabError(f"--host {host} --port {port}: cannot listen there ({os_reason(exc)})") from None
    sock.listen(2048)  # connections are accepted into the backlog from now on, before the address is printed
    sock.set_inheritable(True)
    return sock


def url(sock) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_server(config):
    """A ``uvicorn.Server`` that says why it stops: a signal (Ctrl-C, SIGTERM, or SIGHUP when its terminal closes)
    logs one line, then the requests in flight finish, and the command ends normally (exit code 0): stopping is how
    a service's work ends."""
    import contextlib
    import logging
    import signal
    import threading

    import uvicorn

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame) -> None:
            if not self.should_exit:
                logging.getLogger("crabrec").info(
                    "received %s: finishing the requests in flight, then stopping", signal.Signals(sig).name
                )
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            main = threading.current_thread() is threading.main_thread()
            if main and hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup
                signal.signal(signal.SIGHUP, self.handle_exit)
            with super().capture_signals():
                try:
                    yield
                finally:  # uvicorn would raise the signal again once stopped, ending the command as interrupted
                    getattr(self, "_captured_signals", []).clear()

    return _Server(config)
