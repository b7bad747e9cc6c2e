// A project's conversation threads with the official JS client: listThreads and readThread
// on the project the Python test traced (its name is the argument). Prints what it read.
// Run by tests/server/test_threads.py.
import { Client } from "langsmith";

const client = new Client();
const projectName = process.argv[2];
const threads = await client.listThreads({ projectName });
const turns = [];
for await (const run of client.readThread({ threadId: "t-1", projectName })) {
  turns.push(run.inputs);
}
console.log(JSON.stringify({
  threads: threads.map((t) => ({ thread_id: t.thread_id, count: t.count })),
  turns,
}));
