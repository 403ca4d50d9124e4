// SPDX-License-Identifier: MIT
// The openai npm package, unmodified, against kvsplice-http: a streamed
// chat completion, a streamed completion (of one prompt and of two) and a
// whole chat completion;
// the models listed and retrieved one by one.
// Prints one JSON line of what came back; exits 1 on any error.
//   NODE_PATH=DIR/node_modules node openai_client.cjs BASE_URL MODEL
const fs = require('fs');
const path = require('path');
const { OpenAI } = require('openai');

async function main() {
	const [baseURL, model] = process.argv.slice(2);
	const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'unused', maxRetries: 0 });
	// its package.json is not exported: read it from beside the entry point
	const pkg = path.join(path.dirname(require.resolve('openai')), 'package.json');
	const out = { version: JSON.parse(fs.readFileSync(pkg, 'utf8')).version };
	const messages = [
		{ role: 'system', content: 'You are the kvsplice test. Answer in a few words.' },
		{ role: 'user', content: 'Say something.' },
	];

	let stream = await client.chat.completions.create({
		model, messages, max_tokens: 12, temperature: 0, stream: true,
	});
	out.chat = { text: '', chunks: 0, finish: null };
	for await (const ev of stream) {
		out.chat.chunks++;
		out.chat.text += ev.choices[0]?.delta?.content ?? '';
		out.chat.finish = ev.choices[0]?.finish_reason ?? out.chat.finish;
	}

	stream = await client.completions.create({
		model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true,
	});
	out.completion = { text: '', chunks: 0, finish: null };
	for await (const ev of stream) {
		out.completion.chunks++;
		out.completion.text += ev.choices[0]?.text ?? '';
		out.completion.finish = ev.choices[0]?.finish_reason ?? out.completion.finish;
	}

	// A prompt array, streamed: one completion a prompt (llama.cpp writes
	// `data: null` between them, which the client yields as null).
	stream = await client.completions.create({
		model, prompt: ['Once upon a time', 'The river'], max_tokens: 4, temperature: 0,
		stream: true,
	});
	out.array = { finished: [], nulls: 0 };
	for await (const ev of stream) {
		if (ev === null) {
			out.array.nulls++;
			continue;
		}
		for (const c of ev.choices ?? [])
			if (c.finish_reason)
				out.array.finished.push(c.index);
	}

	const whole = await client.chat.completions.create({ model, messages, max_tokens: 12 });
	out.whole = {
		text: whole.choices[0].message.content,
		finish: whole.choices[0].finish_reason,
		completion_tokens: whole.usage?.completion_tokens,
	};

	// models.retrieve: GET /v1/models/NAME (a name with a slash goes
	// percent-encoded); an unknown one is OpenAI's 404 model_not_found.
	out.models = (await client.models.list()).data.map((m) => m.id);
	out.retrieved = [];
	for (const id of out.models)
		out.retrieved.push((await client.models.retrieve(id)).id);
	try {
		await client.models.retrieve('no-such-model');
		out.unknown = 'found';
	} catch (e) {
		out.unknown = { status: e.status, code: e.code ?? null };
	}

	try {
		await client.chat.completions.create({ model, messages: [] });
		out.bad = 'accepted';
	} catch (e) {
		out.bad = { status: e.status, type: e.type ?? e.error?.type, param: e.param ?? null };
	}
	console.log(JSON.stringify(out));
}

main().catch((e) => {
	console.error('openai_client:', e.status ?? '', e.message);
	process.exit(1);
});
