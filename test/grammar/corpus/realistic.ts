// Realistic schemas: tool parameters and structured-output shapes.
import type { Case } from "./case.ts";

export const realistic: Case[] = [
  {
    name: "tool: get_weather",
    schema: {
      type: "object",
      properties: {
        location: { type: "string", description: "City and country" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["location"],
      additionalProperties: false,
    },
    valid: [{ location: "Paris, FR" }, { location: "Boston", unit: "fahrenheit" }],
    invalid: [{ unit: "celsius" }, { location: "x", unit: "kelvin" }, { location: 5 }],
  },
  {
    name: "tool: search with paging",
    schema: {
      type: "object",
      properties: {
        query: { type: "string", minLength: 1, maxLength: 200 },
        limit: { type: "integer", minimum: 1, maximum: 50, default: 10 },
        offset: { type: "integer", minimum: 0 },
        filters: {
          type: "object",
          properties: { lang: { type: "string", pattern: "^[a-z]{2}$" }, after: { type: "string", format: "date" } },
          additionalProperties: false,
        },
      },
      required: ["query"],
      additionalProperties: false,
    },
    valid: [{ query: "cats" }, { query: "cats", limit: 50, offset: 0, filters: { lang: "en", after: "2024-01-01" } }],
    invalid: [
      { query: "" },
      { query: "cats", limit: 0 },
      { query: "cats", limit: 51 },
      { query: "cats", filters: { lang: "eng" } },
      { query: "cats", filters: { after: "2024-13-01" } },
    ],
  },
  {
    name: "tool: send_email",
    schema: {
      type: "object",
      properties: {
        to: { type: "array", items: { type: "string", format: "email" }, minItems: 1, maxItems: 10 },
        subject: { type: "string", maxLength: 120 },
        body: { type: "string" },
        cc: { type: "array", items: { type: "string", format: "email" } },
        priority: { enum: ["low", "normal", "high"] },
      },
      required: ["to", "subject", "body"],
      additionalProperties: false,
    },
    valid: [
      { to: ["a@b.co"], subject: "Hi", body: "Hello\nthere" },
      { to: ["a@b.co", "c.d@e.org"], subject: "", body: "", cc: [], priority: "high" },
    ],
    invalid: [
      { to: [], subject: "Hi", body: "x" },
      { to: ["not-an-email"], subject: "Hi", body: "x" },
      { to: ["a@b.co"], subject: "Hi" },
    ],
  },
  {
    name: "tool: create_calendar_event",
    schema: {
      type: "object",
      properties: {
        title: { type: "string" },
        start: { type: "string", format: "date-time" },
        end: { type: "string", format: "date-time" },
        attendees: {
          type: "array",
          items: {
            type: "object",
            properties: { email: { type: "string", format: "email" }, optional: { type: "boolean" } },
            required: ["email"],
            additionalProperties: false,
          },
        },
        location: { type: ["string", "null"] },
        reminderMinutes: { type: "integer", enum: [0, 5, 10, 30, 60] },
      },
      required: ["title", "start", "end"],
      additionalProperties: false,
    },
    valid: [
      { title: "Sync", start: "2024-05-01T10:00:00Z", end: "2024-05-01T10:30:00Z" },
      {
        title: "Sync",
        start: "2024-05-01T10:00:00+02:00",
        end: "2024-05-01T11:00:00+02:00",
        attendees: [{ email: "x@y.io", optional: true }],
        location: null,
        reminderMinutes: 10,
      },
    ],
    invalid: [
      { title: "Sync", start: "tomorrow", end: "2024-05-01T10:30:00Z" },
      { title: "Sync", start: "2024-05-01T10:00:00Z", end: "2024-05-01T10:30:00Z", reminderMinutes: 15 },
    ],
  },
  {
    name: "tool: run_sql",
    schema: {
      type: "object",
      properties: {
        sql: { type: "string", pattern: "^(SELECT|WITH) " },
        params: { type: "array", items: { type: ["string", "number", "boolean", "null"] } },
        timeoutMs: { type: "integer", minimum: 100, maximum: 60000 },
      },
      required: ["sql"],
      additionalProperties: false,
    },
    valid: [
      { sql: "SELECT 1" },
      { sql: "WITH x AS (SELECT 1) SELECT * FROM x", params: [1, "a", null, true], timeoutMs: 5000 },
    ],
    invalid: [{ sql: "DROP TABLE x" }, { sql: "SELECT 1", timeoutMs: 99 }, { sql: "SELECT 1", params: [[1]] }],
  },
  {
    name: "tool: file edit with oneOf actions",
    schema: {
      type: "object",
      properties: {
        path: { type: "string", pattern: "^[\\w./-]+$" },
        action: {
          oneOf: [
            {
              type: "object",
              properties: { type: { const: "replace" }, old: { type: "string" }, new: { type: "string" } },
              required: ["type", "old", "new"],
              additionalProperties: false,
            },
            {
              type: "object",
              properties: { type: { const: "append" }, text: { type: "string" } },
              required: ["type", "text"],
              additionalProperties: false,
            },
            {
              type: "object",
              properties: { type: { const: "delete" } },
              required: ["type"],
              additionalProperties: false,
            },
          ],
        },
      },
      required: ["path", "action"],
      additionalProperties: false,
    },
    valid: [
      { path: "src/a.ts", action: { type: "delete" } },
      { path: "./x", action: { type: "replace", old: "a", new: "b" } },
      { path: "README.md", action: { type: "append", text: "\n" } },
    ],
    invalid: [
      { path: "a b", action: { type: "delete" } },
      { path: "a", action: { type: "move" } },
      { path: "a", action: { type: "append" } },
    ],
  },
  {
    name: "structured output: extraction",
    schema: {
      type: "object",
      properties: {
        people: {
          type: "array",
          items: {
            type: "object",
            properties: {
              name: { type: "string" },
              age: { type: ["integer", "null"], minimum: 0, maximum: 130 },
              roles: { type: "array", items: { enum: ["author", "editor", "reviewer"] }, maxItems: 3 },
            },
            required: ["name", "age", "roles"],
            additionalProperties: false,
          },
        },
        summary: { type: "string", maxLength: 280 },
      },
      required: ["people", "summary"],
      additionalProperties: false,
    },
    valid: [
      { people: [], summary: "" },
      {
        people: [
          { name: "Ann", age: null, roles: ["author"] },
          { name: "Bo", age: 40, roles: [] },
        ],
        summary: "Two people.",
      },
    ],
    invalid: [
      { people: [{ name: "Ann", roles: [] }], summary: "" },
      { people: [{ name: "Ann", age: 200, roles: [] }], summary: "" },
    ],
  },
  {
    name: "structured output: classification with confidence",
    schema: {
      type: "object",
      properties: {
        label: { enum: ["positive", "negative", "neutral"] },
        confidence: { type: "number", minimum: 0, maximum: 1 },
        reasons: { type: "array", items: { type: "string", maxLength: 100 }, minItems: 1, maxItems: 3 },
      },
      required: ["label", "confidence", "reasons"],
      additionalProperties: false,
    },
    valid: [
      { label: "positive", confidence: 0.93, reasons: ["great"] },
      { label: "neutral", confidence: 1, reasons: ["a", "b", "c"] },
    ],
    invalid: [
      { label: "positive", confidence: 1.2, reasons: ["x"] },
      { label: "mixed", confidence: 0.5, reasons: ["x"] },
      { label: "neutral", confidence: 0.5, reasons: [] },
    ],
  },
  {
    name: "OpenAPI-style nullable fields",
    schema: {
      type: "object",
      properties: {
        id: { type: "string", format: "uuid" },
        parentId: { type: "string", format: "uuid", nullable: true },
        count: { type: "integer", nullable: true, minimum: 0 },
      },
      required: ["id", "parentId", "count"],
      additionalProperties: false,
    },
    valid: [
      { id: "123e4567-e89b-12d3-a456-426614174000", parentId: null, count: null },
      { id: "123e4567-e89b-12d3-a456-426614174000", parentId: "123e4567-e89b-12d3-a456-426614174001", count: 3 },
    ],
    invalid: [
      { id: "x", parentId: null, count: null },
      { id: "123e4567-e89b-12d3-a456-426614174000", parentId: null, count: -1 },
    ],
  },
  {
    name: "geojson point",
    schema: {
      type: "object",
      properties: {
        type: { const: "Point" },
        coordinates: {
          type: "array",
          prefixItems: [
            { type: "number", minimum: -180, maximum: 180 },
            { type: "number", minimum: -90, maximum: 90 },
          ],
          items: false,
          minItems: 2,
        },
      },
      required: ["type", "coordinates"],
      additionalProperties: false,
    },
    valid: [
      { type: "Point", coordinates: [2.35, 48.85] },
      { type: "Point", coordinates: [-180, 90] },
    ],
    invalid: [
      { type: "Point", coordinates: [200, 0] },
      { type: "Point", coordinates: [0] },
      { type: "Line", coordinates: [0, 0] },
    ],
  },
  {
    name: "menu with nested sections (recursive)",
    schema: {
      $defs: {
        item: {
          type: "object",
          properties: {
            label: { type: "string", minLength: 1 },
            href: { type: "string", format: "uri" },
            children: { type: "array", items: { $ref: "#/$defs/item" } },
          },
          required: ["label"],
          additionalProperties: false,
        },
      },
      type: "array",
      items: { $ref: "#/$defs/item" },
    },
    valid: [
      [],
      [
        { label: "Home", href: "https://x.io/" },
        { label: "Docs", children: [{ label: "API", href: "https://x.io/api" }] },
      ],
    ],
    invalid: [[{ label: "" }], [{ label: "A", href: "not a uri" }]],
  },
  {
    name: "config with patternless map",
    schema: {
      type: "object",
      properties: {
        version: { const: 2 },
        env: { type: "object", additionalProperties: { type: "string" } },
        ports: { type: "array", items: { type: "integer", minimum: 1, maximum: 65535 } },
      },
      required: ["version"],
      additionalProperties: false,
    },
    valid: [{ version: 2 }, { version: 2, env: { HOME: "/root", EMPTY: "" }, ports: [80, 443, 65535] }],
    invalid: [
      { version: 1 },
      { version: 2, env: { A: 1 } },
      { version: 2, ports: [0] },
      { version: 2, ports: [65536] },
    ],
  },
  {
    name: "chat message union",
    schema: {
      oneOf: [
        {
          type: "object",
          properties: { role: { const: "user" }, content: { type: "string" } },
          required: ["role", "content"],
          additionalProperties: false,
        },
        {
          type: "object",
          properties: {
            role: { const: "tool" },
            tool_call_id: { type: "string", pattern: "^call_[A-Za-z0-9]{8}$" },
            content: { type: "string" },
          },
          required: ["role", "tool_call_id", "content"],
          additionalProperties: false,
        },
      ],
    },
    valid: [
      { role: "user", content: "hi" },
      { role: "tool", tool_call_id: "call_ABCdef12", content: "{}" },
    ],
    invalid: [
      { role: "tool", content: "x" },
      { role: "tool", tool_call_id: "call_x", content: "x" },
      { role: "system", content: "x" },
    ],
  },
  {
    name: "pydantic-style model with $defs and titles",
    schema: {
      $defs: {
        Address: {
          title: "Address",
          type: "object",
          properties: { street: { title: "Street", type: "string" }, city: { title: "City", type: "string" } },
          required: ["street", "city"],
        },
      },
      title: "Person",
      type: "object",
      properties: {
        name: { title: "Name", type: "string" },
        address: { $ref: "#/$defs/Address" },
        tags: { title: "Tags", type: "array", items: { type: "string" }, default: [] },
      },
      required: ["name", "address"],
    },
    valid: [
      { name: "A", address: { street: "1 Main", city: "X" } },
      { name: "A", address: { street: "1 Main", city: "X" }, tags: ["t"] },
    ],
    invalid: [{ name: "A" }, { name: "A", address: { street: "1 Main" } }],
  },
  {
    name: "zod-style optional nullable union",
    draft: "07",
    schema: {
      type: "object",
      properties: {
        value: { anyOf: [{ type: "string" }, { type: "number" }, { type: "null" }] },
        when: { anyOf: [{ type: "string", format: "date-time" }, { type: "null" }] },
      },
      required: ["value"],
      additionalProperties: false,
      $schema: "http://json-schema.org/draft-07/schema#",
    },
    valid: [{ value: null }, { value: "x", when: null }, { value: 1, when: "2024-01-01T00:00:00Z" }],
    invalid: [{ value: true }, { value: 1, when: "yesterday" }, {}],
  },
];
