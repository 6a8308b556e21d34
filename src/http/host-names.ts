// Host names as the listener's checks read them: which name a Host header
// carries. Whether a name is loopback is src/runtime/loopback.ts.

/** The name in a Host value ("name", "name:port", "[v6]:port"); undefined when it is not that shape. */
export function hostName(value: string): string | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^[\]:/@\s]+)(?::\d{1,5})?$/.exec(value.trim());
  return m?.[1];
}
