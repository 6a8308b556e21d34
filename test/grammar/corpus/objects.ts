// properties / required / additionalProperties.
import type { Case } from "./case.ts";

export const objects: Case[] = [
  {
    name: "all required",
    schema: {
      type: "object",
      properties: { a: { type: "string" }, b: { type: "integer" } },
      required: ["a", "b"],
      additionalProperties: false,
    },
    valid: [{ a: "x", b: 1 }],
    invalid: [{ a: "x" }, { b: 1 }, {}, { a: "x", b: 1, c: 2 }, { a: 1, b: 1 }],
    stricter: [{ b: 1, a: "x" }],
  },
  {
    name: "all optional",
    schema: {
      type: "object",
      properties: { a: { type: "string" }, b: { type: "integer" }, c: { type: "boolean" } },
      additionalProperties: false,
    },
    valid: [{}, { a: "x" }, { b: 2 }, { c: true }, { a: "x", c: false }, { a: "", b: 0, c: true }, { b: 1, c: true }],
    invalid: [{ d: 1 }, { a: 1 }],
  },
  {
    name: "mixed required and optional",
    schema: {
      type: "object",
      properties: {
        id: { type: "integer" },
        name: { type: "string" },
        note: { type: "string" },
        tags: { type: "array", items: { type: "string" } },
      },
      required: ["id", "tags"],
    },
    valid: [
      { id: 1, tags: [] },
      { id: 1, name: "n", tags: ["a"] },
      { id: 2, name: "n", note: "z", tags: ["a", "b"] },
      { id: 3, note: "z", tags: [] },
    ],
    invalid: [{ id: 1 }, { tags: [] }, { id: "1", tags: [] }],
    stricter: [{ id: 1, tags: [], extra: true }],
  },
  {
    name: "required first optional later",
    schema: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, required: ["y"] },
    valid: [{ y: 1 }, { x: 0, y: 1 }],
    invalid: [{ x: 1 }, {}],
  },
  {
    name: "additionalProperties true",
    schema: { type: "object", properties: { a: { type: "integer" } }, additionalProperties: true },
    valid: [{}, { a: 1 }, { a: 1, b: "x", c: [1, { d: null }] }, { z: true }],
    invalid: [{ a: "1" }, { a: 1.5, z: 2 }],
  },
  {
    name: "additionalProperties schema",
    schema: {
      type: "object",
      properties: { name: { type: "string" } },
      required: ["name"],
      additionalProperties: { type: "number" },
    },
    valid: [{ name: "x" }, { name: "x", score: 1.5, rank: 2 }, { name: "x", 'n"ame': 3 }],
    invalid: [{ name: "x", score: "high" }, { score: 1 }],
  },
  {
    name: "extra keys cannot spell a declared key",
    schema: { type: "object", properties: { a: { type: "integer" } }, additionalProperties: { type: "string" } },
    valid: [{ a: 1, b: "x" }, { ab: "x" }, { "": "empty key" }],
    invalid: [{ a: "x" }],
    invalidText: ['{"a":1,"a":"x"}', '{"\\u0061":"x"}', '{"b":"x","a":"y"}'],
  },
  {
    name: "additionalProperties only",
    schema: { type: "object", additionalProperties: { type: "integer", minimum: 0 } },
    valid: [{}, { a: 1, b: 2 }],
    invalid: [{ a: -1 }, { a: "x" }],
  },
  {
    name: "additionalProperties false, no properties",
    schema: { type: "object", additionalProperties: false },
    valid: [{}],
    invalid: [{ a: 1 }],
  },
  {
    name: "open objects option",
    options: { additionalProperties: true },
    schema: { type: "object", properties: { a: { type: "integer" } }, required: ["a"] },
    valid: [{ a: 1 }, { a: 1, b: "anything", c: [1] }],
    invalid: [{ b: 1 }, { a: "x" }],
  },
  {
    name: "required without properties",
    schema: { type: "object", required: ["token"] },
    valid: [{ token: "x" }, { token: 1, other: 2 }],
    invalid: [{}, { other: 2 }],
  },
  {
    name: "property schema false",
    schema: { type: "object", properties: { a: { type: "integer" }, secret: false }, additionalProperties: true },
    valid: [{ a: 1 }, { b: 2 }],
    invalid: [{ secret: 1 }, { a: 1, secret: null }],
  },
  {
    name: "property schema true",
    schema: {
      type: "object",
      properties: { any: true, n: { type: "null" } },
      required: ["any"],
      additionalProperties: false,
    },
    valid: [{ any: 1 }, { any: { deep: [1] }, n: null }],
    invalid: [{}, { any: 1, n: 0 }],
  },
  {
    name: "keys needing escapes",
    schema: {
      type: "object",
      properties: {
        'with "quote"': { type: "integer" },
        "back\\slash": { type: "integer" },
        "new\nline": { type: "integer" },
        "ünï😀": { type: "integer" },
      },
      additionalProperties: false,
    },
    valid: [{ 'with "quote"': 1, "back\\slash": 2, "new\nline": 3, "ünï😀": 4 }, { "new\nline": 3 }],
    invalid: [{ "with 'quote'": 1 }],
  },
  {
    name: "nested objects",
    schema: {
      type: "object",
      properties: {
        user: {
          type: "object",
          properties: {
            name: { type: "string" },
            address: {
              type: "object",
              properties: { city: { type: "string" }, zip: { type: "string", pattern: "^\\d{5}$" } },
              required: ["city"],
              additionalProperties: false,
            },
          },
          required: ["name", "address"],
          additionalProperties: false,
        },
      },
      required: ["user"],
      additionalProperties: false,
    },
    valid: [
      { user: { name: "a", address: { city: "b" } } },
      { user: { name: "a", address: { city: "b", zip: "12345" } } },
    ],
    invalid: [
      { user: { name: "a", address: { zip: "12345" } } },
      { user: { name: "a", address: { city: "b", zip: "1234" } } },
      { user: { name: "a" } },
    ],
  },
  {
    name: "empty properties object",
    schema: { type: "object", properties: {} },
    valid: [{}, { a: 1 }],
    invalid: [[]],
  },
  {
    name: "many optional properties (linear grammar)",
    schema: {
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, { type: "integer" }])),
      additionalProperties: false,
    },
    valid: [
      {},
      { p0: 1 },
      { p39: 1 },
      { p3: 1, p17: 2, p38: 3 },
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, i])),
    ],
    invalid: [{ p40: 1 }, { p1: "x" }],
  },
  {
    name: "properties with shared prefixes",
    schema: {
      type: "object",
      properties: { a: { const: 1 }, ab: { const: 2 }, abc: { const: 3 } },
      additionalProperties: false,
    },
    valid: [{ a: 1, ab: 2, abc: 3 }, { abc: 3 }, { a: 1, abc: 3 }],
    invalid: [{ a: 2 }, { abcd: 3 }],
  },
  {
    name: "allOf merges object parts",
    schema: {
      allOf: [
        { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
        { properties: { b: { type: "integer" } }, required: ["b"] },
      ],
    },
    valid: [{ a: "x", b: 1 }],
    invalid: [{ a: "x" }, { b: 1 }, { a: 1, b: 1 }],
  },
  {
    name: "allOf with closed part keeps other keys out",
    schema: {
      allOf: [
        { type: "object", properties: { a: { type: "string" } }, additionalProperties: false },
        { properties: { b: { type: "integer" } } },
      ],
    },
    valid: [{}, { a: "x" }],
    invalid: [{ b: 1 }, { a: "x", b: 1 }],
  },
  {
    name: "allOf same property intersects",
    schema: {
      allOf: [
        { type: "object", properties: { n: { type: "integer", minimum: 0 } }, required: ["n"] },
        { properties: { n: { maximum: 9 } } },
      ],
    },
    valid: [{ n: 0 }, { n: 9 }],
    invalid: [{ n: 10 }, { n: -1 }],
  },
  {
    name: "allOf additionalProperties schema applies to other part's property",
    schema: {
      allOf: [
        { type: "object", properties: { a: {} }, additionalProperties: { type: "string" } },
        { properties: { b: { minLength: 2 } }, required: ["b"] },
      ],
    },
    valid: [{ b: "xy" }, { a: 1, b: "xyz" }],
    invalid: [{ b: 5 }, { b: "x" }],
  },
];
