#!/usr/bin/env node
// tools/golden-grammar.mjs REFDIR MODEL.gguf CASES.json OUT.jsonl
//
// Reference answers under a grammar: llama.cpp (the pinned node-llama-cpp
// in REFDIR, CPU, 2 threads, context 1024: the golden data's settings,
// ../shared/README.md section 1) decoding greedily under a GBNF grammar
// (a LlamaGrammarEvaluationState: llama.cpp's grammar sampler). Each
// prompt is tokenized as llama.cpp's completion does and fed one token at
// a time (the one-token path); then up to 48 tokens are decoded one at a
// time, an end-of-generation token ending the answer.
//
// The margin of a step is the chosen token's logit minus the next allowed
// token's (from the probabilities node-llama-cpp returns after applying the
// grammar). A second context decodes again without asking for them
// (node-llama-cpp then samples first and applies the grammar only when the
// pick is not allowed, as llama.cpp's common sampler does), and the script
// fails unless both give the same tokens.
//
// CASES.json: [{"name", "prompt", "grammar": GBNF} or {"name", "prompt",
// "node_json_schema": schema}], the latter through node-llama-cpp's
// createGrammarForJsonSchema (its GBNF is written out as "grammar").
// Output, one line per case: {"name", "prompt", "prompt_tokens",
// "grammar", "tokens", "margins", "text"}.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const STEPS = 48;

const [refDir, modelPath, casesPath, outPath] = process.argv.slice(2);
if (!outPath) {
    console.error("usage: golden-grammar.mjs REFDIR MODEL.gguf CASES.json OUT.jsonl");
    process.exit(2);
}
const lib = path.join(path.resolve(refDir), "node_modules/node-llama-cpp/dist/index.js");
const {getLlama, LlamaLogLevel, LlamaGrammar, LlamaGrammarEvaluationState} =
    await import(pathToFileURL(lib).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: path.resolve(modelPath), gpuLayers: 0});
const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;

function promptTokens(text) {
    const toks = Array.from(model.tokenize(text, true));
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null)
        toks.unshift(model.tokens.bos);
    if (model.tokens.shouldAppendEosToken && model.tokens.eos != null)
        toks.push(model.tokens.eos);
    return toks;
}

async function newSequence() {
    const context = await model.createContext({
        contextSize: 1024, batchSize: 1024, sequences: 1, threads: 2
    });
    return [context, context.getSequence()];
}

// greedy under the grammar, with each step's margin: node-llama-cpp asked
// for probabilities applies the grammar to every candidate first (disallowed
// ones get probability 0), so the two best probabilities are the two best
// allowed tokens' and their log-ratio is the logit margin
async function decide(grammar, ptoks) {
    const [context, seq] = await newSequence();
    const state = new LlamaGrammarEvaluationState({model, grammar});
    for (const t of ptoks.slice(0, -1))
        await seq.controlledEvaluate([t]);
    const tokens = [], margins = [];
    for await (const out of seq.evaluateWithMetadata([ptoks[ptoks.length - 1]],
        {probabilities: true},
        {temperature: 0, grammarEvaluationState: state, yieldEogToken: true})) {
        const p = Array.from(out.probabilities.values()).sort((a, b) => b - a);
        const m = p.length > 1 && p[1] > 0 ? Math.log(p[0] / p[1]) : 1e9;
        tokens.push(out.token);
        margins.push(Number(m.toPrecision(6)));
        if (model.isEogToken(out.token) || tokens.length >= STEPS)
            break;
    }
    await context.dispose();
    return [tokens, margins];
}

// node-llama-cpp's own grammar sampling, for the cross-check
async function sample(grammar, ptoks) {
    const [context, seq] = await newSequence();
    const state = new LlamaGrammarEvaluationState({model, grammar});
    for (const t of ptoks.slice(0, -1))
        await seq.controlledEvaluate([t]);
    const tokens = [];
    for await (const token of seq.evaluate([ptoks[ptoks.length - 1]],
        {temperature: 0, grammarEvaluationState: state, yieldEogToken: true})) {
        tokens.push(token);
        if (model.isEogToken(token) || tokens.length >= STEPS)
            break;
    }
    await context.dispose();
    return tokens;
}

const lines = [];
for (const c of JSON.parse(fs.readFileSync(casesPath, "utf8"))) {
    process.stderr.write(`  ${path.basename(modelPath)}: ${c.name}\n`);
    const grammar = c.node_json_schema != null
        ? await llama.createGrammarForJsonSchema(c.node_json_schema)
        : new LlamaGrammar(llama, {grammar: c.grammar});
    const ptoks = promptTokens(c.prompt);
    const [tokens, margins] = await decide(grammar, ptoks);
    const check = await sample(grammar, ptoks);
    if (JSON.stringify(check) !== JSON.stringify(tokens))
        throw new Error(`${c.name}: node-llama-cpp sampled ${check}, the per-step decision gave ${tokens}`);
    lines.push(JSON.stringify({
        name: c.name, prompt: c.prompt, prompt_tokens: ptoks, grammar: grammar.grammar,
        tokens, margins, text: model.detokenize(tokens, false, ptoks)
    }));
}
fs.writeFileSync(outPath, lines.join("\n") + "\n");
await model.dispose();
await llama.dispose();
