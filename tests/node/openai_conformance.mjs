// The official OpenAI Node client against moex serve (tests/cli_serve_node.sh):
// the fields moex implements parse as the client expects, and refused fields
// come back as the client's BadRequestError naming them.
// Usage: node openai_conformance.mjs BASE_URL THINKING_BASE_URL (a server of a
// model that thinks: tests/serve_think_vocab.py)
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.argv[2], apiKey: 'test-key', maxRetries: 0, timeout: 120000 });
let failures = 0;
function check(cond, what) {
  console.log((cond ? 'ok: ' : 'FAIL: ') + what);
  if (!cond) failures++;
}
const messages = [{ role: 'user', content: 'Hello' }];

// Chat, logprobs in the chat shape.
const r = await client.chat.completions.create({ model: 'x', messages, max_tokens: 6, temperature: 0, logprobs: true,
  top_logprobs: 2 });
const lp = r.choices[0].logprobs.content;
check(r.object === 'chat.completion' && lp.length > 0 && lp.every((e) => typeof e.token === 'string' &&
  e.logprob <= 0 && Array.isArray(e.bytes) && e.top_logprobs.length === 2),
  'chat logprobs: token, logprob, bytes, top_logprobs');
check(lp.map((e) => e.token).join('') === r.choices[0].message.content, 'the tokens spell the content');

// n = 3: three distinct choices, non-streamed and streamed.
const n3 = await client.chat.completions.create({ model: 'x', messages, max_tokens: 8, n: 3, seed: 11 });
check(n3.choices.length === 3 && new Set(n3.choices.map((c) => c.message.content)).size === 3,
  'n = 3: three distinct choices');
const stream = await client.chat.completions.create({ model: 'x', messages, max_tokens: 8, n: 3, seed: 11, stream: true,
  stream_options: { include_usage: true } });
const texts = ['', '', ''];
let usage = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) texts[c.index] += c.delta.content || '';
  if (chunk.usage) usage = chunk.usage;
}
check(texts.join('|') === n3.choices.map((c) => c.message.content).join('|'), 'n = 3 streamed equals it');
check(usage && usage.completion_tokens === n3.usage.completion_tokens, 'streamed usage (stream_options)');

// Completions, logprobs in the completions shape, echo.
const c = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 6, temperature: 0,
  logprobs: 2 });
const cl = c.choices[0].logprobs;
check(cl.tokens.length === cl.token_logprobs.length && cl.top_logprobs.length === cl.tokens.length &&
  cl.text_offset.length === cl.tokens.length, 'completions logprobs: tokens, token_logprobs, top_logprobs, text_offset');
const e = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 4, echo: true, seed: 2 });
check(e.choices[0].text.startsWith('Once upon a time'), 'echo');

// An unseeded request says its seed; the seed repeats it.
const u = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8 });
const again = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 8, seed: u.seed });
check(typeof u.seed === 'number' && again.choices[0].text === u.choices[0].text, 'the drawn seed is given back and repeats');

// Penalties, logit_bias, user, max_completion_tokens.
const p = await client.chat.completions.create({ model: 'x', messages, max_completion_tokens: 4, presence_penalty: 1,
  frequency_penalty: 0.5, logit_bias: { 259: 5 }, user: 'node' });
check(p.usage.completion_tokens <= 4, 'penalties, logit_bias, user, max_completion_tokens');

// reasoning_format: refused when unknown (reasoning_content itself needs a model that thinks).
for (const [field, value] of [['audio', { voice: 'alloy', format: 'wav' }], ['functions', [{ name: 'f' }]],
  ['prediction', { type: 'content', content: 'x' }], ['reasoning_effort', 'low'], ['store', true]]) {
  try {
    await client.chat.completions.create({ model: 'x', messages, max_tokens: 2, [field]: value });
    check(false, `'${field}' refused`);
  } catch (err) {
    check(err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === field,
      `'${field}': the client's BadRequestError naming it (${err.message})`);
  }
}
try {
  await client.completions.create({ model: 'x', prompt: 'x', max_tokens: 2, suffix: 'end' });
  check(false, "'suffix' refused");
} catch (err) {
  check(err.status === 400 && err.param === 'suffix', "'suffix': 400 naming it");
}

// A body over --max-body (1 MiB): the client sees the 413, not a broken pipe.
for (const size of [1.5 * 2 ** 20, 4 * 2 ** 20]) {
  try {
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x'.repeat(size) }] });
    check(false, `a ${size}-byte body refused`);
  } catch (err) {
    check(err.status === 413, `a ${size}-byte body: the client sees 413 (${err.status} ${err.message.slice(0, 60)})`);
  }
}

// reasoning_content streamed, as the client passes it through in deltas.
const thinker = new OpenAI({ baseURL: process.argv[3], apiKey: 'test-key', maxRetries: 0, timeout: 120000 });
const close = (await (await fetch(process.argv[3].replace(/\/v1$/, '/tokenize'), { method: 'POST',
  headers: { Authorization: 'Bearer test-key', 'Content-Type': 'application/json' },
  body: JSON.stringify({ content: '</think>' }) })).json()).tokens[0];
const thinking = { model: 'x', messages, max_tokens: 40, seed: 3, temperature: 1, logit_bias: { [close]: 4 } };
const whole = await thinker.chat.completions.create(thinking);
let reasoning = '', answer = '';
for await (const chunk of await thinker.chat.completions.create({ ...thinking, stream: true })) {
  const d = chunk.choices[0] ? chunk.choices[0].delta : {};
  reasoning += d.reasoning_content || '';
  answer += d.content || '';
}
check(reasoning.length > 0 && reasoning === whole.choices[0].message.reasoning_content &&
  answer === whole.choices[0].message.content, 'reasoning_content streamed through the client, then content');

// The models list and one model.
const models = await client.models.list();
const id = models.data[0].id;
const one = await client.models.retrieve(id);
check(one.id === id, 'models.list and models.retrieve');

console.log(failures ? `openai_conformance: ${failures} failed` : 'openai_conformance: all passed');
process.exit(failures ? 1 : 0);
