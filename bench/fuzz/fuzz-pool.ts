// The objects a fuzz run made (files, batches, stored responses) and the
// placeholders that name them (fuzz-kit.ts, PoolKind): `@@kind@@` is one
// made at setup and never deleted, `@@kind~@@` one made during the run, which
// a later request may have deleted. Under --auth each object belongs to the
// key that made it; a request naming another key's object expects what the
// spec says of hidden ones (the server treats it as unknown).
import { pick, type PoolKind, type Rng, type Spec } from "./fuzz-kit.ts";

interface Held {
  id: string;
  /** The scope of the key that made it ("open" without --auth). */
  scope: string;
}

/** Ids that name nothing, for `@@kind~@@` before the run has made one. */
const NOTHING: Record<PoolKind, string> = {
  file: "file-000000000000000000000000",
  batchfile: "file-000000000000000000000000",
  batch: "batch_000000000000",
  response: "resp_000000000000",
};
/** The run keeps at most this many objects of a kind to name (the newest). */
const MADE_CAP = 200;
const PLACEHOLDER = /@@(file|batchfile|batch|response)(~?)@@/g;

export class ObjectPool {
  private readonly kept = new Map<PoolKind, Held[]>();
  private readonly made = new Map<PoolKind, Held[]>();

  keep(kind: PoolKind, id: string, scope: string): void {
    this.kept.set(kind, [...(this.kept.get(kind) ?? []), { id, scope }]);
  }

  add(kind: PoolKind, id: string, scope: string): void {
    const list = this.made.get(kind) ?? [];
    list.push({ id, scope });
    if (list.length > MADE_CAP) list.shift();
    this.made.set(kind, list);
  }

  /** A deleted object is no longer named (a later request may still have picked it: those expect 404 too). */
  forget(id: string): void {
    for (const list of this.made.values()) {
      const at = list.findIndex((h) => h.id === id);
      if (at >= 0) list.splice(at, 1);
    }
  }

  /**
   * The spec with its placeholders filled for a request sent by `scope`; `hidden` when it names an object of another
   * scope.
   */
  fill(spec: Spec, r: Rng, scope: string): { spec: Spec; hidden: boolean } {
    let hidden = false;
    const sub = (text: string) =>
      text.replace(PLACEHOLDER, (_, kind: PoolKind, made: string) => {
        const list = (made ? this.made : this.kept).get(kind) ?? [];
        if (list.length === 0) return NOTHING[kind];
        // Mostly the sender's own objects; sometimes another key's, to check that it stays unknown.
        const own = list.filter((h) => h.scope === scope);
        const held = own.length && r() < 0.8 ? pick(r, own) : pick(r, list);
        if (held.scope !== scope) hidden = true;
        return held.id;
      });
    const path = spec.path === undefined ? undefined : sub(spec.path);
    const body = typeof spec.body === "string" ? sub(spec.body) : spec.body;
    return {
      spec: { ...spec, ...(path === undefined ? {} : { path }), ...(body === undefined ? {} : { body }) },
      hidden,
    };
  }
}
