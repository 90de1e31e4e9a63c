#!/usr/bin/env node
// tools/golden-kv.mjs REFDIR MODEL.gguf PROMPTS.json OUT.jsonl TYPE_K TYPE_V
//
// Reference generations with a quantized KV cache: llama.cpp (the pinned
// node-llama-cpp in REFDIR, CPU, 2 threads) with its type_k/type_v context
// parameters set, in the format of ../shared/golden/*.jsonl (README section
// 3): each prompt tokenized as llama.cpp's completion does, fed one token
// at a time (the one-token path), then 48 greedy steps with the top-5 raw
// logits of each. Everything else is the golden data's setting (context
// 1024, one sequence, flash attention as llama.cpp resolves it), so that
// with f16/f16 this writes the shared golden file byte for byte
// (tests/engine/golden-kv.sh checks that first).
//
// Types by ggml's names: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const TYPES = {f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, bf16: 30};
const STEPS = 48;

const [refDir, modelPath, promptsPath, outPath, tk, tv] = process.argv.slice(2);
if (!outPath || !(tk in TYPES) || !(tv in TYPES)) {
    console.error("usage: golden-kv.mjs REFDIR MODEL.gguf PROMPTS.json OUT.jsonl TYPE_K TYPE_V");
    process.exit(2);
}
const lib = path.join(path.resolve(refDir), "node_modules/node-llama-cpp/dist/index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(lib).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: path.resolve(modelPath), gpuLayers: 0});
const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const f32 = (x) => Math.fround(x);

// common_tokenize(add_special = true, parse_special = true)
function promptTokens(text) {
    const toks = Array.from(model.tokenize(text, true));
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null)
        toks.unshift(model.tokens.bos);
    if (model.tokens.shouldAppendEosToken && model.tokens.eos != null)
        toks.push(model.tokens.eos);
    return toks;
}

// the five largest, ties towards the lower id (llama.cpp's greedy choice)
function top5(logits) {
    const arr = Array.from(logits.entries());
    arr.sort((a, b) => (b[1] - a[1]) || (a[0] - b[0]));
    return arr.slice(0, 5);
}

const lines = [];
for (const prompt of JSON.parse(fs.readFileSync(promptsPath, "utf8"))) {
    const context = await model.createContext({
        contextSize: 1024, batchSize: 1024, sequences: 1, threads: 2,
        experimentalKvCacheKeyType: TYPES[tk], experimentalKvCacheValueType: TYPES[tv]
    });
    const seq = context.getSequence();
    const ptoks = promptTokens(prompt);
    const want = {generateNext: {logits: true, token: true, options: {temperature: 0}}};
    for (const t of ptoks.slice(0, -1))
        await seq.controlledEvaluate([t]);
    let input = [[ptoks[ptoks.length - 1], want]];
    const tokens = [], tops = [];
    let minMargin = Infinity;
    for (let step = 0; step < STEPS; step++) {
        const res = await seq.controlledEvaluate(input);
        const logits = res[input.length - 1].next.logits;
        if (logits.size !== nVocab)
            throw new Error(`expected ${nVocab} logits, got ${logits.size}`);
        const top = top5(logits);
        const margin = f32(top[0][1]) - f32(top[1][1]);
        if (margin < minMargin) minMargin = margin;
        tokens.push(top[0][0]);
        tops.push(top.map(([id, l]) => [id, Number(f32(l).toPrecision(9))]));
        input = [[top[0][0], want]];
    }
    lines.push(JSON.stringify({
        model: path.basename(modelPath), prompt, prompt_tokens: ptoks, tokens,
        text: model.detokenize(tokens, false, ptoks), top5: tops,
        min_margin: Number(minMargin.toPrecision(6))
    }));
    await context.dispose();
}
fs.writeFileSync(outPath, lines.join("\n") + "\n");
await model.dispose();
await llama.dispose();
