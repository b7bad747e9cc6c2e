// The seed's TypeScript snippet (langsmith-experiment-performance-metrics), as plain JavaScript:
// only the type imports and annotations are removed.
import { Client } from "langsmith";
import { evaluate } from "langsmith/evaluation";

// Row-level evaluator
function fooLabel(rootRun, example) {
return {score: 1, key: "foo"};
}

const client = new Client();

const results = await evaluate((inputs) => {
return { output: "Hello " + inputs.input };
}, {
data: "HelloDataset",
experimentPrefix: "Hello",
evaluators: [fooLabel],
});

const resp = await client.readProject({ projectName: results.experimentName, includeStats: true })
console.log(JSON.stringify(resp, null, 2))
