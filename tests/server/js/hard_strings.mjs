// Strings a naive store loses (emoji, lone surrogates, NUL, the store's own escape character),
// written by the official JS client through every path it has (createRun + updateRun, a traced
// function, feedback) and read back; prints what was sent and what came back, for
// tests/server/test_js_sdk.py to compare.
import { Client } from "langsmith";
import { traceable } from "langsmith/traceable";

const HARD = {
  emoji: "a😀b🎉",
  lone_high: "x\ud800y",
  lone_low: "\udfff",
  nul: "a\u0000b",
  pair_and_lone: "😀\udc00\u0000",
  noncharacter: "\ufdd0 and \ufdd0\ufdd0",
};
const client = new Client();
const project = process.argv[2];
const runId = process.argv[3];
const payload = (tag) => ({ tag, ...HARD, list: Object.values(HARD),
  "k\ud800": 1, "\udfff\u0000": { "d\udc00eep": [{ "\ufdd0\ud801": HARD.lone_low }] } });

await client.createRun({ id: runId, name: "hard😀", run_type: "chain", project_name: project,
  inputs: payload("in"), extra: { metadata: payload("meta") } });
await client.updateRun(runId, { outputs: payload("out"), end_time: Date.now() });
const traced = traceable(async (text) => ({ out: text + HARD.lone_high }),
  { name: "echo", project_name: project, client, metadata: payload("tmeta") });
await traced(HARD.pair_and_lone);
await client.awaitPendingTraceBatches();
const fb = await client.createFeedback(runId, "k", { value: HARD.pair_and_lone,
  correction: payload("fix"), comment: HARD.nul });
let refused = null;  // a feedback KEY with a lone surrogate is refused by name
try {
  await client.createFeedback(runId, "f\ud800", { score: 1 });
} catch (err) {
  refused = String(err);
}
const read = await client.readRun(runId);
const runs = [];
for await (const run of client.listRuns({ projectName: project })) runs.push(run);
const echo = runs.find((r) => r.name === "echo");
const feedback = await client.readFeedback(fb.id);
console.log(JSON.stringify({
  sent: { inputs: payload("in"), outputs: payload("out"), metadata: payload("meta"),
          echo_inputs: { input: HARD.pair_and_lone },
          echo_outputs: { out: HARD.pair_and_lone + HARD.lone_high },
          echo_metadata: payload("tmeta"), value: HARD.pair_and_lone, correction: payload("fix"),
          comment: HARD.nul },
  got: { inputs: read.inputs, outputs: read.outputs, metadata: read.extra.metadata,
         name: read.name, echo_inputs: echo?.inputs, echo_outputs: echo?.outputs,
         echo_metadata: echo?.extra?.metadata, value: feedback.value,
         correction: feedback.correction, comment: feedback.comment, refused },
}));
