// POST /v1/rerank and /rerank (docs/api/embeddings.md#rerank): documents
// scored against a query, best first, in the shape llama-server, Jina and
// Cohere clients read. A reranker GGUF (rank pooling) scores each
// query-document pair itself, the pair built as llama-server builds it; on a
// model that only embeds, the score is the cosine similarity of the
// document's embedding to the query's.
import * as v from "valibot";
import type { ServedModel } from "../../daemon/served-model.ts";
import { cosine, embedTokens, embeddingFacts, MAX_INPUTS, tokenizeInputs } from "../../pipeline/embedding.ts";
import { checkArrayLength } from "../chat-limits.ts";
import { readJsonBody } from "../body.ts";
import { invalidRequest } from "../../daemon/request-error.ts";
import { loadedOr404, namedOrDefault } from "../models.ts";
import type { ServerContext } from "../server-context.ts";
import { int, object, opt, parseWith } from "../validate.ts";

const rerankSchema = v.looseObject({
  model: opt(v.string("model must be a string")),
  query: v.string("query must be a string"),
  documents: v.array(
    v.union(
      [v.string(), object({ text: v.string("must be a string") })],
      "must be a string or an object with a text field",
    ),
  ),
  top_n: opt(int(1)),
  return_documents: opt(v.boolean()),
});

/**
 * One query-document pair as llama-server gives it to a reranker: the GGUF's
 * `rerank` template with {query} and {document} filled in, else BOS, query,
 * EOS, SEP, document, EOS, each marker where the vocabulary adds it.
 */
async function pairTokens(model: ServedModel, query: string, document: string): Promise<number[]> {
  const template = model.info.namedChatTemplates.rerank;
  if (template !== undefined) {
    const text = template.replaceAll("{query}", query).replaceAll("{document}", document);
    return Array.from(await model.prompts.tokenize(text, { addSpecial: false, parseSpecial: true }));
  }
  const plain = { addSpecial: false, parseSpecial: false };
  const [q, d] = await Promise.all([model.prompts.tokenize(query, plain), model.prompts.tokenize(document, plain)]);
  const v = model.tokenizer.vocabInfo;
  const special = model.info.specialTokens;
  const eos = v.eos >= 0 ? v.eos : special.sep;
  const addEos = model.info.addEosToken === true && eos !== undefined;
  const addSep = model.tokenizer.meta("tokenizer.ggml.add_sep_token") === "true" && special.sep !== undefined;
  return [
    ...(v.addBos && v.bos >= 0 ? [v.bos] : []),
    ...q,
    ...(addEos ? [eos!] : []),
    ...(addSep ? [special.sep!] : []),
    ...d,
    ...(addEos ? [eos!] : []),
  ];
}

export async function rerank(ctx: ServerContext, request: Request): Promise<Response> {
  const body = await readJsonBody(request);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw invalidRequest("request body must be a JSON object");
  if ((body as { query?: unknown }).query === undefined)
    throw invalidRequest("you must provide a query parameter", "query");
  if ((body as { documents?: unknown }).documents === undefined)
    throw invalidRequest("you must provide a documents parameter", "documents");
  // Documents are embedded as inputs are (at most MAX_INPUTS a request); a
  // reranker tokenizes every pair before that bound would apply, so it applies here first.
  checkArrayLength((body as { documents?: unknown }).documents, "documents", MAX_INPUTS);
  const req = parseWith(rerankSchema, body);
  const model = req.model ? await loadedOr404(ctx.registry, req.model) : namedOrDefault(ctx.registry, null);
  const facts = embeddingFacts(model);
  const texts = req.documents.map((d) => (typeof d === "string" ? d : d.text));
  if (texts.length === 0) throw invalidRequest("documents must not be empty", "documents");
  // Held on the worker: an unload that starts meanwhile lets this request finish first.
  const { scores, promptTokens } = await model.worker.hold(async () => {
    if (facts.pooling === "rank") {
      const pairs = await Promise.all(texts.map((text) => pairTokens(model, req.query, text)));
      const tokens = await tokenizeInputs(model, pairs, { field: "documents", indexed: true });
      const scores = (await embedTokens(model, tokens, request.signal)).map((vector) => vector[0]!);
      return { scores, promptTokens: tokens.reduce((sum, t) => sum + t.length, 0) };
    }
    const [query] = await tokenizeInputs(model, [req.query], { field: "query" });
    const documents = await tokenizeInputs(model, texts, { field: "documents", indexed: true });
    const [queryVector, ...vectors] = await embedTokens(model, [query!, ...documents], request.signal);
    return {
      scores: vectors.map((vector) => cosine(queryVector!, vector)),
      promptTokens: [query!, ...documents].reduce((sum, t) => sum + t.length, 0),
    };
  });
  // Best first; equal scores keep the documents' order.
  const ranked = scores
    .map((score, index) => ({ index, score }))
    .sort((a, b) => b.score - a.score || a.index - b.index);
  const kept = ranked.slice(0, req.top_n ?? ranked.length);
  return Response.json({
    model: model.id,
    object: "list",
    results: kept.map(({ index, score }) => ({
      index,
      relevance_score: score,
      ...(req.return_documents ? { document: { text: texts[index] } } : {}),
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  });
}
