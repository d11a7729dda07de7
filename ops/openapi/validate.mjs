// validate.mjs - check a node's answers against the OpenAPI document.
//
// Usage: node validate.mjs NODE_MODULES_PARENT DOC CASES
//   NODE_MODULES_PARENT  the folder holding node_modules (build/openapi)
//   DOC                  worker/openapi/openapi.json
//   CASES                JSON lines, one answer each:
//                        {"path", "method", "status", "contentType", "body"}
//                        path as the document spells it ("/api/v1/ephemeral/
//                        queues/{queue}/depth"), body the raw answer text.
//
// Each answer must be a status the document lists for that path and
// method, in a media type it lists for that status, and (for JSON) a body
// its schema accepts: ajv with JSON Schema 2020-12, the dialect of OpenAPI
// 3.1, the whole document added as one schema so every $ref resolves as
// the document means it.  Prints a line per answer that fails and a count;
// exits 1 when any fails (test/integration/test_openapi.c shows the lines).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [base, docPath, casesPath] = process.argv.slice(2);
if (!casesPath) {
    console.error("usage: node validate.mjs NODE_MODULES_PARENT DOC CASES");
    process.exit(2);
}
const require = createRequire(path.resolve(base) + "/");
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats");

const doc = JSON.parse(readFileSync(docPath, "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(doc, "openapi.json");

// pointer - a JSON pointer token: "~" and "/" escaped (RFC 6901).
const pointer = (s) => s.replace(/~/g, "~0").replace(/\//g, "~1");

// resolve - follow a local $ref of the document: [object, its pointer].
function resolve(obj, ptr) {
    while (obj && typeof obj.$ref === "string" && obj.$ref.startsWith("#/")) {
        ptr = obj.$ref.slice(1);
        obj = ptr.split("/").slice(1).reduce(
            (o, t) => o[t.replace(/~1/g, "/").replace(/~0/g, "~")], doc);
    }
    return [obj, ptr];
}

// An answer that matches prints a line only with OPENAPI_VERBOSE=1.
const ok = (line) => { if (process.env.OPENAPI_VERBOSE === "1") console.log(line); };
let failed = 0;
const lines = readFileSync(casesPath, "utf8").split("\n").filter((l) => l);
for (const line of lines) {
    const c = JSON.parse(line);
    const what = `${c.method.toUpperCase()} ${c.path} ${c.status}`;
    const fail = (why) => {
        failed++;
        console.log(`FAIL ${what}: ${why}\n     body: ${c.body.slice(0, 300)}`);
    };
    const op = doc.paths[c.path]?.[c.method];
    if (!op) { fail("the document has no such operation"); continue; }
    let ptr = `/paths/${pointer(c.path)}/${c.method}/responses/${c.status}`;
    let res;
    [res, ptr] = resolve(op.responses[String(c.status)], ptr);
    if (!res) { fail("the document lists no such status for it"); continue; }
    const type = c.contentType.split(";")[0].trim().toLowerCase();
    const media = res.content?.[type];
    if (!media) {
        fail(`content type ${c.contentType} is not one of ${Object.keys(res.content || {}).join(", ")}`);
        continue;
    }
    if (type !== "application/json") { ok(`ok   ${what} ${type}`); continue; }
    let body;
    try { body = JSON.parse(c.body); } catch (e) { fail(`not JSON: ${e.message}`); continue; }
    const ref = `openapi.json#${ptr}/content/${pointer(type)}/schema`;
    const validate = ajv.getSchema(ref);
    if (!validate) { fail(`no schema at ${ref}`); continue; }
    if (!validate(body)) { fail(ajv.errorsText(validate.errors)); continue; }
    ok(`ok   ${what}`);
}
console.log(`${lines.length - failed} of ${lines.length} answers match the document`);
process.exit(failed ? 1 : 0);
