// A small least-recently-used map, and the content key its users look
// things up by: work an agent repeats every turn (its tools' call grammar,
// the render of its system prompt) is done once and looked up after.
import { createHash } from "node:crypto";

export class Lru<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (value === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, value);
    return value;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }

  delete(key: string): void {
    this.map.delete(key);
  }
}

/** A key for a JSON value's content (a digest, so large values make short keys). */
export function contentKey(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("base64");
}
