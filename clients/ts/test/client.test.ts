/**
 * The TypeScript client against a real judgecal: the binary the Rust tests built
 * (JUDGECAL_BIN, default target/debug/judgecal), API keys on, embedded SQLite, a free loopback
 * port. Known answers: anchors follow y = 0.5 + 0.8·j, so 2 corrects to about 2.1 and a run
 * scored 4 everywhere reads about 3.7. The generated types must match openapi.yaml, and the
 * README's example must run as printed.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Judgecal, JudgecalError, type AnswerWarning } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..", "..");
const root = resolve(pkg, "..", "..");
const bin = process.env.JUDGECAL_BIN ?? join(root, "target", "debug", "judgecal");

let server: ChildProcess;
let work: string;
let env: NodeJS.ProcessEnv;
let jc: Judgecal;

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => done(port));
    });
  });
}

const line = (j: number) => 0.5 + 0.8 * j;

/** `n` anchors of y = 0.5 + 0.8·j plus a fixed pattern of noise (sd about 0.17), j over [1, 5]. */
function anchors(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const j = 1 + (4 * ((i * 7919) % n)) / n;
    const noise = ((i * 104_729) % 1000) / 1000 - 0.5;
    return { item_id: `a${i}`, judge_score: j, reference_score: Math.min(5, Math.max(1, line(j) + 0.6 * noise)) };
  });
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), "judgecal-ts-"));
  const port = await freePort();
  env = {
    ...process.env,
    JUDGECAL__DATABASE__URL: `sqlite://${work}/judgecal.db`,
    JUDGECAL__SERVER__BIND: `127.0.0.1:${port}`,
    JUDGECAL__LOG__LEVEL: "warn",
    JUDGECAL__JOBS__POLL_MILLIS: "50",
  };
  execFileSync(bin, ["migrate"], { env, stdio: "pipe" });
  const out = execFileSync(bin, ["keys", "create", "--scope", "admin", "--name", "ts-tests"], { env, encoding: "utf8" });
  const key = out.trim().split("\n").at(-1)!;
  server = spawn(bin, ["serve"], { env, stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {
      // not yet listening
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  env = { ...env, JUDGECAL_URL: url, JUDGECAL_API_KEY: key };
  jc = new Judgecal({ baseUrl: url, apiKey: key });
  const ack = await jc.uploadAnchors({ judge: "ChatGPT", rubric: "coherence", anchors: anchors(300) });
  assert.equal(ack.inserted, 300);
  const job = await jc.train("ChatGPT", { method: "quantile_map" });
  assert.equal(job.state, "succeeded");
});

after(() => {
  server?.kill();
  rmSync(work, { recursive: true, force: true });
});

test("corrects scores with intervals, typed, and warns outside the anchors", async () => {
  const answer = await jc.correct({ judge: "ChatGPT", rubric: "coherence", scores: [2.0, 4.0] });
  assert.equal(answer.method, "quantile_map");
  const [two, four] = answer.results;
  assert.ok(Math.abs(two.corrected - line(2)) < 0.2 && Math.abs(four.corrected - line(4)) < 0.2, JSON.stringify(answer));
  const [lo, hi] = two.predictive!;
  assert.ok(lo < two.corrected && two.corrected < hi);
  assert.deepEqual(answer.warnings, []);
  // A score past the anchors' judge scores (within one range width) is answered and warned.
  const outside = await jc.correct({ judge: "ChatGPT", rubric: "coherence", scores: [5.5] });
  const codes = outside.warnings.map((w: AnswerWarning) => w.code);
  assert.ok(codes.includes("outside_anchors"), JSON.stringify(outside.warnings));
  assert.equal(outside.results[0].outside_anchors, true);
});

test("estimates a run and compares two with known answers", async () => {
  const high = Array.from({ length: 40 }, (_, i) => ({ id: `h${i}`, score: 4.0 }));
  const low = Array.from({ length: 40 }, (_, i) => ({ id: `l${i}`, score: 2.0 }));
  const est = await jc.estimate({ judge: "ChatGPT", rubric: "coherence", items: high });
  assert.ok(est.interval[0] < line(4) + 0.15 && line(4) - 0.15 < est.interval[1], JSON.stringify(est));
  const cmp = await jc.compare({ judge: "ChatGPT", rubric: "coherence", a: { items: high }, b: { items: low } });
  assert.ok(cmp.interval[0] > 0 && Math.abs(cmp.difference - 0.8 * 2) < 0.3, JSON.stringify(cmp));
  assert.ok(cmp.p_value < 0.001);
});

test("a refused batch throws with its status, code and the row and field", async () => {
  const bad = [{ item_id: "x", judge_score: 3, reference_score: 9 }];
  await assert.rejects(jc.uploadAnchors({ judge: "ChatGPT", rubric: "coherence", anchors: bad }), (e: unknown) => {
    assert.ok(e instanceof JudgecalError);
    assert.equal(e.status, 422);
    assert.deepEqual(
      e.details.map((d) => [d.row, d.field]),
      [[1, "reference_score"]],
    );
    return true;
  });
  const unauthorised = new Judgecal({ baseUrl: env.JUDGECAL_URL, apiKey: "jc_wrong" });
  await assert.rejects(unauthorised.correct({ judge: "ChatGPT", rubric: "coherence", scores: [3] }), { status: 401 });
});

test("the generated types are openapi.yaml's", () => {
  const fresh = join(work, "schema.ts");
  execFileSync(join(pkg, "node_modules", ".bin", "openapi-typescript"), [join(root, "openapi.yaml"), "-o", fresh], {
    stdio: "pipe",
  });
  assert.equal(readFileSync(fresh, "utf8"), readFileSync(join(pkg, "src", "schema.ts"), "utf8"), "run `npm run generate`");
});

test("the README's example runs as printed", () => {
  const readme = readFileSync(join(pkg, "README.md"), "utf8");
  const example = readFileSync(join(pkg, "examples", "tour.ts"), "utf8");
  assert.ok(readme.includes(example), "README.md must show examples/tour.ts as it is");
  const out = execFileSync(process.execPath, [join(pkg, "dist", "examples", "tour.js")], { env, encoding: "utf8" });
  assert.match(out, /^2 -> 2\.\d\d \[\d\.\d\d, \d\.\d\d\]$/m);
  assert.match(out, /^run mean 3\.\d\d \[\d\.\d\d, \d\.\d\d\], warnings: (none|[a-z_]+(, [a-z_]+)*)$/m);
});
