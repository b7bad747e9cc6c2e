// The Vercel AI SDK (6.x) on Claude (`@ai-sdk/anthropic`) with prompt caching, traced to
// assay's OTLP endpoint: a system prompt marked for an hour-long cache write, asked twice
// (written, then read). Run by tests/server/test_js_otlp.py:
//   node ai_sdk_claude.mjs <Anthropic base url> <traces url> <api key>
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText } from "ai";

const [anthropicUrl, tracesUrl, apiKey] = process.argv.slice(2);
const provider = new NodeTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({
    url: tracesUrl, headers: { "x-api-key": apiKey, "Langsmith-Project": "ai-sdk-claude" } }))],
});
provider.register();

const anthropic = createAnthropic({ baseURL: `${anthropicUrl}/v1`, apiKey: "scripted" });
const atlas = "You answer questions about cities from the atlas. ".repeat(150);
const answers = [];
for (let i = 0; i < 2; i++) {
  const { text } = await generateText({
    model: anthropic("claude-sonnet-4-5"),
    messages: [
      { role: "system", content: atlas,  // (a breakpoint is marked on a message)
        providerOptions: { anthropic: { cacheControl: { type: "ephemeral", ttl: "1h" } } } },
      { role: "user", content: "What is the capital of Peru?" }],
    experimental_telemetry: { isEnabled: true },
  });
  answers.push(text);
}
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify(answers));
