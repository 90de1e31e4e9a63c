#!/usr/bin/env node
// tools/golden-logprobs.mjs REFDIR MODEL.gguf GOLDEN.jsonl N_PROMPTS STEPS OUT.jsonl
//
// Reference log-probabilities: the softmax of llama.cpp's full logits
// (the pinned node-llama-cpp in REFDIR, CPU, 2 threads, context 1024, the
// one-token path: the golden data's settings, ../shared/README.md section
// 1), teacher-forced over the first N_PROMPTS lines of a golden file: for
// each of the first STEPS answer steps, the log-softmax of the golden
// token and of the best five tokens (ties: lower id), computed in double
// precision from the float logits. One line per prompt:
// {"prompt", "tokens", "steps": [{"token": [id, logprob], "top": [[id,
// logprob], ...]}]}.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [refDir, modelPath, goldenPath, nPrompts, nSteps, outPath] = process.argv.slice(2);
if (!outPath) {
    console.error("usage: golden-logprobs.mjs REFDIR MODEL.gguf GOLDEN.jsonl N_PROMPTS STEPS OUT.jsonl");
    process.exit(2);
}
const lib = path.join(path.resolve(refDir), "node_modules/node-llama-cpp/dist/index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(lib).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: path.resolve(modelPath), gpuLayers: 0});
const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;

const golden = fs.readFileSync(goldenPath, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const lines = [];
for (const g of golden.slice(0, Number(nPrompts))) {
    const context = await model.createContext({
        contextSize: 1024, batchSize: 1024, sequences: 1, threads: 2
    });
    const seq = context.getSequence();
    const want = {generateNext: {logits: true}};
    for (const t of g.prompt_tokens.slice(0, -1))
        await seq.controlledEvaluate([t]);
    let input = g.prompt_tokens[g.prompt_tokens.length - 1];
    const steps = [];
    for (let s = 0; s < Number(nSteps); s++) {
        const res = await seq.controlledEvaluate([[input, want]]);
        const logits = res[0].next.logits;
        if (logits.size !== nVocab)
            throw new Error(`expected ${nVocab} logits, got ${logits.size}`);
        let max = -Infinity;
        for (const v of logits.values())
            max = Math.max(max, Math.fround(v));
        let sum = 0;
        for (const v of logits.values())
            sum += Math.exp(Math.fround(v) - max);
        const lse = max + Math.log(sum);
        const top = Array.from(logits.entries())
            .sort((a, b) => (b[1] - a[1]) || (a[0] - b[0])).slice(0, 5)
            .map(([id, v]) => [id, Number((Math.fround(v) - lse).toPrecision(9))]);
        const tok = g.tokens[s];
        steps.push({token: [tok, Number((Math.fround(logits.get(tok)) - lse).toPrecision(9))], top});
        input = tok;
    }
    lines.push(JSON.stringify({prompt: g.prompt, tokens: g.tokens.slice(0, Number(nSteps)), steps}));
    await context.dispose();
}
fs.writeFileSync(outPath, lines.join("\n") + "\n");
await model.dispose();
await llama.dispose();
