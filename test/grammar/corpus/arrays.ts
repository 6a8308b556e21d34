// items / prefixItems / minItems / maxItems.
import type { Case } from "./case.ts";

export const arrays: Case[] = [
  {
    name: "items",
    schema: { type: "array", items: { type: "integer" } },
    valid: [[], [1], [1, 2, 3]],
    invalid: [[1, "2"], ["a"], [1.5]],
  },
  {
    name: "minItems",
    schema: { type: "array", items: { type: "string" }, minItems: 2 },
    valid: [
      ["a", "b"],
      ["a", "b", "c"],
    ],
    invalid: [[], ["a"]],
  },
  {
    name: "maxItems",
    schema: { type: "array", items: { type: "boolean" }, maxItems: 2 },
    valid: [[], [true], [true, false]],
    invalid: [[true, true, true]],
  },
  {
    name: "min and max items",
    schema: { type: "array", items: { type: "null" }, minItems: 1, maxItems: 3 },
    valid: [[null], [null, null, null]],
    invalid: [[], [null, null, null, null]],
  },
  {
    name: "exact count",
    schema: { type: "array", minItems: 3, maxItems: 3 },
    valid: [[1, "a", null]],
    invalid: [
      [1, 2],
      [1, 2, 3, 4],
    ],
  },
  { name: "maxItems 0", schema: { type: "array", maxItems: 0 }, valid: [[]], invalid: [[1]] },
  {
    name: "large maxItems",
    schema: { type: "array", items: { const: 0 }, maxItems: 1200 },
    valid: [[], Array(1200).fill(0)],
    invalid: [Array(1201).fill(0)],
  },
  { name: "items false", schema: { type: "array", items: false }, valid: [[]], invalid: [[1]] },
  {
    name: "prefixItems",
    schema: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] },
    valid: [[], ["a"], ["a", 1], ["a", 1, true, null]],
    invalid: [[1], ["a", "b"]],
  },
  {
    name: "prefixItems closed",
    schema: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], items: false },
    valid: [[], ["a"], ["a", 1]],
    invalid: [["a", 1, 2]],
  },
  {
    name: "prefixItems with items",
    schema: { type: "array", prefixItems: [{ const: "head" }], items: { type: "number" }, minItems: 2 },
    valid: [
      ["head", 1],
      ["head", 1, 2.5],
    ],
    invalid: [["head"], ["tail", 1], ["head", "x"]],
  },
  {
    name: "prefixItems required tuple",
    schema: { type: "array", prefixItems: [{ type: "number" }, { type: "number" }], minItems: 2, maxItems: 2 },
    valid: [
      [1, 2],
      [0.5, -3],
    ],
    invalid: [[1], [1, 2, 3], ["1", 2]],
  },
  {
    name: "prefixItems minItems beyond prefix",
    schema: { type: "array", prefixItems: [{ type: "boolean" }], items: { type: "string" }, minItems: 3, maxItems: 4 },
    valid: [
      [true, "a", "b"],
      [false, "a", "b", "c"],
    ],
    invalid: [
      [true, "a"],
      [true, "a", "b", "c", "d"],
      ["a", "b", "c"],
    ],
  },
  {
    name: "draft-07 tuple items",
    draft: "07",
    schema: { type: "array", items: [{ type: "string" }, { type: "boolean" }], additionalItems: false },
    valid: [[], ["a"], ["a", true]],
    invalid: [["a", true, 1], [1]],
  },
  {
    name: "draft-07 tuple with additionalItems schema",
    draft: "07",
    schema: { type: "array", items: [{ type: "string" }], additionalItems: { type: "integer" } },
    valid: [["a"], ["a", 1, 2]],
    invalid: [["a", "b"]],
  },
  {
    name: "array of objects",
    schema: {
      type: "array",
      items: {
        type: "object",
        properties: { id: { type: "integer" }, ok: { type: "boolean" } },
        required: ["id"],
        additionalProperties: false,
      },
      minItems: 1,
    },
    valid: [[{ id: 1 }], [{ id: 1, ok: true }, { id: 2 }]],
    invalid: [[], [{ ok: true }], [{ id: 1, x: 1 }]],
  },
  {
    name: "nested arrays",
    schema: {
      type: "array",
      items: { type: "array", items: { type: "integer", minimum: 0, maximum: 9 }, minItems: 2, maxItems: 2 },
    },
    valid: [
      [],
      [[0, 9]],
      [
        [1, 2],
        [3, 4],
      ],
    ],
    invalid: [[[1]], [[1, 10]], [1]],
  },
  {
    name: "array of enums",
    schema: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 3 },
    valid: [
      ["a", "a"],
      ["c", "b", "a"],
    ],
    invalid: [["d"], ["a", "b", "c", "a"]],
  },
  {
    name: "allOf merges arrays",
    schema: {
      allOf: [
        { type: "array", items: { type: "integer" } },
        { items: { minimum: 0 }, maxItems: 2 },
      ],
    },
    valid: [[], [0, 5]],
    invalid: [[-1], [1, 2, 3], [1.5]],
  },
  {
    name: "allOf prefix vs items",
    schema: {
      allOf: [{ type: "array", prefixItems: [{ type: "integer" }] }, { items: { type: "number", maximum: 10 } }],
    },
    valid: [[], [1], [1, 2.5]],
    invalid: [[11], [1.5], [1, 11]],
  },
];
