// Reads the Prometheus text exposition (format 0.0.4) that GET /metrics
// answers, for `superfluid top`. A small parser of our own rather than a
// library: prom-client only writes the format, and the one parser on npm we
// use (`parse-prometheus-text-format`, in the tests) is a dev dependency
// whose family-shaped output we would reshape anyway. `top` needs only the
// samples: `name{labels} value`, with `#` lines (HELP, TYPE) skipped.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of an exposition; a line that does not parse is skipped. */
export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const sample = parseLine(line);
    if (sample) out.push(sample);
  }
  return out;
}

function parseLine(line: string): Sample | undefined {
  const nameEnd = line.search(/[{\s]/);
  if (nameEnd <= 0) return undefined;
  const name = line.slice(0, nameEnd);
  const labels: Record<string, string> = {};
  let i = nameEnd;
  if (line[i] === "{") {
    i++;
    for (;;) {
      while (line[i] === " " || line[i] === ",") i++;
      if (line[i] === "}") {
        i++;
        break;
      }
      const eq = line.indexOf("=", i);
      if (eq < 0 || line[eq + 1] !== '"') return undefined;
      const key = line.slice(i, eq).trim();
      // Label values escape backslash, double quote and newline (\\ \" \n).
      let value = "";
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === "\\" && j + 1 < line.length) {
          j++;
          value += line[j] === "n" ? "\n" : line[j];
        } else value += line[j];
      }
      if (j >= line.length) return undefined;
      labels[key] = value;
      i = j + 1;
    }
  }
  // After the labels: the value, then an optional timestamp we do not need.
  const valueText = line.slice(i).trim().split(/\s+/)[0];
  if (valueText === undefined || valueText === "") return undefined;
  const value = parseValue(valueText);
  return Number.isNaN(value) && valueText !== "NaN" ? undefined : { name, labels, value };
}

function parseValue(text: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text);
}
