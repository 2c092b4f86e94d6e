// A receiver of Leasehold's webhooks, verifying each with the Standard
// Webhooks package (`npm install standardwebhooks`).
//
// Run with the subscription's secret in LEASEHOLD_WEBHOOK_SECRET (the
// `whsec_...` text the server showed once) and a port in PORT (0 picks
// one). It prints one JSON line per request and answers 204 to a genuine
// delivery, 400 to anything else. A delivery may come more than once (after
// a failure, a restart or a replay): the `webhook-id` is the same each
// time, so a receiver acts on each id once.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const hook = new Webhook(process.env.LEASEHOLD_WEBHOOK_SECRET);
// A real receiver keeps the ids it acted on in its own database, beside
// what it did, so that acting and remembering commit together.
const seen = new Set();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    // The raw text, as received: parsing and re-encoding the JSON first
    // would change what was signed.
    const body = Buffer.concat(chunks).toString("utf8");
    const id = req.headers["webhook-id"];
    let event;
    try {
      event = hook.verify(body, req.headers);
    } catch (e) {
      console.log(JSON.stringify({ verified: false, id, error: String(e.message) }));
      res.writeHead(400).end();
      return;
    }
    const duplicate = seen.has(id);
    seen.add(id);
    const task = event.data.change.task;
    console.log(
      JSON.stringify({
        verified: true,
        id,
        duplicate,
        type: event.type,
        subscription: event.subscription,
        task: task ? task.id : null,
        seq: task ? task.entry.seq : null,
      }),
    );
    res.writeHead(204).end();
  });
});

server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ listening: server.address().port }));
});
