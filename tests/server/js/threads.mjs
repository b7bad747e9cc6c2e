// A project's conversation threads with the official JS client: listThreads, readThread and
// listGroupRuns on the project the Python test traced (its name is the argument). Prints what
// it read.
// Run by tests/server/test_threads.py.
import { Client } from "langsmith";

const client = new Client();
const projectName = process.argv[2];
const threads = await client.listThreads({ projectName });
const turns = [];
for await (const run of client.readThread({ threadId: "t-1", projectName })) {
  turns.push(run.inputs);
}
// the older grouping API (POST /runs/group), a page of one at a time to follow its paging
const groups = [];
for await (const g of client.listGroupRuns({ projectName, groupBy: "conversation", limit: 1 })) {
  groups.push({ thread_id: g.thread_id, count: g.count, total_tokens: g.total_tokens,
                filter: g.filter });
}
console.log(JSON.stringify({
  threads: threads.map((t) => ({ thread_id: t.thread_id, count: t.count })),
  turns,
  groups,
}));
