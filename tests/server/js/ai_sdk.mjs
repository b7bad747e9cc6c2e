// The Vercel AI SDK (6.x, its `experimental_telemetry`) tracing an agent to assay's OTLP endpoint
// through OpenTelemetry's own Node tracer and protobuf exporter, as an AI SDK app does it.
// Run by tests/server/test_js_otlp.py: node ai_sdk.mjs <model base url> <traces url> <api key>
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, stepCountIs } from "ai";
import { z } from "zod";

const [modelUrl, tracesUrl, apiKey] = process.argv.slice(2);
const provider = new NodeTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({
    url: tracesUrl, headers: { "x-api-key": apiKey, "Langsmith-Project": "ai-sdk-app" } }))],
});
provider.register();

const openai = createOpenAI({ baseURL: modelUrl, apiKey: "scripted" });
const lookup_city = tool({
  description: "A city's population.",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `${city} has 2102650 people`,
});
const telemetry = { isEnabled: true, functionId: "geo", metadata: { user: "u1" } };
const answers = {};
// the default Responses model and the Chat Completions one: an agent loop, then a stream
for (const [api, model] of [["responses", openai("gpt-4o-mini")],
                            ["chat", openai.chat("gpt-4o-mini")]]) {
  const agent = await generateText({ model, tools: { lookup_city }, stopWhen: stepCountIs(3),
    prompt: "How many people live in Paris?", experimental_telemetry: telemetry });
  const stream = streamText({ model, prompt: "capital of Peru?",
    experimental_telemetry: telemetry });
  let streamed = "";
  for await (const text of stream.textStream) streamed += text;
  answers[api] = { agent: agent.text, streamed };
}
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify(answers));
