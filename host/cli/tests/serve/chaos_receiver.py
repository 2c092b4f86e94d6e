"""A receiver for the webhook crash test (webhooks_crash.rs): verifies
every request with the Standard Webhooks package, then answers as chance
says: a third fail with 500, about one in forty hangs past the sender's
timeout before it answers 204, the rest answer 204.

The test writes `PATH SECRET` lines on standard input (a subscription's
path on this receiver and its `whsec_...` secret); a request to a path it
has no secret for is refused with 400. One JSON line per request goes to
standard output: what was verified, the webhook-id, the subscription, the
task and history number, and the status answered. Chance is seeded from
SEED, so a failing run can be repeated.
"""

import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

HANG = float(os.environ.get("HANG_SECONDS", "3"))
hooks = {}
lock = threading.Lock()
chance = random.Random(int(os.environ.get("SEED", "1")))


def report(line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def read_secrets():
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 2:
            with lock:
                hooks[parts[0]] = Webhook(parts[1])
            report({"secret_for": parts[0]})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        msg_id = self.headers.get("webhook-id")
        with lock:
            hook = hooks.get(self.path)
            roll = chance.random()
        if hook is None:
            report({"verified": False, "id": msg_id, "path": self.path, "error": "no secret"})
            self.answer(400)
            return
        try:
            event = hook.verify(body, dict(self.headers))
        except WebhookVerificationError as e:
            report({"verified": False, "id": msg_id, "path": self.path, "error": str(e)})
            self.answer(400)
            return
        change = event["data"]["change"]
        task = change.get("task")
        line = {
            "verified": True,
            "id": msg_id,
            "path": self.path,
            "subscription": event.get("subscription"),
            "task": task and task["id"],
            "seq": task and task["entry"]["seq"],
            "kind": task and task.get("kind"),
        }
        if roll < 1 / 3:
            line["status"] = 500
            report(line)
            self.answer(500)
        elif roll < 1 / 3 + 1 / 40:
            # Past the sender's timeout: whatever is answered then is not
            # heard, so it counts as a failure and is sent again.
            line["status"] = "hung"
            report(line)
            time.sleep(HANG)
            try:
                self.answer(204)
            except OSError:
                pass
        else:
            line["status"] = 204
            report(line)
            self.answer(204)

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A killed server drops its connections: that is the test, not
        # news.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


server = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=read_secrets, daemon=True).start()
report({"listening": server.server_address[1]})
server.serve_forever()
