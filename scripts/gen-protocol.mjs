// Generates labextension/src/protocol.ts from the protocol's JSON Schema
// (jupyter_ci/schema/protocol.schema.json), then formats it with the repo's
// prettier settings.
//
//   node scripts/gen-protocol.mjs [--schema PATH] [--out PATH]
//       write the TypeScript types (what `jlpm build:protocol` runs)
//   node scripts/gen-protocol.mjs --check [--schema PATH] [--out PATH]
//       generate in memory and exit 1 when the file at --out differs
//
// The generator understands the part of JSON Schema the protocol uses and
// refuses anything else, so a new keyword in the schema is an error here
// rather than a silently wrong type:
//
// - an object definition (`type: object`, `properties`, or `allOf` of `$ref`s)
//   becomes `export interface I<Name>` (the repo's interface naming), extending
//   the interfaces of its `allOf` references; properties not `required` are
//   optional; `additionalProperties: true` adds a `[key: string]: unknown`
//   index signature; otherwise the interface is closed, which is what
//   `additionalProperties: false` / `unevaluatedProperties: false` say (the
//   base definitions have neither, but they are only ever used through
//   definitions that close them);
// - any other definition (a `oneOf` union, an `enum`) becomes
//   `export type <Name>`; `const` becomes a literal type, `enum` a union of
//   literals, `type: [..., "null"]` adds `| null`, `integer` is `number`, an
//   object without properties is `Record<string, unknown>`;
// - validation-only keywords (minimum, minLength, ...) have no TypeScript
//   counterpart and are noted in the doc comments;
// - `IProtocolDefinitions` maps every definition's schema name to its type;
// - the values Python and TypeScript must agree on become constants too: a
//   `const` definition gives `<NAME>` (its value), a
//   string `enum` definition gives `<NAME>_VALUES` (its values, in order), a
//   `oneOf` of `const`s with a `title` each (or of `$ref`s to such
//   definitions) gives `<NAME>_TITLES` (the words shown for each value), and
//   a string definition with a `pattern` gives `<NAME>` (a RegExp).
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';

import {
  describe,
  doc,
  isPlainObject,
  joinSentences,
  key,
  literal,
  SchemaError,
  union,
  upperSnake
} from './protocol-text.mjs';

export const ROOT = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..'
);
export const DEFAULT_SCHEMA = path.join(
  ROOT,
  'jupyter_ci/schema/protocol.schema.json'
);
export const DEFAULT_OUT = path.join(ROOT, 'labextension/src/protocol.ts');

const HEADER = `// generated from jupyter_ci/schema/protocol.schema.json by \`jlpm build:protocol\`; do not edit.
//
// The TypeScript types of jupyter-ci's protocol. Object definitions are
// interfaces named I + the definition's name (\`IStateEvent\` for
// \`StateEvent\`); unions and enums keep the definition's name (\`RunEvent\`,
// \`RunState\`). The values both sides must agree on are constants at the end
// (\`CELL_STATUS_TITLES\`, \`CI_CELL_PATTERN\`, ...). \`jlpm check:protocol\`
// fails when this file is out of date.
`;

// Keywords that only constrain values, or document them: no TypeScript type.
const ANNOTATIONS = new Set([
  'description',
  'title',
  'examples',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'pattern'
]);
const TYPE_KEYWORDS = new Set([
  '$ref',
  'const',
  'enum',
  'oneOf',
  'type',
  'items',
  'properties',
  'required',
  'additionalProperties',
  'unevaluatedProperties',
  'allOf'
]);
const ROOT_KEYWORDS = new Set([
  '$schema',
  '$id',
  '$defs',
  'title',
  'description'
]);
const PRIMITIVES = {
  string: 'string',
  integer: 'number',
  number: 'number',
  boolean: 'boolean',
  null: 'null'
};

/**
 * Generate the TypeScript source (formatted) for a parsed protocol schema.
 */
export async function generate(schema) {
  const source = new Generator(schema).module();
  // Always the repo's prettier settings, wherever the output goes.
  const options = (await prettier.resolveConfig(DEFAULT_OUT)) ?? {};
  return prettier.format(source, {
    ...options,
    parser: 'typescript',
    filepath: DEFAULT_OUT
  });
}

class Generator {
  constructor(schema) {
    if (typeof schema !== 'object' || schema === null || !schema.$defs) {
      throw new SchemaError('the schema has no $defs');
    }
    for (const keyword of Object.keys(schema)) {
      if (!ROOT_KEYWORDS.has(keyword)) {
        throw new SchemaError(`unsupported keyword "${keyword}" at the root`);
      }
    }
    this.schema = schema;
    this.defs = schema.$defs;
  }

  isObject(node) {
    return (
      node.type === 'object' ||
      node.properties !== undefined ||
      node.allOf !== undefined
    );
  }

  /** The TypeScript name of a definition. */
  nameOf(name) {
    if (!Object.hasOwn(this.defs, name)) {
      throw new SchemaError(`no definition "${name}"`);
    }
    const def = this.defs[name];
    return this.isObject(def) ? `I${name}` : name;
  }

  refName(ref, where) {
    const match = /^#\/\$defs\/([^/]+)$/.exec(ref);
    if (!match) {
      throw new SchemaError(`unsupported $ref "${ref}" at ${where}`);
    }
    return match[1];
  }

  checkKeywords(node, where) {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) {
      throw new SchemaError(`expected a schema object at ${where}`);
    }
    for (const keyword of Object.keys(node)) {
      if (!TYPE_KEYWORDS.has(keyword) && !ANNOTATIONS.has(keyword)) {
        throw new SchemaError(`unsupported keyword "${keyword}" at ${where}`);
      }
    }
  }

  /** The TypeScript type expression of a schema node. */
  type(node, where) {
    this.checkKeywords(node, where);
    if (node.$ref !== undefined) {
      return this.nameOf(this.refName(node.$ref, where));
    }
    if (node.const !== undefined) {
      return literal(node.const, where);
    }
    if (node.enum !== undefined) {
      return union(node.enum.map(value => literal(value, where)));
    }
    if (node.oneOf !== undefined) {
      return union(
        node.oneOf.map((member, i) => this.type(member, `${where}/oneOf/${i}`))
      );
    }
    if (node.allOf !== undefined) {
      throw new SchemaError(
        `allOf is supported only in definitions, not at ${where}`
      );
    }
    if (node.type === undefined) {
      return node.properties !== undefined
        ? this.inlineObject(node, where)
        : 'unknown';
    }
    const types = Array.isArray(node.type) ? node.type : [node.type];
    return union(
      types.map(type => {
        if (type in PRIMITIVES) {
          return PRIMITIVES[type];
        }
        if (type === 'array') {
          const items =
            node.items === undefined
              ? 'unknown'
              : this.type(node.items, `${where}/items`);
          return /[|&]/.test(items) ? `(${items})[]` : `${items}[]`;
        }
        if (type === 'object') {
          return node.properties === undefined
            ? 'Record<string, unknown>'
            : this.inlineObject(node, where);
        }
        throw new SchemaError(`unsupported type "${type}" at ${where}`);
      })
    );
  }

  /** The members (properties, index signature) of an object schema. */
  members(node, where, inherited = new Set()) {
    const properties = node.properties ?? {};
    const required = new Set(node.required ?? []);
    for (const name of required) {
      if (!(name in properties) && !inherited.has(name)) {
        throw new SchemaError(
          `"${name}" is required but not a property at ${where}`
        );
      }
    }
    const lines = [];
    for (const [name, property] of Object.entries(properties)) {
      const at = `${where}/properties/${name}`;
      lines.push(
        doc(describe(property), '  '),
        `  ${key(name)}${required.has(name) ? '' : '?'}: ${this.type(property, at)};`
      );
    }
    const extra = node.additionalProperties;
    if (
      extra === true ||
      (isPlainObject(extra) && !Object.keys(extra).length)
    ) {
      lines.push('  [key: string]: unknown;');
    } else if (extra !== undefined && extra !== false) {
      throw new SchemaError(
        `only additionalProperties true or false is supported, at ${where}`
      );
    }
    if (![undefined, false].includes(node.unevaluatedProperties)) {
      throw new SchemaError(
        `only unevaluatedProperties false is supported, at ${where}`
      );
    }
    return lines.filter(line => line !== '');
  }

  inlineObject(node, where) {
    return `{\n${this.members(node, where).join('\n')}\n}`;
  }

  /** The names of all properties of an object definition, bases included. */
  allProperties(name) {
    const def = this.defs[name];
    const names = new Set(Object.keys(def.properties ?? {}));
    for (const base of def.allOf ?? []) {
      for (const inherited of this.allProperties(
        this.refName(base.$ref, name)
      )) {
        names.add(inherited);
      }
    }
    return names;
  }

  /** The const value of a required property, looking through bases. */
  constOf(name, property) {
    const def = this.defs[name];
    if (!this.isObject(def)) {
      return undefined;
    }
    const own = def.properties?.[property];
    if (own !== undefined) {
      return (def.required ?? []).includes(property) ? own.const : undefined;
    }
    for (const base of def.allOf ?? []) {
      const value = this.constOf(this.refName(base.$ref, name), property);
      if (value !== undefined) {
        return value;
      }
    }
    return undefined;
  }

  /** The property whose const tells a union's members apart, if any. */
  discriminant(node, where) {
    if (!node.oneOf.every(member => member.$ref !== undefined)) {
      return undefined;
    }
    const members = node.oneOf.map(member => this.refName(member.$ref, where));
    for (const property of this.allProperties(members[0])) {
      const values = members.map(member => this.constOf(member, property));
      if (
        values.every(value => value !== undefined) &&
        new Set(values.map(value => JSON.stringify(value))).size ===
          values.length
      ) {
        return property;
      }
    }
    return undefined;
  }

  definition(name) {
    const def = this.defs[name];
    const where = `#/$defs/${name}`;
    this.checkKeywords(def, where);
    const tsName = this.nameOf(name);
    if (tsName !== name) {
      const bases = (def.allOf ?? []).map((part, i) => {
        const at = `${where}/allOf/${i}`;
        this.checkKeywords(part, at);
        if (part.$ref === undefined || Object.keys(part).length !== 1) {
          throw new SchemaError(`allOf may only list $refs, at ${at}`);
        }
        const base = this.refName(part.$ref, at);
        if (this.nameOf(base) === base) {
          throw new SchemaError(`allOf must refer to objects, at ${at}`);
        }
        return base;
      });
      if (def.type !== undefined && def.type !== 'object') {
        throw new SchemaError(`an object definition has type "${def.type}"`);
      }
      const inherited = new Set(bases.flatMap(b => [...this.allProperties(b)]));
      const extendsClause = bases.length
        ? ` extends ${bases.map(b => this.nameOf(b)).join(', ')}`
        : '';
      return [
        doc(def.description, ''),
        `export interface ${tsName}${extendsClause} {`,
        ...this.members(def, where, inherited),
        '}'
      ];
    }
    let description = def.description;
    if (def.oneOf !== undefined) {
      const tag = this.discriminant(def, where);
      if (tag !== undefined) {
        description = joinSentences(
          description,
          `Discriminated by \`${tag}\`.`
        );
      }
    }
    return [
      doc(description, ''),
      `export type ${tsName} = ${this.type(def, where)};`
    ];
  }

  /** The `const` members of a oneOf with a title each, looking through $refs. */
  titles(node, where) {
    if (!Array.isArray(node.oneOf)) {
      return undefined;
    }
    const entries = [];
    for (const [i, member] of node.oneOf.entries()) {
      if (member.$ref !== undefined) {
        const inner = this.titles(
          this.defs[this.refName(member.$ref, where)],
          `${where}/oneOf/${i}`
        );
        if (inner === undefined) {
          return undefined;
        }
        entries.push(...inner);
      } else if (
        typeof member.const === 'string' &&
        typeof member.title === 'string'
      ) {
        entries.push([member.const, member.title]);
      } else {
        return undefined;
      }
    }
    return entries;
  }

  /** The constants of a definition (see the comment at the top). */
  values(name) {
    const def = this.defs[name];
    const where = `#/$defs/${name}`;
    const constant = upperSnake(name);
    if (
      def.const !== undefined &&
      Object.keys(def).every(k => ['const', 'description'].includes(k))
    ) {
      return [
        doc(def.description, ''),
        `export const ${constant}: ${name} = ${literal(def.const, `#/$defs/${name}`)};`
      ];
    }
    if (def.type === 'string' && Array.isArray(def.enum)) {
      return [
        doc(`The values of \`${name}\`, in the schema's order.`, ''),
        `export const ${constant}_VALUES: readonly ${name}[] = ${JSON.stringify(def.enum)};`
      ];
    }
    if (def.type === 'string' && typeof def.pattern === 'string') {
      return [
        doc(`\`${name}\` as a regular expression.`, ''),
        `export const ${constant} = new RegExp(${JSON.stringify(def.pattern)});`
      ];
    }
    const titles = this.titles(def, where);
    if (titles !== undefined) {
      const body = titles
        .map(([value, title]) => `  ${key(value)}: ${JSON.stringify(title)},`)
        .join('\n');
      return [
        doc(`The words shown for each value of \`${name}\` (its titles).`, ''),
        `export const ${constant}_TITLES: Record<${name}, string> = {\n${body}\n};`
      ];
    }
    return [];
  }

  module() {
    const names = Object.keys(this.defs);
    const blocks = names.map(name =>
      this.definition(name)
        .filter(line => line !== '')
        .join('\n')
    );
    const map = [
      doc(
        [
          'Every definition of the protocol schema by its name there:',
          "`IProtocolDefinitions['StateEvent']` is `IStateEvent`.",
          this.schema.description ? `\n\n${this.schema.description}` : ''
        ].join(' '),
        ''
      ),
      'export interface IProtocolDefinitions {',
      ...names.map(name => `  ${key(name)}: ${this.nameOf(name)};`),
      '}'
    ];
    const constants = names
      .map(name => this.values(name).join('\n'))
      .filter(block => block !== '');
    return `${HEADER}\n${blocks.join('\n\n')}\n\n${map.join('\n')}\n\n${constants.join('\n\n')}\n`;
  }
}

function parseArgs(argv) {
  const args = { schema: DEFAULT_SCHEMA, out: DEFAULT_OUT, check: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--check') {
      args.check = true;
    } else if ((arg === '--schema' || arg === '--out') && i + 1 < argv.length) {
      args[arg.slice(2)] = path.resolve(argv[++i]);
    } else {
      throw new SchemaError(
        `unknown argument "${arg}"; usage: gen-protocol.mjs [--check] [--schema PATH] [--out PATH]`
      );
    }
  }
  return args;
}

/** A path as the user would name it: relative to the repo when inside it. */
export function shown(file) {
  const relative = path.relative(ROOT, file);
  return relative.startsWith('..') || path.isAbsolute(relative)
    ? file
    : relative.split(path.sep).join('/');
}

/** The first line where two texts differ, for the error message. */
function firstDifference(expected, actual) {
  const want = expected.split('\n');
  const have = actual.split('\n');
  for (let i = 0; i < Math.max(want.length, have.length); i++) {
    if (want[i] !== have[i]) {
      return (
        `  first difference at line ${i + 1}:\n` +
        `    generated: ${want[i] ?? '(end of file)'}\n` +
        `    committed: ${have[i] ?? '(end of file)'}`
      );
    }
  }
  return '';
}

async function main(argv) {
  const args = parseArgs(argv);
  const schema = JSON.parse(await readFile(args.schema, 'utf8'));
  const source = await generate(schema);
  if (!args.check) {
    await writeFile(args.out, source);
    console.log(`wrote ${shown(args.out)} from ${shown(args.schema)}`);
    return 0;
  }
  let committed;
  try {
    committed = await readFile(args.out, 'utf8');
  } catch {
    committed = '';
  }
  if (committed !== source) {
    console.error(
      `${shown(args.out)} is out of date with ${shown(args.schema)}: run jlpm build:protocol\n` +
        firstDifference(source, committed)
    );
    return 1;
  }
  console.log(`${shown(args.out)} is up to date with ${shown(args.schema)}`);
  return 0;
}

if (
  process.argv[1] &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof SchemaError)) {
      throw error;
    }
    console.error(`gen-protocol: ${error.message}`);
    process.exitCode = 2;
  }
}
