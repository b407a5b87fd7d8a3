// Structured output and tool calls of `moex serve` through the official
// OpenAI client: for each model given, json_schema replies over 50 seeds
// validated by ajv, json_object and GBNF replies, a forced tool call read by
// the client's own parse() helper and answered in a second turn, a streamed
// tool call assembled by the client's stream() helper, and the refusals.
// usage: node serve_struct.mjs MOEX MODEL.gguf...
import { spawn } from "node:child_process";
import OpenAI from "openai";
import Ajv from "ajv";

const [moex, ...models] = process.argv.slice(2);
let failures = 0, checks = 0;
function check(ok, what) {
    checks++;
    if (!ok) {
        failures++;
        console.log(`FAIL: ${what}`);
    }
}

// Bounded on purpose: the grammar keeps every reply finite (strings, arrays
// and digit runs have bounds), so max_tokens is never what ends one.
const schema = {
    type: "object",
    properties: {
        name: { type: "string", maxLength: 8 },
        count: { type: "integer", minimum: 1, maximum: 12 },
        ok: { type: "boolean" },
        tags: { type: "array", items: { enum: ["red", "green", "blue"] }, maxItems: 3 },
        kind: { anyOf: [{ type: "null" }, { type: "string", enum: ["x", "y"] }] },
        ratio: { type: "number" },
    },
    required: ["name", "count", "ok", "tags", "kind", "ratio"],
    additionalProperties: false,
};
const weatherTool = {
    type: "function",
    function: {
        name: "get_weather",
        description: "The weather in a city",
        strict: true,
        parameters: {
            type: "object",
            properties: { city: { type: "string", enum: ["Paris", "Tokyo", "Lima"] }, days: { type: "integer" } },
            required: ["city", "days"],
            additionalProperties: false,
        },
    },
};
const timeTool = {
    type: "function",
    function: {
        name: "get_time",
        strict: true,
        parameters: {
            type: "object",
            properties: { zone: { type: "string", maxLength: 6 } },
            required: ["zone"],
            additionalProperties: false,
        },
    },
};
const MAX_TOKENS = 400;

function startServer(model) {
    return new Promise((resolve, reject) => {
        const server = spawn(moex, ["serve", "-m", model, "--port", "0", "--parallel", "4", "--threads", "1"], {
            stdio: ["ignore", "ignore", "pipe"],
        });
        let buffered = "";
        const timer = setTimeout(() => reject(new Error("moex serve did not start in 60 s")), 60000);
        server.stderr.on("data", (d) => {
            buffered += d.toString();
            const m = buffered.match(/http:\/\/127\.0\.0\.1:(\d+)\/v1/);
            if (m) {
                clearTimeout(timer);
                resolve({ server, port: Number(m[1]) });
            }
        });
        server.on("exit", (code) => reject(new Error(`moex serve exited (${code}): ${buffered}`)));
    });
}

// Runs jobs[i]() with at most `width` at a time.
async function pool(jobs, width) {
    const results = new Array(jobs.length);
    let next = 0;
    async function worker() {
        while (next < jobs.length) {
            const i = next++;
            results[i] = await jobs[i]();
        }
    }
    await Promise.all(Array.from({ length: width }, worker));
    return results;
}

async function refused(promise, param, pattern, what) {
    try {
        await promise;
        check(false, `${what}: accepted`);
    } catch (e) {
        check(e instanceof OpenAI.BadRequestError, `${what}: ${e}`);
        check(e.param === param, `${what}: param ${e.param}, want ${param}`);
        check(pattern.test(e.message), `${what}: message "${e.message}"`);
    }
}

async function testModel(model) {
    const { server, port } = await startServer(model);
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });
    const tag = model.split("/").pop();
    try {
        // json_schema over 50 seeds, validated against the schema
        const validate = new Ajv({ strict: false }).compile(schema);
        const replies = await pool(
            Array.from({ length: 50 }, (_, seed) => () =>
                client.chat.completions.parse({
                    model: "m",
                    messages: [{ role: "user", content: "Describe a thing as JSON." }],
                    response_format: { type: "json_schema", json_schema: { name: "thing", strict: true, schema } },
                    seed,
                    temperature: 1.2,
                    max_tokens: MAX_TOKENS,
                })),
            4);
        let valid = 0, longest = 0;
        replies.forEach((r, seed) => {
            const c = r.choices[0];
            longest = Math.max(longest, r.usage.completion_tokens);
            const ok = c.finish_reason === "stop" && c.message.parsed !== null && validate(c.message.parsed);
            if (ok) valid++;
            else console.log(`  ${tag} seed ${seed}: ${c.finish_reason} ${JSON.stringify(c.message.content)} ${JSON.stringify(validate.errors)}`);
        });
        check(valid === 50, `${tag}: ${valid} of 50 json_schema replies valid`);
        const distinct = new Set(replies.map((r) => r.choices[0].message.content)).size;
        check(distinct > 10, `${tag}: only ${distinct} distinct replies over 50 seeds`);
        console.log(`${tag}: json_schema ${valid}/50 valid, ${distinct} distinct, longest ${longest} tokens`);

        // json_object: any object, parsed when the reply ended by itself
        for (let seed = 0; seed < 3; seed++) {
            const r = await client.chat.completions.create({
                model: "m", messages: [{ role: "user", content: "JSON please" }],
                response_format: { type: "json_object" }, seed, max_tokens: 64,
            });
            const c = r.choices[0];
            if (c.finish_reason === "stop") {
                let v = null;
                try { v = JSON.parse(c.message.content); } catch { v = null; }
                check(v !== null && typeof v === "object" && !Array.isArray(v), `${tag}: json_object reply ${c.message.content}`);
            } else {
                check(c.finish_reason === "length" && c.message.content.trimStart().startsWith("{"),
                      `${tag}: json_object reply ${c.finish_reason} ${c.message.content}`);
            }
        }

        // a GBNF grammar (a vendor field: through the client's extra body)
        for (let seed = 0; seed < 4; seed++) {
            const r = await client.chat.completions.create({
                model: "m", messages: [{ role: "user", content: "yes or no?" }], seed, max_tokens: 16,
                grammar: 'root ::= ("yes" | "no") " " [0-9]{1,2}\n',
            });
            check(/^(yes|no) [0-9]{1,2}$/.test(r.choices[0].message.content) && r.choices[0].finish_reason === "stop",
                  `${tag}: grammar reply ${JSON.stringify(r.choices[0].message.content)}`);
        }

        // a forced tool call, parsed by the client's helper, answered in a second turn
        const messages = [{ role: "user", content: "What is the weather in Paris?" }];
        const first = await client.chat.completions.parse({
            model: "m", messages, tools: [weatherTool, timeTool],
            tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false,
            seed: 7, max_tokens: 200,
        });
        const fc = first.choices[0];
        check(fc.finish_reason === "tool_calls", `${tag}: finish_reason ${fc.finish_reason}`);
        const call = fc.message.tool_calls?.[0];
        check(call && call.type === "function" && call.function.name === "get_weather" && /^call_/.test(call.id),
              `${tag}: tool call ${JSON.stringify(fc.message)}`);
        const args = call?.function.parsed_arguments;
        check(args && ["Paris", "Tokyo", "Lima"].includes(args.city) && Number.isInteger(args.days),
              `${tag}: parsed arguments ${JSON.stringify(args)}`);
        messages.push(fc.message);
        messages.push({ role: "tool", tool_call_id: call?.id, content: JSON.stringify({ sky: "clear", celsius: 21 }) });
        const second = await client.chat.completions.create({
            model: "m", messages, tools: [weatherTool, timeTool], seed: 7, max_tokens: 24,
        });
        const sc = second.choices[0];
        check(typeof sc.message.content === "string" && ["stop", "length"].includes(sc.finish_reason),
              `${tag}: second turn ${JSON.stringify(sc)}`);
        check(second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens - 4,
              `${tag}: the second prompt (${second.usage.prompt_tokens} tokens) holds the call and its result`);

        // tool_choice required, streamed: the client's stream helper assembles the call
        const stream = client.chat.completions.stream({
            model: "m", messages: [{ role: "user", content: "time in Lima?" }], tools: [weatherTool, timeTool],
            tool_choice: "required", parallel_tool_calls: false, seed: 3, max_tokens: 200,
        });
        let doneEvents = 0;
        stream.on("tool_calls.function.arguments.done", () => doneEvents++);
        const streamed = await stream.finalChatCompletion();
        const stc = streamed.choices[0];
        check(stc.finish_reason === "tool_calls", `${tag}: streamed finish_reason ${stc.finish_reason}`);
        const scall = stc.message.tool_calls?.[0];
        check(stc.message.tool_calls?.length === 1 && scall.function.parsed_arguments &&
              ["get_weather", "get_time"].includes(scall.function.name), `${tag}: streamed call ${JSON.stringify(stc.message)}`);
        check(doneEvents === 1, `${tag}: ${doneEvents} arguments.done events`);

        // parallel calls: up to five, each parsed (the grammar bounds them)
        const many = await client.chat.completions.parse({
            model: "m", messages: [{ role: "user", content: "Weather and time everywhere" }], tools: [weatherTool, timeTool],
            tool_choice: "required", seed: 11, max_tokens: 1200,
        });
        const mc = many.choices[0], calls = mc.message.tool_calls ?? [];
        check(mc.finish_reason === "tool_calls" && calls.length >= 1 && calls.length <= 5 &&
              calls.every((c) => c.function.parsed_arguments && /^call_/.test(c.id)) &&
              new Set(calls.map((c) => c.id)).size === calls.length,
              `${tag}: parallel calls ${mc.finish_reason} ${JSON.stringify(mc.message)}`);

        // refusals: 400 naming the field
        await refused(client.chat.completions.create({ model: "m", messages, grammar: "root ::= (\"a\"\n" }),
                      "grammar", /line 1, column 10/, `${tag}: bad grammar`);
        await refused(client.chat.completions.create({
            model: "m", messages: [{ role: "user", content: "x" }],
            response_format: { type: "json_schema", json_schema: { name: "p", schema: { type: "string", pattern: "^a" } } },
        }), "response_format", /unsupported keyword 'pattern'/, `${tag}: pattern`);
        await refused(client.chat.completions.create({
            model: "m", messages: [{ role: "user", content: "x" }], tools: [weatherTool],
            tool_choice: { type: "function", function: { name: "nope" } },
        }), "tool_choice", /no tool is named 'nope'/, `${tag}: unknown function`);
        await refused(client.chat.completions.create({
            model: "m", messages: [{ role: "user", content: "x" }], tool_choice: "required",
        }), "tool_choice", /no 'tools'/, `${tag}: required without tools`);
    } finally {
        server.kill("SIGTERM");
    }
}

for (const model of models) {
    try {
        await testModel(model);
    } catch (e) {
        check(false, `${model}: ${e.stack || e}`);
    }
}
console.log(`${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);
