// Feedback created, then updated (score changed, comment cleared, value kept), with the official
// JS client; prints what it reads back. Run by tests/server/test_js_sdk.py with a run id and the
// example id the run was made for.
import { Client } from "langsmith";

const client = new Client();
const [runId, exampleId] = process.argv.slice(2);
const fb = await client.createFeedback(runId, "q", { score: 0, value: "bad", comment: "why" });
await client.updateFeedback(fb.id, { score: 1, comment: null });
const got = await client.readFeedback(fb.id);
// a judge's score beside it: listFeedback by source type (the SDK sends ?source=model)
await client.createFeedback(runId, "judge", { score: 0.5, feedbackSourceType: "model" });
const bySource = {};
for (const kind of ["model", "api"]) {
  bySource[kind] = [];
  for await (const f of client.listFeedback({ runIds: [runId], feedbackSourceTypes: [kind] })) {
    bySource[kind].push(f.key);
  }
}
// listRuns by the example it ran on (the SDK sends reference_example as one id, not a list)
const forExample = [];
for await (const r of client.listRuns({ projectName: "js-fb-update", referenceExampleId: exampleId })) {
  forExample.push(r.id);
}
console.log(JSON.stringify({ id: fb.id, score: got.score, value: got.value, comment: got.comment,
                             bySource, forExample }));
