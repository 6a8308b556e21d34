// A token radix tree over the prefixes the engine can reuse: each entry is a
// token sequence whose KV is held somewhere (a free KV sequence in the pool, or
// a state export in host memory). A lookup walks a prompt down the tree and
// reports, for each kind of holder, the entry sharing the longest prefix with
// it. Matching is on token ids only (docs/design.md#prefix-cache).

interface Node<E> {
  /** The tokens on the edge into this node. */
  edge: number[];
  children: Map<number, Node<E>>;
  /** Every entry whose tokens pass through (or end at) this node. */
  entries: Set<E>;
  parent?: Node<E>;
}

export interface PrefixMatch<E> {
  entry: E;
  /** Tokens the entry shares with the prompt. */
  length: number;
}

function newNode<E>(edge: number[], parent?: Node<E>): Node<E> {
  return { edge, children: new Map(), entries: new Set(), parent };
}

export class PrefixTree<E> {
  private readonly root = newNode<E>([]);
  private readonly paths = new Map<E, number[]>();

  get size(): number {
    return this.paths.size;
  }

  /** The tokens an entry was inserted with. */
  tokensOf(entry: E): number[] | undefined {
    return this.paths.get(entry);
  }

  entries(): IterableIterator<E> {
    return this.paths.keys();
  }

  /** Adds an entry for `tokens` (the array is kept; do not mutate it afterwards). */
  insert(entry: E, tokens: number[]): void {
    if (this.paths.has(entry)) this.remove(entry);
    this.paths.set(entry, tokens);
    let node = this.root;
    node.entries.add(entry);
    let i = 0;
    while (i < tokens.length) {
      let child = node.children.get(tokens[i]!);
      if (!child) {
        child = newNode<E>(tokens.slice(i), node);
        node.children.set(tokens[i]!, child);
        child.entries.add(entry);
        return;
      }
      // Walk the edge as far as it agrees; split it where it stops agreeing.
      let k = 0;
      while (k < child.edge.length && i + k < tokens.length && child.edge[k] === tokens[i + k]) k++;
      if (k < child.edge.length) child = this.split(child, k);
      child.entries.add(entry);
      node = child;
      i += k;
    }
  }

  /** Removes an entry; nodes no entry passes through any more are pruned. */
  remove(entry: E): void {
    const tokens = this.paths.get(entry);
    if (!tokens) return;
    this.paths.delete(entry);
    this.root.entries.delete(entry);
    let node = this.root;
    let i = 0;
    while (i < tokens.length) {
      const child = node.children.get(tokens[i]!);
      if (!child) break;
      child.entries.delete(entry);
      if (child.entries.size === 0) {
        node.children.delete(tokens[i]!);
        break;
      }
      node = child;
      i += child.edge.length;
    }
  }

  /**
   * For each kind an entry can be (as `kindOf` names it), the entry sharing
   * the longest prefix with `prompt`, looking at most `max` tokens deep. Ties
   * go to the entry `prefer` ranks first (e.g. the most recently used).
   */
  longest<K extends string>(
    prompt: number[],
    max: number,
    kindOf: (entry: E) => K,
    prefer: (a: E, b: E) => number = () => 0,
  ): Map<K, PrefixMatch<E>> {
    // The path the prompt walks: each node with the matched depth at its end.
    const path: [Node<E>, number][] = [];
    let node = this.root;
    let depth = 0;
    while (depth < max) {
      const child = node.children.get(prompt[depth]!);
      if (!child) break;
      let k = 0;
      while (k < child.edge.length && depth + k < max && child.edge[k] === prompt[depth + k]) k++;
      depth += k;
      path.push([child, depth]);
      if (k < child.edge.length) break;
      node = child;
    }
    // Deepest node first: the first holder of a kind found is its longest match.
    const best = new Map<K, PrefixMatch<E>>();
    for (let p = path.length - 1; p >= 0; p--) {
      const [at, length] = path[p]!;
      for (const entry of at.entries) {
        const kind = kindOf(entry);
        const have = best.get(kind);
        if (!have) best.set(kind, { entry, length });
        else if (have.length === length && prefer(entry, have.entry) < 0) have.entry = entry;
      }
    }
    return best;
  }

  /** Entries whose whole token sequence is a prefix of `tokens` (the same length included). */
  prefixesOf(tokens: number[]): E[] {
    const out: E[] = [];
    let node = this.root;
    let depth = 0;
    while (depth < tokens.length) {
      const child = node.children.get(tokens[depth]!);
      if (!child || child.edge.length > tokens.length - depth) break;
      let k = 0;
      while (k < child.edge.length && child.edge[k] === tokens[depth + k]) k++;
      if (k < child.edge.length) break;
      depth += k;
      for (const e of child.entries) if (this.paths.get(e)!.length === depth) out.push(e);
      node = child;
    }
    return out;
  }

  /** Splits a node's edge after `at` tokens; returns the new upper node. */
  private split(node: Node<E>, at: number): Node<E> {
    const parent = node.parent!;
    const upper = newNode<E>(node.edge.slice(0, at), parent);
    for (const e of node.entries) upper.entries.add(e);
    parent.children.set(upper.edge[0]!, upper);
    node.edge = node.edge.slice(at);
    node.parent = upper;
    upper.children.set(node.edge[0]!, node);
    return upper;
  }
}
