"""A receiver of Leasehold's webhooks, verifying each with the Standard
Webhooks package (`pip install standardwebhooks`).

Run with the subscription's secret in LEASEHOLD_WEBHOOK_SECRET (the
`whsec_...` text the server showed once) and a port in PORT (0 picks one).
It prints one JSON line per request and answers 204 to a genuine delivery,
400 to anything else. A delivery may come more than once (after a failure,
a restart or a replay): the `webhook-id` is the same each time, so a
receiver acts on each id once.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

hook = Webhook(os.environ["LEASEHOLD_WEBHOOK_SECRET"])
# A real receiver keeps the ids it acted on in its own database, beside
# what it did, so that acting and remembering commit together.
seen = set()
lock = threading.Lock()


def report(line):
    # Requests are handled on threads: one write per line, under a lock.
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        msg_id = self.headers.get("webhook-id")
        try:
            # The raw bytes, as received: parsing and re-encoding the JSON
            # first would change what was signed.
            event = hook.verify(body, dict(self.headers))
        except WebhookVerificationError as e:
            report({"verified": False, "id": msg_id, "error": str(e)})
            self.send_response(400)
            self.end_headers()
            return
        with lock:
            duplicate = msg_id in seen
            seen.add(msg_id)
        change = event["data"]["change"]
        task = change.get("task")
        report({
            "verified": True,
            "id": msg_id,
            "duplicate": duplicate,
            "type": event["type"],
            "subscription": event["subscription"],
            "task": task and task["id"],
            "seq": task and task["entry"]["seq"],
        })
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "0"))), Handler)
report({"listening": server.server_address[1]})
server.serve_forever()
