// Example attachments with the official JS client (issue 23): upload, read back, download the
// signed URL, update with attachments_operations, list with includeAttachments. Prints JSON.
import { Client } from "langsmith";

const client = new Client();
const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...Array(2000).keys()].map((x) => x & 0xff));
const ds = await client.createDataset(`js-attachments-${Date.now()}`);
const [ex] = await client.createExamples([
  { dataset_id: ds.id, inputs: { q: "what is this?" }, outputs: { a: "a png" },
    attachments: { image: ["image/png", png], note: { mimeType: "text/plain", data: new TextEncoder().encode("hello") } } },
]);
const out = {};
out.names = Object.keys(ex.attachments ?? {}).sort();
out.mime = ex.attachments.image.mime_type;
const got = new Uint8Array(await (await fetch(ex.attachments.image.presigned_url)).arrayBuffer());
out.same_bytes = got.length === png.length && got.every((b, i) => b === png[i]);
const part = await fetch(ex.attachments.image.presigned_url, { headers: { Range: "bytes=0-3" } });
out.range_status = part.status;
out.range_bytes = Array.from(new Uint8Array(await part.arrayBuffer()));
await client.updateExample(ex.id, {
  attachments: { extra: ["application/json", new TextEncoder().encode('{"k": 1}')] },
  attachments_operations: { rename: { image: "photo" }, retain: [] },
});
const after = await client.readExample(ex.id);
out.after = Object.keys(after.attachments ?? {}).sort();
out.listed = [];
for await (const e of client.listExamples({ datasetId: ds.id, includeAttachments: true })) {
  out.listed.push(Object.keys(e.attachments ?? {}).sort());
}
console.log(JSON.stringify(out));
