// The seed's prerequisite (a dataset with two examples), done with the official JS client.
import { Client } from "langsmith";

const client = new Client();
const dataset = await client.createDataset("HelloDataset", { description: "seed" });
await client.createExamples([
  { inputs: { input: "Harrison" }, reference_outputs: { expected: "Hello Harrison" }, dataset_id: dataset.id },
  { inputs: { input: "Ankush" }, reference_outputs: { expected: "Hello Ankush" }, dataset_id: dataset.id },
]);
console.log(JSON.stringify({ dataset_id: dataset.id }));
