#!/usr/bin/env node
// tools/embed-ref.mjs REFDIR TEXTS.json OUTDIR BATCH MODEL.gguf...
//
// Reference embeddings: node-llama-cpp's LlamaEmbeddingContext (the pinned
// package in REFDIR, CPU, 2 threads, context 1024) of every text of
// TEXTS.json, for each model, into OUTDIR/<model stem>.jsonl, one JSON line
// per text: {"text": ..., "tokens": n, "vector": [...]}, the floats as
// llama.cpp returns them (float32, printed with 9 significant digits).
// BATCH is the context's batch size: 1 feeds the text one token at a
// time, llama.cpp's one-token path, as the golden data was made
// (../shared/README.md, section 1); "full" lets it take the text in one
// batch, node-llama-cpp's default.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [refDir, textsPath, outDir, batch, ...models] = process.argv.slice(2);
if (!models.length) {
    console.error("usage: embed-ref.mjs REFDIR TEXTS.json OUTDIR 1|full MODEL.gguf...");
    process.exit(2);
}
const lib = path.join(path.resolve(refDir), "node_modules/node-llama-cpp/dist/index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(lib).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const options = {contextSize: 1024, threads: 2};
if (batch !== "full")
    options.batchSize = Number(batch);
const f32 = (x) => Number(Math.fround(x).toPrecision(9));
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
for (const modelPath of models) {
    const model = await llama.loadModel({modelPath: path.resolve(modelPath), gpuLayers: 0});
    const context = await model.createEmbeddingContext(options);
    const lines = [];
    for (const text of texts) {
        const e = await context.getEmbeddingFor(text);
        lines.push(JSON.stringify({text, tokens: context.calculateInputLength(text),
                                   vector: Array.from(e.vector, f32)}));
    }
    await context.dispose();
    await model.dispose();
    const stem = path.basename(modelPath, ".gguf");
    fs.writeFileSync(path.join(outDir, stem + ".jsonl"), lines.join("\n") + "\n");
}
