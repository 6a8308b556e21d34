// Structured output over HTTP (docs/api/openai.md#structured-output): response_format json_object
// and json_schema, the raw `grammar` field, and the 400s for what cannot be
// enforced, before any generation starts.
import Ajv2020 from "ajv/dist/2020";
import { describe, expect, test } from "bun:test";
import { envelope, postJson, useServer, user } from "../support.ts";

const s = useServer();
const ajv = new Ajv2020({ strict: false });

const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 },
  },
  required: ["name", "age", "tags"],
  additionalProperties: false,
};

const chat = (extra: Record<string, unknown>) =>
  postJson(s, "/v1/chat/completions", {
    model: s.model,
    messages: user("describe a person as JSON"),
    max_tokens: 200,
    temperature: 1,
    ...extra,
  });

describe("structured output", () => {
  test("json_schema: every finished reply validates, over several seeds, streamed and not", async () => {
    const validate = ajv.compile(PERSON);
    let finished = 0;
    for (const seed of [1, 2, 3, 4]) {
      const { status, json } = await chat({
        seed,
        response_format: { type: "json_schema", json_schema: { name: "person", schema: PERSON, strict: true } },
      });
      expect(status).toBe(200);
      const choice = json.choices[0];
      if (choice.finish_reason !== "stop") {
        expect(choice.finish_reason).toBe("length");
        continue;
      }
      finished++;
      const value = JSON.parse(choice.message.content);
      expect({ value, valid: validate(value) }).toEqual({ value, valid: true });
    }
    expect(finished).toBeGreaterThan(0);
  });

  test("json_object: the reply is a JSON object", async () => {
    const { json } = await chat({ seed: 5, response_format: { type: "json_object" } });
    if (json.choices[0].finish_reason === "stop")
      expect(typeof JSON.parse(json.choices[0].message.content)).toBe("object");
    else expect(json.choices[0].finish_reason).toBe("length");
  });

  test("a raw GBNF grammar constrains the reply", async () => {
    const { json } = await chat({ seed: 6, grammar: 'root ::= ("yes" | "no") "."' });
    expect(json.choices[0].message.content).toMatch(/^(yes|no)\.$/);
    expect(json.choices[0].finish_reason).toBe("stop");
  });

  test("a reply cut by the token cap is length, even when constrained", async () => {
    const { json } = await chat({
      seed: 7,
      max_tokens: 3,
      response_format: { type: "json_schema", json_schema: { name: "p", schema: PERSON } },
    });
    expect(json.choices[0].finish_reason).toBe("length");
    expect(json.usage.completion_tokens).toBe(3);
  });

  test("a keyword the compiler cannot enforce is a 400 naming it and its path", async () => {
    const schema = { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } };
    const { status, json } = await chat({
      response_format: { type: "json_schema", json_schema: { name: "x", schema } },
    });
    expect(status).toBe(400);
    const e = envelope(json);
    expect(e.message).toStartWith("constraint unsatisfiable: ");
    expect(e.message).toContain("'multipleOf' at /properties/n/multipleOf");
    expect(e.param).toBe("response_format.json_schema.schema.properties.n.multipleOf");
  });

  test("non-strict mode may ignore what it cannot enforce", async () => {
    const schema = { type: "object", properties: { n: { type: "integer", multipleOf: 3 } }, required: ["n"] };
    const { status } = await chat({
      max_tokens: 4,
      response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: false } },
    });
    expect(status).toBe(200);
  });

  test("json_schema with no schema, a grammar that does not compile, an unknown format type: 400", async () => {
    const noSchema = await chat({ response_format: { type: "json_schema", json_schema: { name: "x" } } });
    expect(noSchema.status).toBe(400);
    expect(envelope(noSchema.json).param).toBe("response_format.json_schema.schema");
    const bad = await chat({ grammar: "root ::= missing" });
    expect(bad.status).toBe(400);
    expect(envelope(bad.json).message).toStartWith("constraint unsatisfiable: ");
    const syntax = await chat({ grammar: 'root ::= "unterminated' });
    expect(syntax.status).toBe(400);
    expect(envelope(syntax.json).message).toMatch(/^constraint unsatisfiable: 1:\d+/);
    const kind = await chat({ response_format: { type: "xml" } });
    expect(kind.status).toBe(400);
    expect(envelope(kind.json).param).toBe("response_format.type");
  });
});
