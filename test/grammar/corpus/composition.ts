// anyOf / oneOf / allOf / $ref (nested and recursive).
import type { Case } from "./case.ts";

export const composition: Case[] = [
  {
    name: "anyOf types",
    schema: {
      anyOf: [
        { type: "string", maxLength: 2 },
        { type: "integer", minimum: 10 },
      ],
    },
    valid: ["ab", 10, 99],
    invalid: ["abc", 9, null],
  },
  {
    name: "anyOf with sibling type",
    schema: {
      type: "object",
      anyOf: [{ required: ["a"] }, { required: ["b"] }],
      properties: { a: { type: "integer" }, b: { type: "integer" } },
    },
    valid: [{ a: 1 }, { b: 2 }, { a: 1, b: 2 }],
    invalid: [{}],
  },
  {
    name: "anyOf branch contradicting siblings is dropped",
    schema: { type: "string", anyOf: [{ type: "integer" }, { maxLength: 1 }] },
    valid: ["", "a"],
    invalid: ["ab", 1],
  },
  {
    name: "anyOf nested",
    schema: { anyOf: [{ anyOf: [{ const: 1 }, { const: 2 }] }, { const: "x" }] },
    valid: [1, 2, "x"],
    invalid: [3, "y"],
  },
  {
    name: "oneOf disjoint types",
    schema: { oneOf: [{ type: "string" }, { type: "number" }, { type: "null" }] },
    valid: ["a", 1.5, null],
    invalid: [true, []],
  },
  {
    name: "oneOf disjoint consts",
    schema: { oneOf: [{ const: "a" }, { const: "b" }, { enum: ["c", "d"] }] },
    valid: ["a", "d"],
    invalid: ["e"],
  },
  {
    name: "oneOf discriminated objects",
    schema: {
      oneOf: [
        {
          type: "object",
          properties: { kind: { const: "circle" }, r: { type: "number", minimum: 0 } },
          required: ["kind", "r"],
          additionalProperties: false,
        },
        {
          type: "object",
          properties: { kind: { const: "rect" }, w: { type: "number" }, h: { type: "number" } },
          required: ["kind", "w", "h"],
          additionalProperties: false,
        },
      ],
    },
    valid: [
      { kind: "circle", r: 1 },
      { kind: "rect", w: 1, h: 2 },
    ],
    invalid: [
      { kind: "circle", w: 1, h: 2 },
      { kind: "square", r: 1 },
      { kind: "circle", r: -1 },
    ],
  },
  {
    name: "oneOf disjoint number ranges",
    schema: {
      oneOf: [
        { type: "integer", maximum: 0 },
        { type: "integer", minimum: 1 },
      ],
    },
    valid: [0, 1, -5, 7],
    invalid: [0.5, "1"],
  },
  {
    name: "oneOf required key absent from other (closed)",
    schema: {
      oneOf: [
        { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
        { type: "object", properties: { b: { type: "string" } }, required: ["b"] },
      ],
    },
    valid: [{ a: "x" }, { b: "y" }],
    invalid: [{}, { a: 1 }],
  },
  {
    name: "allOf combining type and bounds",
    schema: { allOf: [{ type: "string" }, { minLength: 2 }, { maxLength: 3 }] },
    valid: ["ab", "abc"],
    invalid: ["a", "abcd", 12],
  },
  {
    name: "allOf type intersection number/integer",
    schema: { allOf: [{ type: "number" }, { type: ["integer", "string"] }] },
    valid: [1, 0],
    invalid: [1.5, "a"],
  },
  {
    name: "allOf with anyOf inside",
    schema: { allOf: [{ type: "integer" }, { anyOf: [{ maximum: 0 }, { minimum: 100 }] }] },
    valid: [0, -3, 100, 250],
    invalid: [50, 1, 99],
  },
  {
    name: "$ref to $defs",
    schema: {
      $defs: { pos: { type: "integer", minimum: 1 } },
      type: "object",
      properties: { a: { $ref: "#/$defs/pos" }, b: { $ref: "#/$defs/pos" } },
      required: ["a"],
    },
    valid: [{ a: 1 }, { a: 2, b: 3 }],
    invalid: [{ a: 0 }, { b: 1 }],
  },
  {
    name: "$ref to definitions",
    draft: "07",
    schema: {
      definitions: { name: { type: "string", minLength: 1 } },
      type: "array",
      items: { $ref: "#/definitions/name" },
    },
    valid: [["a", "bc"]],
    invalid: [[""]],
  },
  {
    name: "$ref chain",
    schema: { $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/c" }, c: { enum: [1, 2] } }, $ref: "#/$defs/a" },
    valid: [1, 2],
    invalid: [3],
  },
  {
    name: "$ref with siblings (merged)",
    schema: {
      $defs: { base: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] } },
      $ref: "#/$defs/base",
      properties: { name: { type: "string" } },
      required: ["name"],
    },
    valid: [{ id: 1, name: "x" }],
    invalid: [{ id: 1 }, { name: "x" }],
  },
  {
    name: "$ref to root path",
    schema: {
      type: "object",
      properties: { child: { $ref: "#" }, v: { type: "integer" } },
      additionalProperties: false,
    },
    valid: [{}, { child: { child: { v: 2 } }, v: 1 }],
    invalid: [{ child: { v: "x" } }],
  },
  {
    name: "$ref escaped pointer",
    schema: {
      $defs: { "a/b": { const: "slash" }, "c~d": { const: "tilde" } },
      anyOf: [{ $ref: "#/$defs/a~1b" }, { $ref: "#/$defs/c~0d" }],
    },
    valid: ["slash", "tilde"],
    invalid: ["x"],
  },
  {
    name: "recursive tree",
    schema: {
      $defs: {
        node: {
          type: "object",
          properties: {
            value: { type: "integer" },
            children: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 3 },
          },
          required: ["value"],
          additionalProperties: false,
        },
      },
      $ref: "#/$defs/node",
    },
    valid: [
      { value: 1 },
      { value: 1, children: [] },
      { value: 1, children: [{ value: 2, children: [{ value: 3 }] }, { value: 4 }] },
    ],
    invalid: [
      { children: [] },
      { value: 1, children: [{}] },
      { value: 1, children: [{ value: 1 }, { value: 1 }, { value: 1 }, { value: 1 }] },
    ],
  },
  {
    name: "recursive linked list",
    schema: {
      $defs: {
        list: {
          anyOf: [
            { type: "null" },
            {
              type: "object",
              properties: { head: { type: "string" }, tail: { $ref: "#/$defs/list" } },
              required: ["head", "tail"],
              additionalProperties: false,
            },
          ],
        },
      },
      $ref: "#/$defs/list",
    },
    valid: [null, { head: "a", tail: null }, { head: "a", tail: { head: "b", tail: null } }],
    invalid: [{ head: "a" }, { head: "a", tail: { head: 1, tail: null } }],
  },
  {
    name: "mutually recursive definitions",
    schema: {
      $defs: {
        expr: { anyOf: [{ type: "number" }, { $ref: "#/$defs/op" }] },
        op: {
          type: "object",
          properties: {
            op: { enum: ["+", "*"] },
            args: { type: "array", items: { $ref: "#/$defs/expr" }, minItems: 2, maxItems: 2 },
          },
          required: ["op", "args"],
          additionalProperties: false,
        },
      },
      $ref: "#/$defs/expr",
    },
    valid: [1, { op: "+", args: [1, 2] }, { op: "*", args: [{ op: "+", args: [1, 2] }, 3] }],
    invalid: [{ op: "-", args: [1, 2] }, { op: "+", args: [1] }, "1"],
  },
  {
    name: "recursive JSON-like value",
    schema: {
      $defs: {
        v: {
          anyOf: [
            { type: "string" },
            { type: "array", items: { $ref: "#/$defs/v" } },
            { type: "object", additionalProperties: { $ref: "#/$defs/v" } },
          ],
        },
      },
      $ref: "#/$defs/v",
    },
    valid: ["a", [], ["a", ["b"]], { k: ["x", { y: "z" }] }],
    invalid: [1, ["a", 1], { k: null }],
  },
  {
    name: "allOf of $refs",
    schema: {
      $defs: {
        a: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] },
        b: { properties: { y: { type: "integer" } }, required: ["y"] },
      },
      allOf: [{ $ref: "#/$defs/a" }, { $ref: "#/$defs/b" }],
    },
    valid: [{ x: 1, y: 2 }],
    invalid: [{ x: 1 }, { y: 2 }],
  },
  {
    name: "anyOf of $refs with nullable",
    schema: { $defs: { s: { type: "string", nullable: true } }, anyOf: [{ $ref: "#/$defs/s" }, { type: "boolean" }] },
    valid: ["a", null, true],
    invalid: [1],
  },
];
