// Tool-call ids: random letters and digits. OpenAI-style ids are "call_" plus
// 24 of them; Mistral's templates insist on exactly 9 with no prefix.
const ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export function randomAlnum(length: number): string {
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  let s = "";
  for (const b of bytes) s += ID_CHARS[b % ID_CHARS.length];
  return s;
}

export function newCallId(): string {
  return `call_${randomAlnum(24)}`;
}
