// The hostile schemas and grammars of the hardening reproductions
// (minLength 1e308, 10,000 optional properties, allOf fan-out over $refs, a
// 100,000-value enum, the exponential GBNF chain, a 10,000-rule chain), and
// realistic large schemas that must keep compiling. Shared by the grammar
// tests and the HTTP tests.

/** `{"type":"string","minLength":1e308}`: 150 bytes that once grew the daemon past 17 GiB. */
export const hugeMinLength = { type: "string", minLength: 1e308 };

/** 10,000 optional string properties (~300 KB). */
export function manyOptional(n = 10_000): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) properties[`v${i}`] = { type: "string" };
  return { type: "object", properties };
}

/** `levels` levels of allOf, each over two $refs to the next level (~3 KB for 25): 2^levels merges. */
export function allOfFanout(levels = 25): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++)
    defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] };
  defs[`d${levels}`] = { type: "string" };
  return { $defs: defs, $ref: "#/$defs/d0" };
}

/**
 * The same fan-out through object properties instead of allOf: each level's
 * two properties are $refs with a sibling keyword (so they are inlined, not
 * shared as one rule), 2^levels subschemas to compile.
 */
export function propertyFanout(levels = 25): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  const next = (i: number) => ({ $ref: `#/$defs/d${i + 1}`, type: "object" });
  for (let i = 0; i < levels; i++)
    defs[`d${i}`] = { type: "object", properties: { a: next(i), b: next(i) }, required: ["a", "b"] };
  defs[`d${levels}`] = { type: "object", properties: { x: { type: "string" } } };
  return { $defs: defs, $ref: "#/$defs/d0" };
}

/** An enum of `n` strings. */
export function bigEnum(n = 100_000): Record<string, unknown> {
  return { enum: Array.from({ length: n }, (_, i) => `value-${i}`) };
}

/** `rN ::= rN+1 | rN+1`, `levels` deep (~600 bytes for 30): 2^levels parse stacks for one character. */
export function exponentialGbnf(levels = 30): string {
  const rules = Array.from({ length: levels }, (_, i) => `r${i} ::= r${i + 1} | r${i + 1}`);
  return `${["root ::= r0", ...rules, `r${levels} ::= "a"`].join("\n")}\n`;
}

/** A chain of `n` rules, each starting with the next (`tail`: nothing after it; otherwise a literal). */
export function chainGbnf(n = 10_000, tail = false): string {
  const rules = Array.from({ length: n }, (_, i) => `r${i} ::= r${i + 1}${tail ? "" : ' "x"'}`);
  return `${["root ::= r0", ...rules, `r${n} ::= "a"`].join("\n")}\n`;
}

/**
 * A wide tool schema: `n` properties of mixed kinds (strings with lengths and
 * patterns, bounded integers, enums, arrays of objects, nested objects), a
 * third of them required. The shape of large agent tool sets, inflated.
 */
export function wideToolSchema(n = 400): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  const kinds = [
    () => ({ type: "string", description: "free text" }),
    () => ({ type: "string", maxLength: 200 + (n % 7) }),
    () => ({ type: "integer", minimum: 0, maximum: 10_000 }),
    () => ({ type: "string", enum: Array.from({ length: 40 }, (_, k) => `option_${k}`) }),
    () => ({
      type: "array",
      items: {
        type: "object",
        properties: { path: { type: "string" }, line: { type: "integer", minimum: 1 } },
        required: ["path"],
      },
      maxItems: 50,
    }),
    () => ({
      type: "object",
      properties: {
        enabled: { type: "boolean" },
        level: { enum: ["low", "mid", "high"] },
        note: { type: ["string", "null"] },
      },
    }),
    () => ({ type: "string", pattern: "^[a-z][a-z0-9_]{0,31}$" }),
    () => ({ type: "number", minimum: -1, maximum: 1 }),
  ];
  for (let i = 0; i < n; i++) properties[`field_${i}`] = kinds[i % kinds.length]!();
  const required = Object.keys(properties).filter((_, i) => i % 3 === 0);
  return { type: "object", properties, required, additionalProperties: false };
}

/** A coding agent's tool set, written for these tests: the sizes and shapes such tools have. */
export const agentTools: { name: string; parameters: Record<string, unknown> }[] = [
  {
    name: "run_command",
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", description: "The command to run" },
        timeout: { type: "number", description: "Milliseconds, at most 600000", maximum: 600_000 },
        description: { type: "string", description: "What the command does, in a few words" },
        background: { type: "boolean" },
      },
      required: ["command"],
      additionalProperties: false,
    },
  },
  {
    name: "read_file",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string" },
        offset: { type: "integer", minimum: 0 },
        limit: { type: "integer", minimum: 1 },
      },
      required: ["path"],
      additionalProperties: false,
    },
  },
  {
    name: "edit_file",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string" },
        edits: {
          type: "array",
          minItems: 1,
          items: {
            type: "object",
            properties: {
              old_string: { type: "string" },
              new_string: { type: "string" },
              replace_all: { type: "boolean", default: false },
            },
            required: ["old_string", "new_string"],
            additionalProperties: false,
          },
        },
      },
      required: ["path", "edits"],
      additionalProperties: false,
    },
  },
  {
    name: "search",
    parameters: {
      type: "object",
      properties: {
        pattern: { type: "string" },
        path: { type: "string" },
        glob: { type: "string" },
        output_mode: { type: "string", enum: ["content", "files_with_matches", "count"] },
        "-A": { type: "number" },
        "-B": { type: "number" },
        "-C": { type: "number" },
        "-i": { type: "boolean" },
        "-n": { type: "boolean" },
        type: { type: "string" },
        head_limit: { type: "number" },
        multiline: { type: "boolean" },
      },
      required: ["pattern"],
      additionalProperties: false,
    },
  },
  {
    name: "todo_write",
    parameters: {
      type: "object",
      properties: {
        todos: {
          type: "array",
          items: {
            type: "object",
            properties: {
              content: { type: "string", minLength: 1 },
              status: { type: "string", enum: ["pending", "in_progress", "completed"] },
              priority: { type: "string", enum: ["high", "medium", "low"] },
              id: { type: "string" },
            },
            required: ["content", "status", "priority", "id"],
            additionalProperties: false,
          },
        },
      },
      required: ["todos"],
      additionalProperties: false,
    },
  },
  {
    name: "fetch_url",
    parameters: {
      type: "object",
      properties: { url: { type: "string", format: "uri" }, prompt: { type: "string" } },
      required: ["url", "prompt"],
      additionalProperties: false,
    },
  },
  {
    name: "delegate",
    parameters: {
      type: "object",
      properties: {
        description: { type: "string", maxLength: 80 },
        prompt: { type: "string" },
        agent: { type: "string", enum: ["general", "explore", "review"] },
      },
      required: ["description", "prompt"],
      additionalProperties: false,
    },
  },
];
