// A presigned feedback token with the official JS client: made with the API key, then used the
// way an app's front end does (a plain fetch of its URL, no key). Prints what it reads back.
// Run by tests/server/test_feedback_tokens.py with a run id.
import { Client } from "langsmith";

const client = new Client();
const runId = process.argv[2];
const token = await client.createPresignedFeedbackToken(runId, "thumbs", {
  feedbackConfig: { type: "continuous", min: 0, max: 1 },
});
const used = await fetch(`${token.url}?score=1&comment=${encodeURIComponent("from the browser")}`);
const listed = [];
for await (const t of client.listPresignedFeedbackTokens(runId)) listed.push(t.id);
console.log(JSON.stringify({ id: token.id, url: token.url, status: used.status, listed }));
