#!/usr/bin/env node
// Cold time-to-first-token of llama.cpp (node-llama-cpp 3.22.1, CPU), the
// reference for tools/bench-load.sh:
//
//   LLAMA_REF_DIR=/work/ref node tools/bench/ttft.mjs MODEL.gguf "prompt" [threads]
//
// Prints one JSON line: {"init_ms", "load_ms", "ttft_ms", "token",
// "prompt_tokens"}. init_ms is getLlama() (finding and loading the native
// library, node-llama-cpp's own cost); ttft_ms runs from after it to the
// first generated token: load (llama.cpp mmaps the file; pages come in as
// the first pass touches them), context creation, the prompt, one token.
// load_ms is the part up to a ready context.
// The caller drops the page cache first. LLAMA_REF_DIR is the folder
// holding node_modules/node-llama-cpp (default: ./ref, then ../ref).
import fs from "node:fs";
import path from "node:path";
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";

function refModule() {
    const dirs = [process.env.LLAMA_REF_DIR, "ref", "../ref"].filter(Boolean);
    for (const d of dirs) {
        const req = createRequire(path.resolve(d, "package.json"));
        try {
            return req.resolve("node-llama-cpp");
        } catch (e) {
            // try the next folder
        }
    }
    throw new Error(`node-llama-cpp not found in ${dirs.join(", ")} (set LLAMA_REF_DIR)`);
}

const [modelPath, prompt = "Once upon a time", threadsArg] = process.argv.slice(2);
if (!modelPath || !fs.existsSync(modelPath)) {
    console.error("usage: ttft.mjs MODEL.gguf [PROMPT] [THREADS]");
    process.exit(2);
}
const threads = Number(threadsArg || 0) || undefined;
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(refModule()).href);

const tInit = performance.now();
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const t0 = performance.now();
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 256, threads});
const tLoad = performance.now();
const seq = context.getSequence();
const toks = Array.from(model.tokenize(prompt, true));
if (model.tokens.shouldPrependBosToken && model.tokens.bos != null)
    toks.unshift(model.tokens.bos);
let first = null;
for await (const t of seq.evaluate(toks, {temperature: 0})) {
    first = t;
    break;
}
const tFirst = performance.now();
console.log(JSON.stringify({
    init_ms: +(t0 - tInit).toFixed(1),
    load_ms: +(tLoad - t0).toFixed(1),
    ttft_ms: +(tFirst - t0).toFixed(1),
    token: first,
    prompt_tokens: toks.length,
}));
await context.dispose();
await model.dispose();
