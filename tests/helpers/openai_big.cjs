// SPDX-License-Identifier: MIT
// The openai npm package, unmodified: one chat completion whose message is
// MB megabytes, sent as the library sends it. Prints one JSON line: what
// the library reported, {"ok":true} or {"error":CLASS,"status":N} (a
// connection error has no status: the response never reached it).
//   NODE_PATH=DIR/node_modules node openai_big.cjs BASE_URL MODEL MB
const { OpenAI } = require('openai');

async function main() {
	const [baseURL, model, mb] = process.argv.slice(2);
	const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'unused', maxRetries: 0 });
	const content = 'a'.repeat(Math.round(parseFloat(mb) * 1048576));
	try {
		await client.chat.completions.create({
			model, messages: [{ role: 'user', content }], max_tokens: 2,
		});
		console.log(JSON.stringify({ ok: true }));
	} catch (e) {
		console.log(JSON.stringify({ error: e.constructor.name, status: e.status ?? null }));
	}
}
main();
