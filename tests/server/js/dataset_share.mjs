// Sharing a dataset, and its OpenAI fine-tuning download, with the official JS client:
// shareDataset, readDatasetSharedSchema, readSharedDataset, listSharedExamples,
// readDatasetOpenaiFinetuning, unshareDataset on the dataset the Python test made (its name
// is the argument). Prints what it read. Run by tests/server/test_dataset_shares.py.
import { Client } from "langsmith";

const client = new Client();
const datasetName = process.argv[2];
const made = await client.shareDataset(undefined, datasetName);
const again = await client.shareDataset(made.dataset_id);
const schema = await client.readDatasetSharedSchema(undefined, datasetName);
const dataset = await client.readSharedDataset(made.share_token);
const examples = await client.listSharedExamples(made.share_token);
const finetuning = await client.readDatasetOpenaiFinetuning({ datasetName });
await client.unshareDataset(made.dataset_id);
let after = null;
try {
  await client.readSharedDataset(made.share_token);
  after = "still open";
} catch (err) {
  after = String(err.message ?? err);
}
console.log(JSON.stringify({
  made, again, schema, dataset: { id: dataset.id, name: dataset.name },
  examples: examples.map((e) => e.inputs), finetuning, after,
}));
