#!/usr/bin/env node
// tools/template-ref.mjs REFDIR TEMPLATES_DIR CONVERSATIONS.json OUT.jsonl
//
// Reference renderings of chat templates: every TEMPLATES_DIR/*.jinja
// (llama.cpp's models/templates, from the source node-llama-cpp ships)
// rendered by @huggingface/jinja as the pinned node-llama-cpp installs it
// in REFDIR, for every conversation of CONVERSATIONS.json, one JSON line
// each:
//
//   {"template": "Qwen-Qwen3-0.6B", "conversation": "turns",
//    "status": "ok", "text": "..."}
//   {..., "status": "raise", "message": "..."}  raise_exception() was called
//   {..., "status": "error", "message": "..."}  @huggingface/jinja failed
//
// A conversation is the template's context: messages, add_generation_prompt,
// and optionally enable_thinking and tools; bos_token "<s>" and eos_token
// "</s>" are added. The clock is pinned (2026-02-03 04:05:06 UTC) so that
// strftime_now() gives the same text every time; tests/engine/template.sh
// passes the same instant to llmfs.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const NOW = Date.UTC(2026, 1, 3, 4, 5, 6);
const [refDir, tmplDir, convPath, outPath] = process.argv.slice(2);
if (!outPath) {
    console.error("usage: template-ref.mjs REFDIR TEMPLATES_DIR CONVERSATIONS.json OUT.jsonl");
    process.exit(2);
}
process.env.TZ = "UTC";
const RealDate = Date;
globalThis.Date = class extends RealDate {
    constructor(...args) { super(...(args.length ? args : [NOW])); }
    static now() { return NOW; }
};

const lib = path.join(path.resolve(refDir), "node_modules/@huggingface/jinja/dist/index.js");
const {Template, Environment} = await import(pathToFileURL(lib).href);

// Tell a raise_exception() apart from the interpreter's own errors.
class Raised extends Error {}
const set = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
    if (name === "raise_exception")
        value = (msg) => { throw new Raised(String(msg)); };
    return set.call(this, name, value);
};

const conversations = JSON.parse(fs.readFileSync(convPath, "utf8"));
const names = fs.readdirSync(tmplDir).filter((f) => f.endsWith(".jinja")).sort();
const lines = [];
for (const file of names) {
    const template = file.slice(0, -".jinja".length);
    const source = fs.readFileSync(path.join(tmplDir, file), "utf8");
    let parsed = null, parseError = null;
    try {
        parsed = new Template(source);
    } catch (e) {
        parseError = String(e.message || e);
    }
    for (const conv of conversations) {
        const line = {template, conversation: conv.name};
        if (parseError) {
            Object.assign(line, {status: "error", message: parseError});
        } else {
            const context = {...conv, bos_token: "<s>", eos_token: "</s>"};
            delete context.name;
            try {
                Object.assign(line, {status: "ok", text: parsed.render(context)});
            } catch (e) {
                Object.assign(line, {status: e instanceof Raised ? "raise" : "error",
                                     message: String(e.message || e)});
            }
        }
        lines.push(JSON.stringify(line));
    }
}
fs.writeFileSync(outPath, lines.join("\n") + "\n");
