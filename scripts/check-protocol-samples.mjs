// Checks labextension/test/protocol-samples.ts against the protocol:
//
// 1. compiles it with tsc (labextension/test/tsconfig.json) into a temporary
//    directory: every valid sample must type-check as its definition's
//    generated type, and every `@ts-expect-error` must be needed;
// 2. validates the compiled samples against the JSON Schema with Ajv
//    (draft 2020-12): valid samples must be accepted, invalid ones refused,
//    and every definition of the schema must accept at least one valid sample;
// 3. checks that the schema agrees with itself where two definitions say the
//    same thing (the handoff's version and mime type).
//
//   node scripts/check-protocol-samples.mjs [--schema PATH]
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { isDeepStrictEqual } from 'node:util';
import { pathToFileURL } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';

import { DEFAULT_SCHEMA, ROOT, shown } from './gen-protocol.mjs';

const TSCONFIG = path.join(ROOT, 'labextension/test/tsconfig.json');

function parseArgs(argv) {
  if (argv.length === 0) {
    return DEFAULT_SCHEMA;
  }
  if (argv.length === 2 && argv[0] === '--schema') {
    return path.resolve(argv[1]);
  }
  throw new Error(
    `unknown arguments ${argv.join(' ')}; usage: check-protocol-samples.mjs [--schema PATH]`
  );
}

/** Type-check and compile the samples; the directory holding the output. */
async function compile() {
  const outDir = await mkdtemp(path.join(os.tmpdir(), 'jupyter-ci-protocol-'));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const result = spawnSync(
    process.execPath,
    [tsc, '-p', TSCONFIG, '--outDir', outDir, '--pretty', 'false'],
    { cwd: ROOT, encoding: 'utf8' }
  );
  if (result.status !== 0) {
    await rm(outDir, { recursive: true, force: true });
    throw new Error(
      `the protocol samples do not type-check (tsc -p ${shown(TSCONFIG)}):\n` +
        `${result.stdout}${result.stderr}`
    );
  }
  // tsc emits ES modules; tell Node so.
  await writeFile(path.join(outDir, 'package.json'), '{"type": "module"}\n');
  return outDir;
}

function describeErrors(errors) {
  return (errors ?? [])
    .map(error => `${error.instancePath || '/'} ${error.message}`)
    .join('; ');
}

function check(schema, samples) {
  const problems = [];
  // Strict about unknown keywords and formats, but not Ajv's own typing lint
  // (strictTypes), which wants `type: "object"` next to every `properties`
  // (the event and call definitions get theirs through allOf) and refuses
  // `type: [..., "null"]`: both are plain draft 2020-12.
  const ajv = new Ajv2020({
    allErrors: true,
    strict: true,
    strictTypes: false
  });
  ajv.addSchema(schema);
  const names = Object.keys(schema.$defs);
  const validators = Object.fromEntries(
    names.map(name => [name, ajv.getSchema(`${schema.$id}#/$defs/${name}`)])
  );
  const covered = new Set();
  // Why a message is refused; for a union, by the member it comes closest to.
  const why = (name, message) => {
    const members = (schema.$defs[name].oneOf ?? [])
      .map(member => member.$ref?.split('/').pop())
      .filter(member => validators[member]);
    if (!members.length) {
      validators[name](message);
      return describeErrors(validators[name].errors);
    }
    const reasons = members.map(member => {
      validators[member](message);
      return { member, errors: validators[member].errors ?? [] };
    });
    reasons.sort((a, b) => a.errors.length - b.errors.length);
    return `closest to ${reasons[0].member}: ${describeErrors(reasons[0].errors)}`;
  };

  samples.VALID.forEach((sample, i) => {
    const label = `valid sample #${i + 1} (${sample.definition})`;
    if (
      !isDeepStrictEqual(
        JSON.parse(JSON.stringify(sample.message)),
        sample.message
      )
    ) {
      problems.push(`${label} does not survive a JSON round trip`);
    }
    const validate = validators[sample.definition];
    if (!validate) {
      problems.push(`${label}: no such definition in the schema`);
    } else if (!validate(sample.message)) {
      problems.push(
        `${label} is refused: ${why(sample.definition, sample.message)}`
      );
    }
    for (const name of names) {
      if (validators[name](sample.message)) {
        covered.add(name);
      }
    }
  });
  samples.INVALID.forEach((sample, i) => {
    const validate = validators[sample.definition];
    const label = `invalid sample #${i + 1} (${sample.definition}, ${sample.why})`;
    if (!validate) {
      problems.push(`${label}: no such definition in the schema`);
    } else if (validate(sample.message)) {
      problems.push(`${label} is accepted by the schema`);
    }
  });
  const uncovered = names.filter(name => !covered.has(name));
  if (uncovered.length) {
    problems.push(
      `no valid sample is accepted by these definitions: ${uncovered.join(', ')}`
    );
  }

  const version = schema.$defs.Handoff?.properties?.version?.const;
  const protocolVersion = schema.$defs.ProtocolVersion?.const;
  if (protocolVersion !== version) {
    problems.push(
      `ProtocolVersion is ${protocolVersion}, the schema's Handoff version is ${version}`
    );
  }
  const mime = schema.$defs.HandoffMime?.const;
  if (!mime || !schema.$defs.Handoff?.description?.includes(mime)) {
    problems.push(
      `the schema's Handoff description does not mention HandoffMime (${mime})`
    );
  }
  return { problems, counts: [samples.VALID.length, samples.INVALID.length] };
}

async function main(argv) {
  const schemaPath = parseArgs(argv);
  const schema = JSON.parse(await readFile(schemaPath, 'utf8'));
  const outDir = await compile();
  try {
    const load = file => import(pathToFileURL(path.join(outDir, file)).href);
    const samples = await load('test/protocol-samples.js');
    const { problems, counts } = check(schema, samples);
    if (problems.length) {
      console.error(
        `labextension/test/protocol-samples.ts disagrees with ${shown(schemaPath)}:\n` +
          problems.map(problem => `  - ${problem}`).join('\n')
      );
      return 1;
    }
    console.log(
      `protocol samples: ${counts[0]} valid and ${counts[1]} invalid messages ` +
        `type-check and validate as expected against ${shown(schemaPath)}`
    );
    return 0;
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  console.error(`check-protocol-samples: ${error.message}`);
  process.exitCode = 1;
}
