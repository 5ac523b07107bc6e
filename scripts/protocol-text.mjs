// The text pieces of the TypeScript that scripts/gen-protocol.mjs writes:
// literals, unions, property keys, constant names and the doc comments (with
// the constraints a type cannot carry). One job: turning schema values into
// TypeScript text; the generator decides what to write.

/** The generated file's line width, for doc comments. */
const WIDTH = 80;

/** A schema the generator does not understand (exit code 2). */
export class SchemaError extends Error {}

export function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function literal(value, where) {
  if (
    typeof value === 'string' ||
    typeof value === 'number' ||
    typeof value === 'boolean' ||
    value === null
  ) {
    return JSON.stringify(value);
  }
  throw new SchemaError(
    `only scalar const/enum values are supported, at ${where}`
  );
}

/** `CICellPattern` → `CI_CELL_PATTERN`, `CellStatus` → `CELL_STATUS`. */
export function upperSnake(name) {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .toUpperCase();
}

export function union(types) {
  return [...new Set(types)].join(' | ');
}

export function key(name) {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name);
}

export function joinSentences(...parts) {
  return parts.filter(Boolean).join(' ');
}

/** A property's description with its constraints that types cannot carry. */
export function describe(node) {
  const types = Array.isArray(node.type) ? node.type : [node.type];
  const notes = [];
  if (types.includes('integer')) {
    notes.push('an integer');
  }
  if (node.minimum !== undefined) {
    notes.push(`at least ${node.minimum}`);
  }
  if (node.maximum !== undefined) {
    notes.push(`at most ${node.maximum}`);
  }
  if (node.minLength !== undefined) {
    notes.push(
      `at least ${node.minLength} character${node.minLength === 1 ? '' : 's'}`
    );
  }
  if (node.maxLength !== undefined) {
    notes.push(`at most ${node.maxLength} characters`);
  }
  if (node.pattern !== undefined) {
    notes.push(`matching \`${node.pattern}\``);
  }
  const constraint = notes.length
    ? `${notes[0][0].toUpperCase()}${notes.join(', ').slice(1)}.`
    : undefined;
  return joinSentences(node.description, constraint);
}

/** A JSDoc comment, wrapped to the line width, or '' for no text. */
export function doc(text, indent) {
  if (!text) {
    return '';
  }
  const width = WIDTH - indent.length - 3;
  const lines = [];
  for (const paragraph of text.replaceAll('*/', '*\\/').split('\n\n')) {
    if (lines.length) {
      lines.push('');
    }
    let line = '';
    for (const word of paragraph.trim().split(/\s+/)) {
      if (line && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else {
        line = line ? `${line} ${word}` : word;
      }
    }
    lines.push(line);
  }
  return [
    `${indent}/**`,
    ...lines.map(l => (l ? `${indent} * ${l}` : `${indent} *`)),
    `${indent} */`
  ].join('\n');
}
