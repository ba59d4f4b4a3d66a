"""Webhooks end to end, outside Rust: a real judgecal posts a ping to a receiver written here
with Python's http.server, and the verification function printed in docs/webhooks.md (run as
printed, taken from the page) accepts it, and refuses it tampered with."""

from __future__ import annotations

import http.server
import re
import threading
import time
from pathlib import Path

from judgecal import Client

ROOT = Path(__file__).resolve().parents[3]


def docs_verify():
    """The `verify` function of docs/webhooks.md's Python example, and what the example
    printed."""
    page = (ROOT / "docs" / "webhooks.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    printed: list[str] = []
    scope: dict = {"print": lambda *a: printed.append(" ".join(map(str, a)))}
    exec(code, scope)
    return scope["verify"], printed


class Receiver(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[dict, bytes]] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_ping_verifies_with_the_docs_function(server):
    verify, printed = docs_verify()
    assert printed == ["True"], printed
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        with Client(server.url, server.key) as jc:
            made = jc.create_webhook(url)
            hook, secret = made.id, made.secret
            event = jc.ping_webhook(hook).event_id
        for _ in range(200):
            if any(h.get("webhook-id") == event for h, _ in Receiver.seen):
                break
            time.sleep(0.05)
        headers, body = next((h, b) for h, b in Receiver.seen if h.get("webhook-id") == event)
        assert verify(secret, headers, body)
        assert not verify(secret, headers, body.replace(b"ping", b"pong"))
        assert not verify("whsec_" + "A" * 43 + "=", headers, body)
        with Client(server.url, server.key) as jc:
            for _ in range(100):
                log = jc.webhook_deliveries(hook).deliveries
                if log[0].state == "delivered":
                    break
                time.sleep(0.05)
            assert [(d.event_id, d.state, d.attempts) for d in log] == [(event, "delivered", 1)]
            assert [h.id for h in jc.webhooks().webhooks] == [hook]
    finally:
        receiver.shutdown()
