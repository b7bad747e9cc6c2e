// Run statistics and the v2 run/trace/experiment-run queries with the official JS client,
// against runs the Python test seeded; prints what it reads, for test_js_sdk_runs_v2.py.
import { Client } from "langsmith";

const client = new Client();
const [project, projectId, root0, root1, llm1, windowStart, datasetId, experimentId] =
  process.argv.slice(2);
const out = {};
const all = async (pages) => {
  const items = [];
  for await (const item of pages) items.push(item);
  return items;
};

out.stats_roots = await client.getRunStats({ projectNames: [project], isRoot: true });
out.stats_trace = await client.getRunStats({ projectIds: [projectId], trace: root1 });
out.stats_filtered = await client.getRunStats({
  projectNames: [project], filter: 'and(eq(is_root, true), has(tags, "beta"))' });
try {
  await client.getRunStats({ projectNames: [project], filter: "eq(nonsense" });
  out.bad_filter = null;
} catch (err) {
  out.bad_filter = String(err);
}

const traces = await all(client.traces.query({
  project_id: projectId, min_start_time: windowStart, page_size: 2,
  selects: ["ID", "NAME", "STATUS", "TOTAL_TOKENS", "TOTAL_COST"] }));
out.traces = traces.map((t) => ({ id: t.root_run.id, name: t.root_run.name,
  status: t.root_run.status, total_tokens: t.trace_aggregates?.total_tokens }));
const traceRuns = await client.traces.listRuns(root1, {
  project_id: projectId, selects: ["ID", "NAME", "RUN_TYPE", "PARENT_RUN_IDS"] });
out.trace_runs = traceRuns.items.map((r) => [r.name, r.run_type, r.parent_run_ids]);

const runs = await all(client.runs.queryV2({
  project_ids: [projectId], min_start_time: windowStart, is_root: false,
  selects: ["ID", "NAME", "PROMPT_TOKENS", "TOTAL_TOKENS"] }));
out.child_runs = runs.map((r) => [r.id, r.name, r.prompt_tokens, r.total_tokens]);
const one = await client.runs.retrieveV2(llm1, { project_id: projectId,
  selects: ["ID", "NAME", "TRACE_ID", "PROMPT_TOKENS"] });
out.retrieved = [one.id, one.name, one.trace_id, one.prompt_tokens];

const rows = await all(client.datasets.experimentRuns.query(datasetId, {
  experiment_ids: [experimentId], page_size: 2, sort: { by: "feedback.correct", order: "ASC" },
  selects: ["ID", "OUTPUTS"] }));
out.sorted = rows.map((row) => [row.inputs.i, row.runs.map((r) => r.outputs)]);
console.log(JSON.stringify(out));
