// A pairwise evaluation with the official JS client: two experiments run by evaluate(), then
// evaluate([a, b], { evaluators }) scores them against each other. Prints what it reads back.
// Run by tests/server/test_comparative.py.
import { Client } from "langsmith";
import { evaluate } from "langsmith/evaluation";

const client = new Client();
const name = process.argv[2];
const ds = await client.createDataset(name);
await client.createExamples({
  datasetId: ds.id,
  inputs: [{ q: "one" }, { q: "two" }],
  outputs: [{ a: "ONE" }, { a: "TWO" }],
});
const upper = await evaluate(async (inputs) => ({ a: inputs.q.toUpperCase() }), {
  data: name, client, experimentPrefix: "upper",
});
const plain = await evaluate(async (inputs) => ({ a: inputs.q }), {
  data: name, client, experimentPrefix: "plain",
});
await client.awaitPendingTraceBatches();
const prefersUpper = ({ runs }) => ({
  key: "prefers_upper",
  scores: Object.fromEntries(runs.map((r) => [r.id, r.outputs.a === r.outputs.a.toUpperCase() ? 1 : 0])),
});
const pairwise = await evaluate([upper.experimentName, plain.experimentName], {
  evaluators: [prefersUpper], client,
});
await client.awaitPendingTraceBatches();
console.log(JSON.stringify({
  comparative: pairwise.comparativeExperiment.id,
  experiments: [upper.experimentName, plain.experimentName],
  results: pairwise.results.length,
}));
