#!/usr/bin/env node
// tools/golden-grammar.mjs REFDIR MODEL.gguf CASES.json OUT.jsonl
//
// Reference answers under a grammar: llama.cpp (the pinned node-llama-cpp
// in REFDIR, CPU, 2 threads, context 1024: the golden data's settings,
// ../shared/README.md section 1) decoding greedily under a GBNF grammar.
// Each prompt is tokenized as llama.cpp's completion does and fed one
// token at a time (the one-token path); then, for up to 48 steps, the
// next token is the best-scoring token that llama.cpp's grammar sampler
// accepts (llama_sampler_apply on the grammar, through node-llama-cpp's
// canBeNextTokenForGrammarEvaluationState), accepted into the grammar
// state, and fed back; an end-of-generation token ends the answer.
//
// The margin of a step is the chosen token's logit minus the next allowed
// token's (searched among the best 4096 after it; past that it is a lower
// bound). A second context then lets node-llama-cpp's own sampler decode
// under the same grammar (LlamaContextSequence.evaluate with a
// LlamaGrammarEvaluationState) and the script fails unless both agree:
// the reference is llama.cpp's constrained greedy decoding.
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
const SEARCH = 4096;

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
const sampler = llama._bindings.AddonSampler;

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

// greedy under the grammar, deciding each step from the raw logits
async function decide(grammar, ptoks) {
    const [context, seq] = await newSequence();
    const state = new LlamaGrammarEvaluationState({model, grammar});
    const want = {generateNext: {logits: true}};
    for (const t of ptoks.slice(0, -1))
        await seq.controlledEvaluate([t]);
    let input = ptoks[ptoks.length - 1];
    const tokens = [], margins = [];
    for (let step = 0; step < STEPS; step++) {
        const res = await seq.controlledEvaluate([[input, want]]);
        const logits = res[0].next.logits;
        if (logits.size !== nVocab)
            throw new Error(`expected ${nVocab} logits, got ${logits.size}`);
        const order = Array.from(logits.entries());
        order.sort((a, b) => (b[1] - a[1]) || (a[0] - b[0]));
        let first = -1, second = -1;
        for (let i = 0; i < order.length; i++) {
            if (first >= 0 && i > first + SEARCH)
                break;
            if (!sampler.canBeNextTokenForGrammarEvaluationState(state._state, order[i][0]))
                continue;
            if (first >= 0) {
                second = i;
                break;
            }
            first = i;
        }
        if (first < 0)
            throw new Error("the grammar allows no token");
        const f32 = Math.fround;
        const other = second >= 0 ? order[second][1] : order[Math.min(order.length - 1, first + SEARCH)][1];
        margins.push(Number((f32(order[first][1]) - f32(other)).toPrecision(6)));
        const tok = order[first][0];
        tokens.push(tok);
        if (model.isEogToken(tok))
            break;
        sampler.acceptGrammarEvaluationStateToken(state._state, tok);
        input = tok;
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
    for await (const out of seq.evaluate([ptoks[ptoks.length - 1]],
        {temperature: 0, grammarEvaluationState: state, yieldEogToken: true})) {
        tokens.push(out.token);
        if (model.isEogToken(out.token) || tokens.length >= STEPS)
            break;
    }
    await context.dispose();
    return tokens;
}

const lines = [];
for (const c of JSON.parse(fs.readFileSync(casesPath, "utf8"))) {
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
