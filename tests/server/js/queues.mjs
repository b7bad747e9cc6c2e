// Annotation queues, feedback configs and the dataset features of issue 23 with the official JS
// client; prints what it reads back. Run by tests/server/test_js_sdk.py with two run ids, the
// project id and the runs' start times.
import { Client } from "langsmith";

const client = new Client();
const [run0, run1, sessionId, start0, start1] = process.argv.slice(2);
const out = {};

const config = await client.createFeedbackConfig({
  feedbackKey: "correct",
  feedbackConfig: { type: "categorical", categories: [{ value: 0, label: "no" }, { value: 1, label: "yes" }] },
});
out.config_key = config.feedback_key;
out.config_keys = [];
for await (const c of client.listFeedbackConfigs()) out.config_keys.push(c.feedback_key);

const queue = await client.createAnnotationQueue({
  name: "js-review", description: "from js", rubricInstructions: "Is it right?",
  rubricItems: [{ feedback_key: "correct", description: "right answer" }],
});
await client.addRunsToAnnotationQueue(queue.id, [
  { runId: run0, sessionId, startTime: start0 },
  { runId: run1, sessionId, startTime: start1 },
]);
const read = await client.readAnnotationQueue(queue.id);
out.rubric_key = read.rubric_items[0].feedback_key;
out.rubric_config_key = read.rubric_items[0].feedback_config.feedback_key;
out.size = (await client.getSizeFromAnnotationQueue(queue.id)).size;
const first = await client.getRunFromAnnotationQueue(queue.id, 0);
out.first = first.id;
await client.deleteRunFromAnnotationQueue(queue.id, first.queue_run_id);
out.after = [];
for await (const r of client.listRunsFromAnnotationQueue(queue.id)) out.after.push(r.id);
out.queues = [];
for await (const q of client.listAnnotationQueues()) out.queues.push(q.name);

const ds = await client.uploadCsv({
  csvFile: new Blob(["q,a\nwho,me\nwhat,that\n"]), fileName: "js.csv",
  inputKeys: ["q"], outputKeys: ["a"], name: "js-csv",
});
out.csv_name = ds.name;
const examples = [];
for await (const e of client.listExamples({ datasetId: ds.id })) examples.push(e);
out.csv_outputs = examples.map((e) => e.outputs.a).sort();
const v1 = (await client.readDataset({ datasetId: ds.id })).modified_at;
await client.updateExample(examples[0].id, { outputs: { a: "changed" }, dataset_id: ds.id });
const diff = await client.diffDatasetVersions({ datasetId: ds.id, fromVersion: v1, toVersion: "latest" });
out.modified = diff.examples_modified;
out.modified_expected = examples[0].id;

const typed = await client.createDataset("js-typed", {
  inputsSchema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
});
await client.createExample({ q: "fine" }, {}, { datasetId: typed.id, metadata: { tier: "gold" } });
await client.createExample({ q: "meh" }, {}, { datasetId: typed.id });
try {
  await client.createExample({ q: 3 }, {}, { datasetId: typed.id });
  out.schema_error = null;
} catch (err) {
  out.schema_error = String(err.message);
}
out.filtered = [];
for await (const e of client.listExamples({ datasetId: typed.id, filter: 'exists(metadata, "tier")' })) {
  out.filtered.push(e.inputs.q);
}
console.log(JSON.stringify(out));
