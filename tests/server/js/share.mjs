// Sharing a trace with the official JS client: shareRun, readRunSharedLink, unshareRun on a run
// the Python test traced (its id is the argument). Prints what it read. Run by
// tests/server/test_shares.py. (listSharedRuns of this SDK builds a URL without its "?", which
// no server answers, so it is left out.)
import { Client } from "langsmith";

const client = new Client();
const runId = process.argv[2];
const before = (await client.readRunSharedLink(runId)) ?? null;
const url = await client.shareRun(runId);
const again = await client.shareRun(runId);
const link = await client.readRunSharedLink(runId);
await client.unshareRun(runId);
const after = (await client.readRunSharedLink(runId)) ?? null;
console.log(JSON.stringify({ before, url, again, link, after }));
