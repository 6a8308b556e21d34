// One access-log line per generation (docs/cli.md#logging), to stderr:
// <-- 200 POST /v1/chat/completions model=m prompt=812 cached=640 completion=256
//     ttft=312ms prefill=551 tok/s decode=74.9 tok/s total=3792ms finish=stop

export class RequestTimer {
  readonly started = performance.now();
  firstToken?: number;
  lastToken?: number;

  tokenDelivered(): void {
    const now = performance.now();
    this.firstToken ??= now;
    this.lastToken = now;
  }
}

export interface AccessRecord {
  status: number;
  route: string;
  model: string;
  prompt: number;
  cached: number;
  completion: number;
  finish: string;
}

export function accessLine(r: AccessRecord, t: RequestTimer): string {
  const total = performance.now() - t.started;
  const ttft = t.firstToken === undefined ? undefined : t.firstToken - t.started;
  const cold = r.prompt - r.cached;
  const prefill = ttft && cold > 0 ? `${((cold * 1000) / ttft).toFixed(0)} tok/s` : "-";
  const span = t.firstToken !== undefined && t.lastToken !== undefined ? t.lastToken - t.firstToken : 0;
  const decode = span > 0 && r.completion > 1 ? `${(((r.completion - 1) * 1000) / span).toFixed(1)} tok/s` : "-";
  return `<-- ${r.status} POST ${r.route} model=${r.model} prompt=${r.prompt} cached=${r.cached} completion=${r.completion} ttft=${ttft === undefined ? "-" : `${ttft.toFixed(0)}ms`} prefill=${prefill} decode=${decode} total=${total.toFixed(0)}ms finish=${r.finish}`;
}

export function logAccess(r: AccessRecord, t: RequestTimer): void {
  if (process.env.SUPERFLUID_QUIET === "1") return;
  console.error(accessLine(r, t));
}
