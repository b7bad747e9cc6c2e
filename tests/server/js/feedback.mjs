// Feedback created, then updated (score changed, comment cleared, value kept), with the official
// JS client; prints what it reads back. Run by tests/server/test_js_sdk.py with a run id.
import { Client } from "langsmith";

const client = new Client();
const runId = process.argv[2];
const fb = await client.createFeedback(runId, "q", { score: 0, value: "bad", comment: "why" });
await client.updateFeedback(fb.id, { score: 1, comment: null });
const got = await client.readFeedback(fb.id);
console.log(JSON.stringify({ id: fb.id, score: got.score, value: got.value, comment: got.comment }));
